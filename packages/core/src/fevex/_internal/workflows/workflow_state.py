"""What a workflow run keeps between takeovers, and what its driver and its steps share.

The state is the run's checkpoint, plain JSON; :class:`Suspended` is how a waiting step
pauses the function; a step's stored failure is raised again by :func:`error_from_json`.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

from fevex._ground.worker_threads import in_worker_thread
from fevex._internal.engine.execution import Execution
from fevex._internal.engine.journal import StepJournal
from fevex.agents import Limits
from fevex.errors import FevexRunError

__all__ = [
    "Suspended",
    "WorkflowState",
    "call_for_run",
    "error_from_json",
    "invalid_step",
    "limits_json",
]

CHECKPOINT_VERSION = 1


class Suspended(BaseException):
    """Raised out of the workflow function to pause the run; a ``BaseException`` so that
    the function's own ``except Exception`` cannot swallow a pause."""

    def __init__(self, pause: dict[str, Any]) -> None:
        super().__init__(pause.get("reason"))
        self.pause = pause


@dataclasses.dataclass(slots=True)
class WorkflowState:
    """Everything a workflow run needs to continue, as its checkpoint keeps it."""

    input: Any
    limits: dict[str, int | None]
    journal: StepJournal
    # step id -> the child run of an agent step (known before the child is created).
    children: dict[str, str] = dataclasses.field(default_factory=dict)
    # step id -> when its timer fires (seconds since the epoch).
    timers: dict[str, float] = dataclasses.field(default_factory=dict)
    # Steps whose end has an event already (a wait settled by a takeover has none yet).
    announced: set[str] = dataclasses.field(default_factory=set)
    # Completed steps that have a compensation, in the order they completed.
    compensable: list[str] = dataclasses.field(default_factory=list)
    # The compensations run so far, by the id of the step they undo.
    compensations: StepJournal = dataclasses.field(default_factory=StepJournal)
    # The failure that started the compensations: the run's error once they are done.
    failure: dict[str, Any] | None = None

    def checkpoint(self) -> dict[str, Any]:
        return {
            "version": CHECKPOINT_VERSION,
            "input": self.input,
            "limits": self.limits,
            "journal": self.journal.to_json(),
            "children": self.children,
            "timers": self.timers,
            "announced": sorted(self.announced),
            "compensable": self.compensable,
            "compensations": self.compensations.to_json(),
            "failure": self.failure,
        }

    @classmethod
    def from_checkpoint(cls, run_id: str, checkpoint: Any) -> WorkflowState:
        try:
            if checkpoint.get("version") != CHECKPOINT_VERSION:
                raise ValueError("unknown checkpoint version")
            return cls(
                checkpoint["input"],
                dict(checkpoint["limits"]),
                StepJournal.from_json(checkpoint["journal"]),
                {str(k): str(v) for k, v in checkpoint["children"].items()},
                {str(k): float(v) for k, v in checkpoint["timers"].items()},
                {str(step) for step in checkpoint["announced"]},
                [str(step) for step in checkpoint.get("compensable", ())],
                StepJournal.from_json(checkpoint.get("compensations", {})),
                checkpoint.get("failure"),
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            raise FevexRunError(
                "CHECKPOINT_UNSUPPORTED",
                f"The checkpoint of workflow run {run_id} cannot be read by this fevex.",
                details={"run_id": run_id, "reason": "malformed"},
            ) from None


def limits_json(limits: Limits) -> dict[str, int | None]:
    """The limits a workflow checkpoints: all but ``max_tool_retries``, an agent's alone."""
    return {name: value for name, value in limits.to_json().items() if name != "max_tool_retries"}


def error_from_json(error: dict[str, Any] | None) -> FevexRunError:
    """The stored failure of a step, raised again as it was on every replay."""
    error = error or {}
    return FevexRunError(
        str(error.get("code", "WORKFLOW_STEP_FAILED")),
        str(error.get("message", "The step failed.")),
        recoverable=bool(error.get("recoverable", False)),
        details=dict(error.get("details") or {}),
    )


async def call_for_run(execution: Execution, function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` on the run's behalf: async awaited, sync in a thread."""
    guard = execution.guard
    if inspect.iscoroutinefunction(function):
        return await guard(function(*args))
    result = await guard(in_worker_thread(function, *args))
    if inspect.isawaitable(result):
        result = await guard(result)
    return result


def invalid_step(message: str) -> FevexRunError:
    return FevexRunError("WORKFLOW_STEP_INVALID", message)
