"""Run events: the durable, ordered record of everything a run did.

Every event has a unique ``id``, the ``run_id`` it belongs to, a run-local ``sequence``
starting at 1, a ``type``, an ISO 8601 UTC ``occurred_at`` and a JSON ``payload``.
Events are serializable snapshots: treat them as read-only.

``tool.failed`` does not always end the run: a rejected approval, and a failure handed back
to the model (``retry: true``, with ``retries_left``), put the ``error`` in front of the
model as the call's result, and the run goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["EVENT_TYPES", "RunEvent", "RunEventType"]

RunEventType = Literal[
    "run.started",
    "model.started",
    "model.output.delta",
    "model.block.started",
    "model.tool_input.delta",
    "model.block.stopped",
    "model.completed",
    "tool.started",
    "tool.progress",
    "tool.completed",
    "tool.failed",
    "input.requested",
    "input.answered",
    "input.expired",
    "run.paused",
    "run.resumed",
    "run.recovered",
    "run.completed",
    "run.failed",
    "run.cancelled",
    "workflow.step.started",
    "workflow.step.completed",
    "workflow.step.failed",
    "workflow.waiting",
    "workflow.event.received",
    "workflow.compensation.started",
    "workflow.compensation.completed",
    "workflow.compensation.failed",
    "team.delegation.started",
    "team.delegation.completed",
    "team.delegation.failed",
    "team.handoff",
    "team.parallel.started",
    "team.parallel.completed",
    "team.parallel.failed",
    "team.waiting",
    "knowledge.loaded",
]

EVENT_TYPES: tuple[str, ...] = RunEventType.__args__  # type: ignore[attr-defined]


# Not frozen, as every record made per run, step, event or model delta (runs, commits,
# messages and their parts, model stream items): a frozen dataclass pays object.__setattr__
# for each field of each instance, which was a fifth of a tool-call run. Read them only.
@dataclass(slots=True)
class RunEvent:
    id: str
    run_id: str
    sequence: int
    type: str
    occurred_at: str
    payload: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "run_id": self.run_id,
            "sequence": self.sequence,
            "type": self.type,
            "occurred_at": self.occurred_at,
            "payload": self.payload,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunEvent:
        return cls(
            id=str(data["id"]),
            run_id=str(data["run_id"]),
            sequence=int(data["sequence"]),
            type=str(data["type"]),
            occurred_at=str(data["occurred_at"]),
            payload=dict(data["payload"]),
        )
