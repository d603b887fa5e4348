"""Sessions for the fevex monorepo.

- ``suite``: every package installed editable, the whole test suite on the running Python
  and four worker processes (what the README's test command and ``.ci/run`` call; see
  ``tests/README.md``), with the HTTP tests' ``http-test`` group (``fevex[http]``'s libraries
  and a pinned schemathesis) and the console's ``ui-test`` group (Playwright for Python).
- ``tests(package)``: core plus one package, over the Python matrix.  What a package's tests
  need beyond the root ``test`` group goes in its own ``[dependency-groups] test``.
- ``contract(store)``: the run-store conformance suite on memory, SQLite and PostgreSQL.
- ``lint``, ``typecheck``: ruff and ``mypy --strict`` with the root ``pyproject.toml`` config.
- ``extras``: each ``fevex[extra]`` into a fresh venv from locally built wheels.
- ``build``: sdist and wheel of every package into ``dist/``.
- ``bench`` and the other benchmarks (``bench_http``: the SSE server against sse-starlette)
  live in ``benchmarks/sessions.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import nox
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parent
sys.path.insert(0, str(ROOT))
try:
    import benchmarks.sessions  # noqa: F401  (registers the `bench` session)
except ModuleNotFoundError as error:
    # Only a missing benchmarks module is optional; a broken import inside it must still show.
    if error.name not in {"benchmarks", "benchmarks.sessions"}:
        raise

nox.needs_version = ">=2024.10.9"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["suite"]

PYTHONS = ["3.11", "3.12", "3.13"]
CORE = "core"
PACKAGES = sorted(
    path.name for path in (ROOT / "packages").iterdir() if (path / "pyproject.toml").is_file()
)
LINT_TARGETS = ["packages", "tests", "examples", "benchmarks", "conftest.py", "noxfile.py"]
INSTALL_ENV = {"UV_COMPILE_BYTECODE": "1"}
# The suite on WORKERS processes (pytest-xdist; tests/README.md has the measurements behind the
# number), tests marked with one `xdist_group` on the same worker, and its 25 slowest tests
# named at the end; arguments after `--` come later and win.
WORKERS = 4
# The hundreds of Python processes the tests start read the workspace's modules from bytecode
# once it is written, instead of compiling them each time (PYTHONDONTWRITEBYTECODE, if set, is
# dropped for the suite alone).
BYTECODE_ENV: dict[str, str | None] = {"PYTHONDONTWRITEBYTECODE": None}
SUITE_OPTIONS = [
    "--numprocesses", str(WORKERS), "--dist", "loadgroup", "--durations", "25"
]  # fmt: skip
ROOT_PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")


def _expose_pyenv_interpreters() -> None:
    """Let nox find every matrix Python that pyenv has installed, not only the active one.

    pyenv's shims answer only for the active versions (``PYENV_VERSION``, which pyenv also
    sets for the ``python`` it starts), so with 3.11 active the 3.12 and 3.13 sessions would
    find no interpreter although pyenv holds them.  The active versions stay first so that
    ``python`` still means what it meant.
    """
    if shutil.which("pyenv") is None:
        return

    def pyenv(*arguments: str) -> str:
        completed = subprocess.run(["pyenv", *arguments], capture_output=True, text=True)
        return completed.stdout.strip()

    versions_dir = Path(os.environ.get("PYENV_ROOT") or pyenv("root")) / "versions"
    active = os.environ.get("PYENV_VERSION") or pyenv("version-name")
    chosen = [name for name in active.split(":") if name]
    for wanted in PYTHONS:
        patches = [
            int(path.name.removeprefix(f"{wanted}."))
            for path in versions_dir.glob(f"{wanted}.*")
            if path.name.removeprefix(f"{wanted}.").isdigit()
        ]
        if patches and f"{wanted}.{max(patches)}" not in chosen:
            chosen.append(f"{wanted}.{max(patches)}")
    if chosen:
        os.environ["PYENV_VERSION"] = ":".join(chosen)


_expose_pyenv_interpreters()


def _pyproject(package: str) -> dict[str, Any]:
    with (ROOT / "packages" / package / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)


def _distribution(package: str) -> str:
    return str(canonicalize_name(_pyproject(package)["project"]["name"]))


def _test_requirements(*packages: str) -> list[str]:
    """The root ``test`` group plus each package's own ``test`` group, if it declares one."""
    requirements = list(nox.project.dependency_groups(ROOT_PYPROJECT, "test"))
    for package in packages:
        pyproject = _pyproject(package)
        if "test" in pyproject.get("dependency-groups", {}):
            requirements += nox.project.dependency_groups(pyproject, "test")
    return requirements


