"""The core's rooms and the rule between them: an import goes down the layers, never up,
and no two rooms import each other (``UPWARD`` names the one exception and why).  Also the size
limits: no source module over 700 lines, no function over 80.

Run ``pytest tests/test_structure.py -q`` to see the figures; ``docs/architecture.md``
describes what each room owns.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "packages" / "core" / "src" / "fevex"

# From the ground floor up; a room may import rooms of its own layer or below.
LAYERS: list[set[str]] = [
    {"_ground", "__about__"},
    {"errors"},
    {"messages", "schemas", "policies", "net"},
    {"tools", "models"},
    {"events", "sandbox"},
    {"runtime", "observability"},
    {"knowledge"},
    {"agents", "plugins"},
    {"workflows"},
    {"teams"},
    {"_internal.engine"},
    {"_internal.composition", "_internal.tracing"},
    {"_internal.agents"},
    {"_internal.workflows"},
    {"kits"},
    {"_internal.launch", "_internal.hosting"},
    {"app"},
    {"__init__", "channels", "evals", "testing"},
    {"http"},
    {"cli"},
]
LAYER_OF = {room: floor for floor, rooms in enumerate(LAYERS) for room in rooms}
# The imports allowed to run up, each with why.
UPWARD: dict[tuple[str, str], str] = {
    # ``fevex.runtime.open_run_store`` resolves a URL's scheme through the plugins that register
    # stores, which in turn name the runtime's types: imported when called, never at import.
    ("runtime", "plugins"): "open_run_store finds the store plugin for a URL",
}


def _room(module: str) -> str:
    """``fevex._internal.engine.kernel`` -> ``_internal.engine``; ``fevex.runtime.x`` ->
    ``runtime``; ``fevex`` -> ``__init__``."""
    parts = module.split(".")[1:]
    if not parts:
        return "__init__"
    if parts[0] == "_internal":
        return ".".join(parts[:2])
    return parts[0]


def _module_name(path: Path) -> str:
    relative = path.relative_to(CORE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> Iterator[tuple[str, int]]:
    module = _module_name(path).split(".")
    package_parts = module if path.name == "__init__.py" else module[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[: len(package_parts) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield target, node.lineno
            for alias in node.names:
                yield f"{target}.{alias.name}", node.lineno


def _arrows() -> set[tuple[str, str, str]]:
    arrows: set[tuple[str, str, str]] = set()
    for path in sorted(CORE.rglob("*.py")):
        source_room = _room(_module_name(path))
        for target, line in _imports(path):
            if target != "fevex" and not target.startswith("fevex."):
                continue
            if target.count(".") >= 1 and target.split(".")[-1][:1].isupper():
                target = target.rsplit(".", 1)[0]
            target_room = _room(target)
            if target_room not in LAYER_OF:
                # ``from fevex import x`` names a submodule or a name of the barrel.
                continue
            if target_room != source_room:
                arrows.add((source_room, target_room, f"{path.relative_to(ROOT)}:{line}"))
    return arrows


def test_every_room_has_a_layer() -> None:
    rooms = {_room(_module_name(path)) for path in CORE.rglob("*.py")}
    assert rooms - set(LAYER_OF) == set()


def test_no_import_runs_back_up() -> None:
    upward = sorted(
        f"{where}: {source} -> {target}"
        for source, target, where in _arrows()
        if LAYER_OF[target] > LAYER_OF[source] and (source, target) not in UPWARD
    )
    assert upward == []


def test_no_two_rooms_import_each_other() -> None:
    pairs = {(source, target) for source, target, _ in _arrows()}
    circles = sorted(
        f"{a} <-> {b}"
        for a, b in pairs
        if (b, a) in pairs and a < b and not {(a, b), (b, a)} & set(UPWARD)
    )
    assert circles == []


def _source_files() -> Iterator[Path]:
    yield from sorted(ROOT.glob("packages/*/src/**/*.py"))


def test_no_module_over_700_lines() -> None:
    long_modules = {
        str(path.relative_to(ROOT)): count
        for path in _source_files()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > 700
    }
    assert long_modules == {}


def test_no_function_over_80_lines() -> None:
    long_functions: dict[str, int] = {}
    for path in _source_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 80:
                    long_functions[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = length
    assert long_functions == {}
