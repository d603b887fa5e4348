"""Workflow and team steps see their run only through the step-host port: the modules of
the steps import nothing of the driver, its kind, the kernel, the store, the composition
or the event sink, and the workflow rooms import each other without a circle."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

PACKAGE = "fevex._internal.workflows"
STEPS = ("workflow_steps", "team_steps")
# What a step may import of the engine's rooms: the port, the state the driver and the
# steps share, the steps a team's wrap, and the signal of the run's own deadline.
ALLOWED_TO_STEPS = {
    f"{PACKAGE}.step_host",
    f"{PACKAGE}.workflow_state",
    f"{PACKAGE}.workflow_steps",
    "fevex._internal.engine.deadline",
}


def _folder() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    assert spec is not None
    assert spec.submodule_search_locations is not None
    return Path(next(iter(spec.submodule_search_locations)))


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top, in a function or for type checking."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    modules = {path.stem: path for path in _folder().glob("*.py") if path.stem != "__init__"}
    return {
        name: {
            imported.rsplit(".", 1)[1]
            for imported in _imports(path)
            if imported.startswith(f"{PACKAGE}.") and imported.rsplit(".", 1)[1] in modules
        }
        for name, path in modules.items()
    }


def test_steps_import_only_the_port_of_the_engine() -> None:
    folder = _folder()
    for name in STEPS:
        internal = {m for m in _imports(folder / f"{name}.py") if m.startswith("fevex._internal")}
        assert internal <= ALLOWED_TO_STEPS, (name, sorted(internal - ALLOWED_TO_STEPS))


def test_steps_name_no_part_of_the_driver() -> None:
    folder = _folder()
    for name in STEPS:
        text = (folder / f"{name}.py").read_text(encoding="utf-8")
        for reach in ("driver", ".kernel", ".store", ".composition", ".sink", ".execution"):
            assert reach not in text, (name, reach)


def test_the_workflow_rooms_import_each_other_without_a_circle() -> None:
    graph = _graph()
    assert {"step_host", "workflow_steps", "workflow_driver", "workflow_kind"} <= set(graph)

    def reaches(start: str, target: str, seen: set[str]) -> bool:
        for imported in graph[start]:
            if imported == target or (
                imported not in seen and reaches(imported, target, seen | {imported})
            ):
                return True
        return False

    circles = sorted(name for name in graph if reaches(name, name, {name}))
    assert circles == []
    # The port is the bottom of the rooms: it imports none of them.
    assert graph["step_host"] == set()


def test_the_driver_implements_every_member_of_the_port() -> None:
    from fevex._internal.workflows.step_host import StepHost
    from fevex._internal.workflows.workflow_driver import WorkflowDriver

    members = [
        name
        for name, value in vars(StepHost).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    ]
    # Child runs of both kinds, their cancellation and the run tree they are counted in.
    assert {"agent_child", "workflow_child", "cancel_child", "run_tree", "model_calls"} <= set(
        members
    )
    for name in members:
        assert getattr(WorkflowDriver, name) is not getattr(StepHost, name), name


def test_the_children_kit_reaches_its_run_only_through_the_port() -> None:
    spec = importlib.util.find_spec("fevex.kits.children")
    assert spec is not None
    assert spec.submodule_search_locations is not None
    folder = Path(next(iter(spec.submodule_search_locations)))
    allowed = {
        *ALLOWED_TO_STEPS,
        f"{PACKAGE}.team_steps",
        "fevex._internal.engine.journal",
        "fevex._internal.engine.model_calls",
    }
    for path in folder.glob("*.py"):
        internal = {m for m in _imports(path) if m.startswith("fevex._internal")}
        assert internal <= allowed, (path.name, sorted(internal - allowed))
        text = path.read_text(encoding="utf-8")
        for reach in (".kernel", ".store", ".composition", ".sink", ".execution"):
            assert reach not in text, (path.name, reach)
