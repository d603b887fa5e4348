"""The kernel's face: every coroutine method of the app has its blocking twin, the runs of
every kind start through one launcher (each ``run_*``, ``stream_*`` and ``start_*`` is a
call of it, not a body of its own), nothing below the face imports it, and an approval
decision is the run kind's to accept or refuse."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest

import fevex
from fevex import (
    Fevex,
    FevexRunError,
    RunPausedError,
    WorkflowStep,
    create_fevex,
    define_workflow,
)
from fevex.testing import FakeModel

SOURCE = Path(fevex.__file__).parent
LAUNCH_PREFIXES = ("run_", "stream_", "start_")


def _coroutine_methods() -> list[str]:
    names = []
    for name, member in inspect.getmembers(Fevex):
        if name.startswith("_") or name.endswith("_sync") or not callable(member):
            continue
        returns = str(getattr(member, "__annotations__", {}).get("return", ""))
        if (
            inspect.iscoroutinefunction(member)
            or inspect.isasyncgenfunction(member)
            or returns.startswith("AsyncGenerator")
        ):
            names.append(name)
    return names


def test_every_coroutine_method_has_a_blocking_twin() -> None:
    methods = _coroutine_methods()
    assert {"run_agent", "stream_team", "resume_run", "follow_events", "close"} <= set(methods)
    missing = [name for name in methods if not callable(getattr(Fevex, f"{name}_sync", None))]
    assert missing == []


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, under ``TYPE_CHECKING`` and inside functions too."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            found.add(node.module)
    return found


def test_the_engine_and_the_launch_path_never_import_the_app() -> None:
    climbing = {
        str(path.relative_to(SOURCE)): sorted(_imports(path) & {"fevex.app"})
        for path in sorted((SOURCE / "_internal").rglob("*.py"))
        if "fevex.app" in _imports(path)
    }
    assert climbing == {}


def _launch_methods() -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse((SOURCE / "_internal" / "launch" / "run_methods.py").read_text("utf-8"))
    twins = ast.parse((SOURCE / "_internal" / "launch" / "blocking_twins.py").read_text("utf-8"))
    found = {}
    for node in [*ast.walk(tree), *ast.walk(twins)]:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (
            node.name.startswith(LAUNCH_PREFIXES) and not node.name.startswith("run_sync")
        ):
            found[node.name] = node
    return found


def test_every_run_stream_and_start_method_is_a_call_of_the_launcher() -> None:
    methods = _launch_methods()
    kinds = ("agent", "workflow", "team")
    expected = {f"{prefix}{kind}" for prefix in LAUNCH_PREFIXES for kind in kinds}
    assert expected <= set(methods)
    bodies = {}
    for name, node in methods.items():
        body = [
            statement
            for statement in node.body
            if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))
        ]
        calls_launcher = "_launcher." in ast.unparse(node)
        is_stub = len(body) == 1 and isinstance(body[0], ast.Expr)  # an overload's "..."
        if not is_stub:
            bodies[name] = (len(body), calls_launcher)
    assert all(lines <= 2 and calls for lines, calls in bodies.values()), bodies
    # The ones derived from their coroutine method are no bodies at all.
    assert {f"{prefix}{kind}_sync" for prefix in ("stream_", "start_") for kind in kinds} & set(
        bodies
    ) == set()


@pytest.mark.anyio
async def test_a_decision_on_a_workflow_run_is_refused_by_its_kind_and_changes_nothing() -> None:
    @define_workflow(name="waiting", version="1", events={"go": None})
    async def waiting(step: WorkflowStep, input: Any) -> str:
        await step.wait_for_event("wait", "go")
        return "went"

    async with create_fevex(models={"default": FakeModel()}, workflows=[waiting]) as app:
        with pytest.raises(RunPausedError) as paused:
            await app.run_workflow(waiting)
        before = await app.get_run(paused.value.run_id)
        decision = {"approval_id": "apr_1", "decision": "approve", "actor": {"id": "ada"}}
        with pytest.raises(FevexRunError) as refused:
            await app.resume_run(before.id, decision)
        assert refused.value.code == "APPROVAL_NOT_FOUND"
        assert await app.get_run(before.id) == before
        # The event the workflow's kind accepts continues it.
        done = await app.send_event(before.id, "go", {"now": True})
        assert done.output == "went"
