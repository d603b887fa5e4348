"""A run's tree as the store holds it: what a group of child runs is admitted against.

Everything here is read from the store, so that a process that took a run over after a
crash counts what the tree used exactly as the process that died would have.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fevex._internal.workflows.step_host import RunTree
from fevex.runtime.records import AgentRun
from fevex.runtime.run_store import RunStore

__all__ = ["read_run_tree"]

_PAGE = 100


async def read_run_tree(
    store: RunStore, run: AgentRun, own_limits: Mapping[str, int | None]
) -> RunTree:
    """The tree of ``run``: its root's limits (``own_limits`` when ``run`` is the root),
    the run's depth, every run under the root, and the model calls of its agent runs
    (each agent run's checkpoint counts its model steps)."""
    root_id = run.root_run_id or run.id
    depth = 0
    cursor: AgentRun | None = run
    while cursor is not None and cursor.parent_run_id is not None:
        depth += 1
        cursor = await store.get_run(cursor.parent_run_id)
    limits: Mapping[str, int | None] = own_limits
    if root_id != run.id:
        limits = _limits(await store.get_checkpoint(root_id))
    runs: list[AgentRun] = []
    frontier = [root_id]
    while frontier:
        parent = frontier.pop()
        after = None
        while True:
            page = await store.list_runs(parent_run_id=parent, limit=_PAGE, after=after)
            runs.extend(page)
            frontier.extend(child.id for child in page)
            if len(page) < _PAGE:
                break
            after = page[-1].id
    model_calls = {
        member.id: _model_steps(await store.get_checkpoint(member.id))
        for member in runs
        if member.kind == "agent"
    }
    return RunTree(root_id, limits, depth, tuple(runs), model_calls)


def _limits(checkpoint: Any) -> dict[str, int | None]:
    limits = checkpoint.get("limits") if isinstance(checkpoint, dict) else None
    if not isinstance(limits, dict):
        return {}
    return {str(k): v for k, v in limits.items() if v is None or isinstance(v, int)}


def _model_steps(checkpoint: Any) -> int:
    step = checkpoint.get("step") if isinstance(checkpoint, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else 0