def _workspace_dependencies(package: str) -> list[str]:
    """The packages of this checkout that ``package`` depends on (fevex-deepseek on
    fevex-openai): installed from here, never looked for on an index."""
    wanted = {
        str(canonicalize_name(Requirement(line).name))
        for line in _pyproject(package)["project"].get("dependencies", [])
    }
    return [other for other in PACKAGES if _distribution(other) in wanted]


def _editable(*packages: str) -> list[str]:
    arguments: list[str] = []
    for package in packages:
        arguments += ["-e", f"packages/{package}"]
    return arguments


def _test_dirs(*packages: str) -> list[str]:
    return [f"packages/{p}/tests" for p in packages if (ROOT / "packages" / p / "tests").is_dir()]


@nox.session
def suite(session: nox.Session) -> None:
    """Every package installed editable, then the whole suite in one pytest run on WORKERS
    processes."""
    http_test = nox.project.dependency_groups(ROOT_PYPROJECT, "http-test", "ui-test")
    session.install(
        *_editable(*PACKAGES), *_test_requirements(*PACKAGES), *http_test, env=INSTALL_ENV
    )
    session.run(
        "pytest", *SUITE_OPTIONS, *_test_dirs(*PACKAGES), "tests", *session.posargs,
        env=BYTECODE_ENV,
    )  # fmt: skip


@nox.session(python=PYTHONS)
@nox.parametrize("package", PACKAGES)
def tests(session: nox.Session, package: str) -> None:
    """Core plus this one package: its tests may not lean on what another plugin brings."""
    packages = sorted({CORE, package, *_workspace_dependencies(package)})
    session.install(*_editable(*packages), *_test_requirements(*packages), env=INSTALL_ENV)
    session.run("pytest", f"packages/{package}/tests", *session.posargs)


# The conformance suite (fevex.testing.check_run_store) as each store's tests run it.
CONTRACT_TESTS = {
    "memory": (CORE, "packages/core/tests/test_run_store_contract.py"),
    "sqlite": ("sqlite", "packages/sqlite/tests/test_sqlite_contract.py"),
    "postgres": ("postgres", "packages/postgres/tests/test_contract.py"),
}


