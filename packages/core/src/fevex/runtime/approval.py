"""Pending approvals as a paused run lists them, and the decisions ``resume_run`` takes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from fevex._ground.storable_text import UNSTORABLE_TEXT
from fevex.errors import FevexRunError

__all__ = [
    "ApprovalDecision",
    "PendingApproval",
    "approval_decision",
    "check_actor",
    "pending_approvals",
    "waiting_children",
]

Actor = str | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """A person's decision on a pending approval; ``actor`` must carry an ``id``.
    ``reason`` (for a rejection) is what the model reads about it."""

    approval_id: str
    decision: Literal["approve", "reject"]
    actor: Mapping[str, Any]
    type: Literal["approval"] = "approval"
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A tool call that waits for a person's decision: ``id`` is the approval's, which the
    decision names; ``input`` the call's arguments (valid for the tool) as JSON; ``run_id``
    the run to resume with the decision: the paused run itself, or for a workflow or a
    team, the child run whose approval it waits for.

    ``approve(actor=...)`` and ``reject(actor=..., reason=...)`` build the
    :class:`ApprovalDecision` to pass to ``resume_run``; the actor is an id or a mapping
    with an ``id``.
    """

    id: str
    tool_name: str
    tool_call_id: str
    input: Any
    risk: str | None = None
    run_id: str | None = None

    def approve(self, *, actor: Actor) -> ApprovalDecision:
        return ApprovalDecision(self.id, "approve", _actor(actor))

    def reject(self, *, actor: Actor, reason: str | None = None) -> ApprovalDecision:
        return ApprovalDecision(self.id, "reject", _actor(actor), reason=reason)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], run_id: str | None = None) -> PendingApproval:
        risk = data.get("risk")
        return cls(
            id=str(data.get("id", "")),
            tool_name=str(data.get("tool_name", "")),
            tool_call_id=str(data.get("tool_call_id", "")),
            input=data.get("input"),
            risk=risk if isinstance(risk, str) else None,
            run_id=run_id,
        )


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


def _actor(actor: Actor) -> Mapping[str, Any]:
    described: Mapping[str, Any] = {"id": actor} if isinstance(actor, str) else dict(actor)
    check_actor(described)
    return described


def check_actor(actor: Any) -> None:
    if not isinstance(actor, Mapping) or not isinstance(actor.get("id"), str) or not actor["id"]:
        raise FevexRunError("INVALID_ARGUMENT", "actor must be a mapping with a non-empty 'id'.")


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
