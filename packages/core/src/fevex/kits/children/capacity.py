"""Whether a group of child runs fits its run tree: the bounds its root run sets, checked
once, before any child of the group starts."""

from __future__ import annotations

from collections.abc import Sequence

from fevex._internal.engine.model_calls import ModelCallGate
from fevex._internal.workflows.step_host import RunTree
from fevex.errors import FevexRunError
from fevex.kits.children.child_task import FrozenTask

__all__ = ["check_capacity"]


def check_capacity(
    step_id: str, tree: RunTree, new: Sequence[FrozenTask], gate: ModelCallGate
) -> None:
    """``CHILD_CAPACITY_EXCEEDED`` unless the ``new`` tasks fit: the group's depth within
    ``max_depth``, the tree's runs with the new children within ``max_children``, and
    their reservations within what the tree's ``max_model_calls`` has neither used nor
    reserved; ``max_concurrent_model_calls`` is kept by ``gate`` while they run."""
    limits = tree.root_limits
    depth = tree.depth + 1
    max_depth = limits.get("max_depth")
    if max_depth is not None and depth > max_depth:
        raise _exceeded(
            step_id,
            f"its children would run at depth {depth}, deeper than max_depth {max_depth}",
            limit="max_depth",
            value=depth,
        )
    max_children = limits.get("max_children")
    runs = len(tree.runs) + len(new)
    if max_children is not None and runs > max_children:
        raise _exceeded(
            step_id,
            f"the run tree would hold {runs} runs under its root, more than max_children "
            f"{max_children}",
            limit="max_children",
            value=runs,
        )
    wanted = sum(task.reserve_calls for task in new)
    available = gate.available()
    if available is not None and wanted > available:
        raise _exceeded(
            step_id,
            f"its tasks reserve {wanted} model calls and the tree has {available} left of "
            f"max_model_calls {gate.budget}",
            limit="max_model_calls",
            value=wanted,
        )


def _exceeded(step_id: str, reason: str, *, limit: str, value: int) -> FevexRunError:
    return FevexRunError(
        "CHILD_CAPACITY_EXCEEDED",
        f"The group of step {step_id!r} does not fit its run tree: {reason}. No child was started.",
        details={"step_id": step_id, "limit": limit, "value": value},
    )
