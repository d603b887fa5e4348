"""The install instructions of every README work as written.

Each plugin README gives two lines: ``pip install "fevex[extra]"`` for an index and
``pip install ./packages/core ... ./packages/<plugin>`` for a checkout. The first must name an
extra of the core that brings the plugin; the second must name every workspace distribution
the plugin needs, since pip looks for any it is not given on the index. One checkout line is
run for real in a fresh venv (the READMEs' python examples: ``tests/test_readme_examples.py``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from fevex import FevexConfigurationError

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(path.parent for path in (ROOT / "packages").glob("*/pyproject.toml"))
PLUGINS = [path for path in PACKAGES if path.name != "core"]


def _name(requirement: str) -> str:
    """The normalized distribution name a requirement such as ``fevex-openai>=0.1`` names."""
    match = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    assert match is not None, requirement
    return re.sub(r"[-_.]+", "-", match.group()).lower()


def _project(package: Path) -> dict[str, object]:
    project: dict[str, object] = tomllib.loads((package / "pyproject.toml").read_text())["project"]
    return project


def _distribution(package: Path) -> str:
    return _name(str(_project(package)["name"]))


FOLDERS = {_distribution(package): package for package in PACKAGES}


def _workspace_needs(package: Path) -> set[str]:
    """The workspace distributions ``package`` needs installed, itself included."""
    needs = {_distribution(package)}
    dependencies = _project(package).get("dependencies", [])
    assert isinstance(dependencies, list)
    for text in dependencies:
        name = _name(text)
        if name in FOLDERS and name not in needs:
            needs |= _workspace_needs(FOLDERS[name])
    return needs


def _install_lines(readme: Path) -> list[str]:
    return [
        line.partition("#")[0].strip()
        for line in readme.read_text().splitlines()
        if line.startswith("pip install ")
    ]


def _checkout_line(readme: Path) -> str:
    (line,) = [line for line in _install_lines(readme) if "./packages/" in line]
    return line


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda package: package.name)
def test_a_plugin_readme_installs_from_an_index_with_an_extra_that_brings_it(
    plugin: Path,
) -> None:
    extras = _project(ROOT / "packages" / "core")["optional-dependencies"]
    assert isinstance(extras, dict)
    named = [
        match
        for line in _install_lines(plugin / "README.md")
        for match in re.findall(r'^pip install "fevex\[([a-z]+)\]"$', line)
    ]
    assert len(named) == 1, _install_lines(plugin / "README.md")
    brought = {_name(text) for text in extras[named[0]]}
    assert _distribution(plugin) in brought


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda package: package.name)
def test_a_plugin_readme_installs_from_a_checkout_with_every_folder_it_needs(
    plugin: Path,
) -> None:
    words = _checkout_line(plugin / "README.md").split()
    assert words[:2] == ["pip", "install"]
    folders = words[2:]
    assert all(folder.startswith("./packages/") for folder in folders), folders
    installed = {_distribution(ROOT / folder) for folder in folders}
    assert _workspace_needs(plugin) | {"fevex"} <= installed


def test_the_checkout_install_of_a_plugin_runs_as_written(tmp_path: Path) -> None:
    command = _checkout_line(ROOT / "packages" / "sqlite" / "README.md").split()
    venv = tmp_path / "venv"
    # A fresh environment with its own pip, as ``python -m venv`` makes, seeded from uv's
    # cache: ensurepip took a third of the test's time.
    seed = [sys.executable, "-m", "uv", "--quiet", "venv", "--seed", "--python", sys.executable]
    subprocess.run([*seed, str(venv)], check=True, timeout=300)
    bin_dir = venv / ("Scripts" if sys.platform == "win32" else "bin")
    install = subprocess.run(
        [str(bin_dir / "python"), "-m", *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr

    listed = subprocess.run(
        [str(bin_dir / "fevex"), "plugins"], capture_output=True, text=True, check=True
    )

    plugins = {plugin["name"]: plugin for plugin in json.loads(listed.stdout)}
    assert plugins["sqlite"]["distribution"] == "fevex-sqlite"
    assert plugins["sqlite"]["run_stores"] == ["sqlite"]


def test_the_core_readme_lists_every_extra_of_the_core() -> None:
    extras = _project(ROOT / "packages" / "core").get("optional-dependencies", {})
    assert isinstance(extras, dict)
    readme = (ROOT / "packages" / "core" / "README.md").read_text()
    listed = set(re.findall(r"^\| `([a-z]+)` \|", readme, flags=re.MULTILINE))
    assert listed == set(extras) - {"all"}


def test_the_openapi_yaml_hint_installs_what_the_extra_does_however_it_was_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fevex_openapi import create_openapi_tool_provider

    extras = _project(ROOT / "packages" / "openapi").get("optional-dependencies", {})
    assert isinstance(extras, dict)
    (requirement,) = extras["yaml"]
    monkeypatch.setitem(sys.modules, "yaml", None)  # what an environment without PyYAML gives
    with pytest.raises(FevexConfigurationError) as refused:
        create_openapi_tool_provider(
            document=f"openapi: 3.1.0\npaths: {{}}\n# {os.urandom(4).hex()}: never cached\n",
            operations={"allow": ["getInvoice"]},
        )
    assert refused.value.code == "OPENAPI_YAML_UNAVAILABLE"
    # The requirement itself, not an extra: an index or a checkout install takes it alike.
    assert f'pip install "{requirement}"' in refused.value.message
