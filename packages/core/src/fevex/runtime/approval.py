"""Pending approvals as a paused run lists them, and the decisions ``resume_run`` takes.

The value types are defined with :class:`~fevex.errors.RunPausedError`, which carries them
(so the error taxonomy needs nothing from the runtime); this is where the runtime reads
them from a run's ``pause`` and checks a decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fevex._ground.storable_text import UNSTORABLE_TEXT
from fevex.errors import ApprovalDecision, FevexRunError, PendingApproval, check_actor

__all__ = [
    "ApprovalDecision",
    "PendingApproval",
    "approval_decision",
    "check_actor",
    "pending_approvals",
    "waiting_children",
]


def pending_approvals(pause: Any, run_id: str | None = None) -> tuple[PendingApproval, ...]:
    """The approvals a run's ``pause`` lists (none for a pause of another kind)."""
    listed = pause.get("approvals") if isinstance(pause, Mapping) else None
    if not isinstance(listed, list):
        return ()
    return tuple(
        PendingApproval.from_json(item, run_id) for item in listed if isinstance(item, Mapping)
    )


def waiting_children(pause: Any) -> tuple[str, ...]:
    """The child runs a run's ``pause`` waits for (a workflow's or a team's step)."""
    if not isinstance(pause, Mapping) or pause.get("reason") != "children":
        return ()
    listed = pause.get("run_ids")
    return (
        tuple(item for item in listed if isinstance(item, str)) if isinstance(listed, list) else ()
    )


def approval_decision(decision: Any) -> tuple[str, str, Mapping[str, Any], str | None]:
    """The approval id, the verdict, the actor and the reason of ``decision`` (an
    :class:`ApprovalDecision` or a mapping of its fields); ``INVALID_ARGUMENT`` otherwise."""
    if isinstance(decision, ApprovalDecision):
        fields: Mapping[str, Any] = {
            "type": decision.type,
            "approval_id": decision.approval_id,
            "decision": decision.decision,
            "actor": decision.actor,
            "reason": decision.reason,
        }
    elif isinstance(decision, Mapping):
        fields = decision
    else:
        raise FevexRunError("INVALID_ARGUMENT", "A decision is an ApprovalDecision or a mapping.")
    if fields.get("type", "approval") != "approval":
        raise FevexRunError("INVALID_ARGUMENT", "Only approval decisions resume runs.")
    approval_id = fields.get("approval_id")
    verdict = fields.get("decision")
    if not isinstance(approval_id, str) or verdict not in ("approve", "reject"):
        raise FevexRunError(
            "INVALID_ARGUMENT", "A decision needs an approval_id and 'approve' or 'reject'."
        )
    actor = fields.get("actor")
    check_actor(actor)
    assert isinstance(actor, Mapping)
    reason = fields.get("reason")
    if reason is not None and (not isinstance(reason, str) or UNSTORABLE_TEXT.search(reason)):
        raise FevexRunError(
            "INVALID_ARGUMENT", "A decision's reason must be text a store can keep (no NUL)."
        )
    return approval_id, verdict, actor, reason
