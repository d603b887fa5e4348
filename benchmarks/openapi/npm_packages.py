"""npm packages the OpenAPI benchmark and tests need, installed once into a cache folder.

``npm_package("@octokit/openapi", "23.0.2")`` runs ``npm install`` (the ordinary client,
against the registry npm is configured for) into ``<cache>/<name>@<version>/`` unless that
folder holds the package already, and returns the package's folder. The cache is
``$FEVEX_NPM_CACHE`` or ``~/.cache/fevex-tests/npm``; a lock file keeps two processes (two
test sessions, a test and a benchmark) from installing into one folder at once.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

__all__ = [
    "GITHUB_DESCRIPTION",
    "NpmUnavailableError",
    "github_description",
    "npm_cache",
    "npm_package",
]

#: GitHub's REST API description, as Octokit publishes it (OpenAPI 3.0.3, 1,223 operations).
GITHUB_DESCRIPTION = ("@octokit/openapi", "23.0.2", "generated/api.github.com.json")


class NpmUnavailableError(RuntimeError):
    """npm is not installed, so nothing can be installed from the npm registry."""


def npm_cache() -> Path:
    configured = os.environ.get("FEVEX_NPM_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "fevex-tests" / "npm"


def npm_package(name: str, version: str, *, timeout: float = 600) -> Path:
    """The folder of ``name@version``, installed into the cache first when it is not there."""
    npm = shutil.which("npm")
    folder = npm_cache() / f"{name.replace('/', '+')}@{version}"
    package = folder / "node_modules" / name
    if (package / "package.json").is_file():
        return package
    if npm is None:
        raise NpmUnavailableError(f"npm is not installed; it is needed to install {name}")
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (package / "package.json").is_file():
            subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--loglevel=error",
                 "--prefix", str(folder), f"{name}@{version}"],
                check=True, timeout=timeout, stdout=subprocess.DEVNULL,
            )  # fmt: skip
    return package


def github_description() -> Path:
    """GitHub's REST description (12.4 MiB of JSON), from the npm package ``@octokit/openapi``."""
    name, version, path = GITHUB_DESCRIPTION
    return npm_package(name, version) / path
