"""Plugins stand on ``fevex``'s public face only: every name a plugin imports from ``fevex``
comes from a barrel (``fevex`` itself or a public module right below it, such as
``fevex.runtime`` or ``fevex.knowledge``) that lists the name in its ``__all__``.

A plugin that needs a name its barrel does not export shows a public name is missing; this
test finds it, by reading every plugin's source (not importing it), lazy and
``TYPE_CHECKING`` imports included.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGES = Path(__file__).resolve().parents[1] / "packages"
PLUGIN_SOURCES = sorted(
    path for path in PACKAGES.glob("*/src/**/*.py") if path.relative_to(PACKAGES).parts[0] != "core"
)


def _is_barrel(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "fevex" and len(parts) <= 2 and not any(p.startswith("_") for p in parts)


def _exported(module: str) -> set[str]:
    return set(getattr(importlib.import_module(module), "__all__", ()))


def _is_public(module: str, name: str) -> bool:
    # A barrel below a barrel (``from fevex import runtime``) is public as well.
    return _is_barrel(module) and (name in _exported(module) or _is_barrel(f"{module}.{name}"))


def unexported_imports(source: str) -> Iterator[str]:
    """Each ``fevex`` import of ``source`` that does not go through a barrel's ``__all__``,
    spelt as the module and the name it imports."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            module = node.module
            if module.split(".")[0] != "fevex":
                continue
            for alias in node.names:
                if not _is_public(module, alias.name):
                    yield f"from {module} import {alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "fevex" and not _is_barrel(alias.name):
                    yield f"import {alias.name}"


def test_every_plugin_source_is_read() -> None:
    distributions = {path.relative_to(PACKAGES).parts[0] for path in PLUGIN_SOURCES}
    assert {"sqlite", "postgres", "mcp", "openapi", "openai"} <= distributions


@pytest.mark.parametrize("path", PLUGIN_SOURCES, ids=lambda path: str(path.relative_to(PACKAGES)))
def test_a_plugin_imports_only_what_fevex_exports(path: Path) -> None:
    assert list(unexported_imports(path.read_text())) == []


@pytest.mark.parametrize(
    "source",
    [
        "from fevex.runtime.store_rules import check_commit",
        "from fevex.runtime import store_rules",
        "from fevex.runtime import not_a_name",
        "import fevex.runtime.run_store",
        "from fevex._ground.clock import utc_now",
        "def lazy() -> None:\n    from fevex.tools.redaction import REDACTED",
    ],
)
def test_an_unexported_import_is_found(source: str) -> None:
    assert list(unexported_imports(source)) != []


@pytest.mark.parametrize(
    "source",
    [
        "from fevex.runtime import RunStore",
        "from fevex import create_fevex",
        "import fevex.runtime",
        "from .local import anything",
        "from pydantic import BaseModel",
    ],
)
def test_a_public_import_passes(source: str) -> None:
    assert list(unexported_imports(source)) == []
