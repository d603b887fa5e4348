"""Decisions on pending approvals, as ``resume_run`` takes them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from fevex.errors import FevexRunError

__all__ = ["ApprovalDecision", "approval_decision", "check_actor"]


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """A person's decision on a pending approval; ``actor`` must carry an ``id``."""

    approval_id: str
    decision: Literal["approve", "reject"]
    actor: Mapping[str, Any]
    type: Literal["approval"] = "approval"


def check_actor(actor: Any) -> None:
    if not isinstance(actor, Mapping) or not isinstance(actor.get("id"), str) or not actor["id"]:
        raise FevexRunError("INVALID_ARGUMENT", "actor must be a mapping with a non-empty 'id'.")


def approval_decision(decision: Any) -> tuple[str, str, Mapping[str, Any]]:
    if isinstance(decision, ApprovalDecision):
        fields: Mapping[str, Any] = {
            "type": decision.type,
            "approval_id": decision.approval_id,
            "decision": decision.decision,
            "actor": decision.actor,
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
    return approval_id, verdict, actor