@nox.session
@nox.parametrize("store", list(CONTRACT_TESTS))
def contract(session: nox.Session, store: str) -> None:
    """The run-store conformance suite on one store (PostgreSQL: a throwaway server)."""
    package, test_file = CONTRACT_TESTS[store]
    packages = sorted({CORE, package, *_workspace_dependencies(package)})
    session.install(*_editable(*packages), *_test_requirements(*packages), env=INSTALL_ENV)
    session.run("pytest", test_file, *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install(*nox.project.dependency_groups(ROOT_PYPROJECT, "lint"), env=INSTALL_ENV)
    targets = [target for target in LINT_TARGETS if (ROOT / target).exists()]
    session.run("ruff", "check", *targets)
    session.run("ruff", "format", "--check", "--diff", *targets)


@nox.session
def typecheck(session: nox.Session) -> None:
    session.install(
        *_editable(*PACKAGES),
        *nox.project.dependency_groups(ROOT_PYPROJECT, "typecheck"),
        env=INSTALL_ENV,
    )
    session.run("mypy", *[f"packages/{package}/src" for package in PACKAGES], *session.posargs)


@nox.session
def build(session: nox.Session) -> None:
    """sdist and wheel of every package into dist/, checked by twine."""
    session.install("build", "twine", env=INSTALL_ENV)
    out = ROOT / "dist"
    shutil.rmtree(out, ignore_errors=True)
    for package in PACKAGES:
        session.run("python", "-m", "build", "--outdir", str(out), f"packages/{package}")
    session.run("twine", "check", "--strict", *sorted(str(path) for path in out.iterdir()))


def _core_extras() -> dict[str, set[str]]:
    """Each extra the core declares, mapped to the workspace distributions it brings.

    Self-references such as ``all = ["fevex[openai,postgres]"]`` are followed.
    """
    core = _distribution(CORE)
    workspace = {_distribution(package) for package in PACKAGES}
    declared = {
        str(canonicalize_name(extra)): [Requirement(text) for text in requirements]
        for extra, requirements in _pyproject(CORE)["project"]
        .get("optional-dependencies", {})
        .items()
    }

    def expand(extra: str, seen: frozenset[str]) -> set[str]:
        brought: set[str] = set()
        for requirement in declared[extra]:
            name = str(canonicalize_name(requirement.name))
            if name == core:
                for inner in requirement.extras:
                    inner = str(canonicalize_name(inner))
                    if inner not in seen:
                        brought |= expand(inner, seen | {inner})
            elif name in workspace:
                brought.add(name)
        return brought

    return {extra: expand(extra, frozenset({extra})) for extra in declared}


def _fresh_venv(session: nox.Session, path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    session.run("python", "-m", "venv", str(path))
    scripts = "Scripts" if sys.platform == "win32" else "bin"
    return path / scripts


def _installed_fevex_distributions(session: nox.Session, bin_dir: Path) -> set[str]:
    listing = session.run(
        str(bin_dir / "python"), "-m", "pip", "list", "--format=json",
        external=True, silent=True, stderr=None,
    )  # fmt: skip
    assert isinstance(listing, str)
    names = {str(canonicalize_name(entry["name"])) for entry in json.loads(listing)}
    return {name for name in names if name == "fevex" or name.startswith("fevex-")}


def _listed_plugin_distributions(session: nox.Session, bin_dir: Path) -> set[str]:
    output = session.run(str(bin_dir / "fevex"), "plugins", external=True, silent=True, stderr=None)
    assert isinstance(output, str)
    plugins = json.loads(output)
    if not isinstance(plugins, list) or not all("distribution" in p for p in plugins):
        session.error(f"`fevex plugins` did not print a JSON array of plugins: {output!r}")
    return {str(canonicalize_name(plugin["distribution"])) for plugin in plugins}


@nox.session
def extras(session: nox.Session) -> None:
    """Install ``fevex`` and each ``fevex[extra]`` from freshly built wheels into fresh venvs.

    Each install must bring exactly the core plus that extra's plugin distributions, and
    ``fevex plugins`` must list exactly those.  ``all`` must bring every plugin.
    """
    session.install("build", env=INSTALL_ENV)
    tmp = Path(session.create_tmp())
    wheels = tmp / "wheels"
    shutil.rmtree(wheels, ignore_errors=True)
    for package in PACKAGES:
        session.run(
            "python", "-m", "build", "--wheel", "--outdir", str(wheels), f"packages/{package}"
        )

    core = _distribution(CORE)
    plugins = {_distribution(package) for package in PACKAGES} - {core}
    extras = _core_extras()
    if plugins:
        if extras.get("all") != plugins:
            session.error(
                f"fevex[all] brings {sorted(extras.get('all', ()))}, not {sorted(plugins)}"
            )
        orphans = plugins - set().union(*(v for k, v in extras.items() if k != "all"))
        if orphans:
            session.error(f"no extra of the core brings {sorted(orphans)}")

    # Pin every workspace distribution to the wheel just built, so that the index can never
    # stand in for the local code.
    constraints = tmp / "constraints.txt"
    constraints.write_text(
        "".join(
            f"{wheel.name.split('-')[0]}=={wheel.name.split('-')[1]}\n"
            for wheel in sorted(wheels.glob("*.whl"))
        )
    )

    targets = {"fevex": set()} | {f"fevex[{extra}]": brought for extra, brought in extras.items()}
    for target, brought in targets.items():
        session.log(f"Checking a fresh install of {target}")
        bin_dir = _fresh_venv(session, tmp / "venv")
        session.run(
            str(bin_dir / "python"), "-m", "pip", "install", "--quiet",
            "--find-links", str(wheels), "--constraint", str(constraints), target,
            external=True,
        )  # fmt: skip
        expected = {core} | brought
        installed = _installed_fevex_distributions(session, bin_dir)
        if installed != expected:
            session.error(f"{target} installed {sorted(installed)}, expected {sorted(expected)}")
        # The built-in plugin is listed under the core's distribution.
        listed = _listed_plugin_distributions(session, bin_dir)
        if listed != expected:
            session.error(f"`fevex plugins` after {target} lists {sorted(listed)}, not the same")
    shutil.rmtree(tmp / "venv", ignore_errors=True)
