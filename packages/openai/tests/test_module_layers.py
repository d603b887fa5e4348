"""The modules of fevex-openai import each other without a circle, type-only imports
included: a provider's profile (and the strict subset it holds) is described without the
strict-mode checker, the error mapping or the SDK loader, which all need the profile."""

from __future__ import annotations

import ast
from pathlib import Path

import fevex_openai

PACKAGE = Path(fevex_openai.__file__).parent


def _imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.glob("*.py"):
        if path.name == "__init__.py":
            continue
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fevex_openai."):
                found.add(str(node.module).removeprefix("fevex_openai."))
        graph[path.stem] = found
    return graph


def test_no_module_of_fevex_openai_imports_itself_back() -> None:
    graph = _imports()
    circles: list[list[str]] = []

    def walk(module: str, path: list[str]) -> None:
        for imported in sorted(graph.get(module, ())):
            if imported == path[0]:
                circles.append([*path, imported])
            elif imported not in path:
                walk(imported, [*path, imported])

    for module in sorted(graph):
        walk(module, [module])
    assert circles == []
    assert graph["strict_subset"] == set()
    assert graph["profile"] == {"strict_subset"}
