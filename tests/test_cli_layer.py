"""The ``fevex`` command is the top of the house: no other module of the core imports
``fevex.cli``. ``fevex serve`` and the CLI share the ``--app`` loader and the worker lanes
from below it instead, and the command registry plugins receive is in ``fevex.plugins``."""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "packages" / "core" / "src" / "fevex"


def _imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_nothing_below_the_cli_imports_it() -> None:
    cli = CORE / "cli"
    importers = sorted(
        str(path.relative_to(CORE))
        for path in CORE.glob("**/*.py")
        if cli not in path.parents
        and any(name == "fevex.cli" or name.startswith("fevex.cli.") for name in _imports_of(path))
    )
    assert importers == []


def test_the_probe_sees_an_import_of_the_cli(tmp_path: Path) -> None:
    # Guards the walk itself: each spelling of an import of the CLI is seen.
    for text in ("import fevex.cli", "from fevex import cli", "from fevex.cli import main"):
        module = tmp_path / "module.py"
        module.write_text(text)
        assert {"fevex.cli", "fevex.cli.main"} & _imports_of(module), text
