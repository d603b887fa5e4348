"""What a paused run waits for, and what ends the wait.

A wait is a step of the run's journal: the driver journals it ``started`` and pauses the
run with a ``pause`` that names it; whatever ends the wait (an external event, a timer, the
end of the child runs) completes or fails that journal entry, in the commit that takes the
run over, and the driver, replaying, finds the step's result there. The ``pause`` (stored on
the run, plain JSON) says what the run waits for:

- ``{"reason": "approval", "approvals": [...]}``: a decision (``resume_run``);
- ``{"reason": "event", "step_id", "event"}``: the event of that name (``send_event``),
  until ``wake_at`` when the pause has one (then the step fails ``EVENT_TIMEOUT``);
- ``{"reason": "timer", "step_id", "wake_at"}``: the time ``wake_at`` (seconds since the
  epoch), when a worker claims the run;
- ``{"reason": "children", "step_id", "run_ids"}``: the end of each of those runs, whose
  last commit wakes the parent.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from fevex._ground.clock import utc_now
from fevex._internal.engine.journal import StepJournal
from fevex.errors import FevexRunError
from fevex.runtime.records import TERMINAL_STATUSES, AgentRun

__all__ = [
    "children_pause",
    "event_pause",
    "paused_until",
    "receive_event",
    "resolve_wake_up",
    "timer_pause",
    "waits_for_event",
]

ReadRun = Callable[[str], Awaitable[AgentRun | None]]


def event_pause(step_id: str, name: str, *, wake_at: float | None = None) -> dict[str, Any]:
    return {"reason": "event", "step_id": step_id, "event": name, "wake_at": wake_at}


def timer_pause(step_id: str, wake_at: float) -> dict[str, Any]:
    return {"reason": "timer", "step_id": step_id, "wake_at": wake_at}


def children_pause(step_id: str, run_ids: Sequence[str]) -> dict[str, Any]:
    return {"reason": "children", "step_id": step_id, "run_ids": list(run_ids)}


def paused_until(pause: Mapping[str, Any]) -> float | None:
    """The ``wake_at`` a pause commits: its timer or its event's deadline, else ``None``."""
    wake_at = pause.get("wake_at")
    if pause.get("reason") in ("timer", "event") and isinstance(wake_at, int | float):
        return float(wake_at)
    return None


def waits_for_event(run: AgentRun, name: str) -> bool:
    pause = run.pause or {}
    return run.status == "paused" and pause.get("reason") == "event" and pause.get("event") == name


def receive_event(
    checkpoint: dict[str, Any], pause: Mapping[str, Any], payload: Any, actor: Any
) -> None:
    """Complete the journal step that waits for the event ``pause`` names, in the
    checkpoint: the step's result is ``{"payload", "actor", "received_at"}``."""
    _settle(
        checkpoint,
        pause,
        output={"payload": payload, "actor": actor, "received_at": utc_now()},
    )


async def resolve_wake_up(
    checkpoint: dict[str, Any], pause: Mapping[str, Any], read_run: ReadRun
) -> bool:
    """Whether a claimed wake-up ends the run's wait; if so the journal step is settled in
    ``checkpoint``. A wake-up that came early (a timer not due yet, children still going, a
    pause nothing wakes) leaves the checkpoint as it is: the run pauses again."""
    reason = pause.get("reason")
    wake_at = pause.get("wake_at")
    due = isinstance(wake_at, int | float) and wake_at <= time.time()
    if reason == "timer" and due:
        _settle(checkpoint, pause, output={"fired_at": utc_now()})
        return True
    if reason == "event" and due:
        error = FevexRunError(
            "EVENT_TIMEOUT",
            f"The event {pause.get('event')!r} did not arrive in time.",
            details={"event": pause.get("event")},
        )
        _settle(checkpoint, pause, error=error.to_json())
        return True
    if reason == "children":
        ended: dict[str, Any] = {}
        for run_id in pause.get("run_ids") or ():
            child = await read_run(str(run_id))
            if child is None or child.status not in TERMINAL_STATUSES:
                return False
            ended[child.id] = {"status": child.status, "output": child.output, "error": child.error}
        _settle(checkpoint, pause, output=ended)
        return True
    return False


def _settle(
    checkpoint: dict[str, Any],
    pause: Mapping[str, Any],
    *,
    output: Any = None,
    error: dict[str, Any] | None = None,
) -> None:
    step_id = str(pause.get("step_id"))
    try:
        journal = StepJournal.from_json(checkpoint["journal"])
        entry = journal.entries[step_id]
    except (KeyError, TypeError, ValueError):
        raise FevexRunError(
            "CHECKPOINT_UNSUPPORTED",
            f"The checkpoint has no journal entry for the step {step_id!r} the run waits on.",
            details={"reason": "malformed", "step_id": step_id},
        ) from None
    if entry.status == "started":
        if error is None:
            journal.completed(step_id, output)
        else:
            journal.failed(step_id, error)
    checkpoint["journal"] = journal.to_json()
