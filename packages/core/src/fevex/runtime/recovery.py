"""What recovery and wake-up passes report: the runs they continued, left for others, or
could not take."""

from __future__ import annotations

from dataclasses import dataclass

from fevex.runtime.records import AgentRun

__all__ = ["RecoverySweep", "SkippedRun", "WakeSweep"]


@dataclass(frozen=True, slots=True)
class SkippedRun:
    """An expired run the sweep left for another worker: ``code`` says why. A run of an
    agent this app does not have (``AGENT_NOT_FOUND``, after a deploy removed it) or one that
    only an app call continues (``TASK_NOT_CONTINUABLE``: a durable task) is never claimed, and
    its code is the one its kind gives for continuing it; a run claimed and then left
    (``CHECKPOINT_UNSUPPORTED`` for a checkpoint of a newer fevex, a store error) stays
    claimed until its lease lapses. Either way it stays ``running``, and a worker that can
    continue it will."""

    run_id: str
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class RecoverySweep:
    """One pass of ``recover_expired_runs``.

    ``recovered`` holds the runs the pass continued, as they stand after it (completed,
    paused, or failed, for example with ``CHECKPOINT_UNSUPPORTED`` when the checkpoint is
    unreadable); ``skipped`` the runs it claimed and left; ``unclaimed`` the ids of runs
    whose lease had expired but which no claim could take (a frozen worker still holds the
    row, or another sweep was taking it).
    """

    recovered: tuple[AgentRun, ...] = ()
    skipped: tuple[SkippedRun, ...] = ()
    unclaimed: tuple[str, ...] = ()
    # How many runs the pass took (recovered, or claimed and then left): 0 means idle.
    claimed: int = 0


@dataclass(frozen=True, slots=True)
class WakeSweep:
    """One pass of ``wake_due_runs``.

    ``woken`` holds the runs whose wait was over and that the pass continued, as they stand
    after it (completed, failed, cancelled, or paused again at their next wait); ``skipped``
    the runs it claimed and could not continue (their lease lapses, and the next pass tries
    again). ``claimed`` counts every due run the pass took, also those it found early (a
    child still going) and paused again.
    """

    woken: tuple[AgentRun, ...] = ()
    skipped: tuple[SkippedRun, ...] = ()
    claimed: int = 0
