"""A task run's checkpoint: everything an attempt needs to know what the attempts before it
did, as plain JSON (DESIGN §12 lists its fields).

The model budget is counted in model calls: ``limit`` (``None``: unbounded), ``reserved``
(what the attempts so far set aside; an attempt's reservation is never given back, even
when it fails or dies) and ``used`` (the calls the task's child runs made, as the kernel
stored them: ``counted`` keeps each ended child's count, so it is read once).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from fevex.errors import FevexRunError

__all__ = ["TaskCheckpoint", "deadline_after", "seconds_until"]

# The version of this checkpoint's shape; a run stored in another is not continued.
FORMAT = 1


@dataclass(slots=True)
class TaskCheckpoint:
    definition_id: str
    revision: str
    state: Any
    max_attempts: int
    deadline_at: str
    budget_limit: int | None
    next_step_index: int = 0
    attempt_count: int = 0
    status: str = "ready"
    budget_reserved: int = 0
    # child run id -> the model calls it made (ended children only).
    counted: dict[str, int] = field(default_factory=dict)
    # This attempt's reservation and the calls used when it began.
    attempt_reserved: int | None = None
    attempt_used_at_start: int = 0
    # The reconcile step an attempt started and has not ended: journalled "started".
    started_step: str | None = None
    completed_steps: list[str] = field(default_factory=list)
    last_error: dict[str, Any] | None = None

    @property
    def budget_used(self) -> int:
        return sum(self.counted.values())

    def budget_json(self) -> dict[str, int | None]:
        return {
            "limit": self.budget_limit,
            "reserved": self.budget_reserved,
            "used": self.budget_used,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "definition_id": self.definition_id,
            "revision": self.revision,
            "state": self.state,
            "next_step_index": self.next_step_index,
            "attempt_count": self.attempt_count,
            "max_attempts": self.max_attempts,
            "deadline_at": self.deadline_at,
            "status": self.status,
            "model_budget": self.budget_json(),
            "counted": dict(self.counted),
            "attempt": {
                "reserved": self.attempt_reserved,
                "used_at_start": self.attempt_used_at_start,
            },
            "started_step": self.started_step,
            "completed_steps": list(self.completed_steps),
            "last_error": self.last_error,
        }

    @classmethod
    def from_json(cls, run_id: str, data: Any) -> TaskCheckpoint:
        """``CHECKPOINT_UNSUPPORTED`` for a checkpoint of another shape."""
        try:
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError("not a task checkpoint of this version")
            budget = data["model_budget"]
            attempt = data["attempt"]
            return cls(
                definition_id=str(data["definition_id"]),
                revision=str(data["revision"]),
                state=data["state"],
                max_attempts=int(data["max_attempts"]),
                deadline_at=str(data["deadline_at"]),
                budget_limit=budget["limit"],
                next_step_index=int(data["next_step_index"]),
                attempt_count=int(data["attempt_count"]),
                status=str(data["status"]),
                budget_reserved=int(budget["reserved"]),
                counted={str(key): int(value) for key, value in data["counted"].items()},
                attempt_reserved=attempt["reserved"],
                attempt_used_at_start=int(attempt["used_at_start"]),
                started_step=data["started_step"],
                completed_steps=[str(step) for step in data["completed_steps"]],
                last_error=data["last_error"],
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise FevexRunError(
                "CHECKPOINT_UNSUPPORTED",
                f"The checkpoint of task run {run_id} cannot be read ({error}).",
                details={"run_id": run_id},
            ) from None


def deadline_after(created_at: str, seconds: float) -> str:
    """The ISO 8601 UTC instant ``seconds`` after ``created_at`` (a fevex time stamp)."""
    start = datetime.fromisoformat(created_at)
    return (start + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def seconds_until(deadline_at: str, now: str) -> float:
    """Seconds from ``now`` to ``deadline_at`` (negative once it has passed)."""
    return (datetime.fromisoformat(deadline_at) - datetime.fromisoformat(now)).total_seconds()
