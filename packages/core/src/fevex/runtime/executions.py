"""What a run store is asked to write and what it hands back: a new execution, a commit
under a lease, the lease itself and a takeover.

These are the values of the :class:`~fevex.runtime.RunStore` contract's calls, kept apart
from the contract so that the store rules (:mod:`fevex.runtime.store_rules`), which check
them, sit below the contract that names those rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from fevex.events import RunEvent
from fevex.runtime.records import AgentRun

__all__ = [
    "RUN_FIELDS_A_COMMIT_CHANGES",
    "EventOrder",
    "ExecutionCommit",
    "ExecutionCreate",
    "RunLease",
    "RunTakeover",
]

EventOrder = Literal["asc", "desc"]
RUN_FIELDS_A_COMMIT_CHANGES = frozenset(("status", "output", "usage", "error", "pause", "wake_at"))


@dataclass(slots=True)
class RunLease:
    """The right to write a run: who holds it, which generation, and until when
    (seconds since the epoch, by the store's clock)."""

    owner: str
    generation: int
    expires_at: float


@dataclass(slots=True)
class RunTakeover:
    """A run as its new lease holder finds it: the ``lease`` just taken, and the run, its
    checkpoint and the sequence of its last event (0: none), all read under that lease,
    after whatever the previous holder committed.

    ``checkpoint`` is the stored JSON, or ``None`` when the run has none or its stored text
    is not JSON (a damaged row): the taker, who holds the lease, decides what that means.
    """

    lease: RunLease
    run: AgentRun
    checkpoint: Any
    last_sequence: int


@dataclass(slots=True)
class ExecutionCreate:
    """A new run, the events that open it, its first checkpoint and the session it reserves.

    ``session_revision`` is the revision of the session snapshot the caller read its
    history from, or ``None`` when the session does not exist yet. The store grants the
    first lease to ``lease_owner`` for ``lease_seconds``.
    """

    run: AgentRun
    session_revision: int | None
    events: tuple[RunEvent, ...] = ()
    checkpoint: dict[str, Any] | None = None
    lease_owner: str = "local"
    lease_seconds: float = 30.0


@dataclass(slots=True)
class ExecutionCommit:
    """One atomic step of a run.

    ``revision`` is the run's new revision: the store accepts the commit only when its
    stored revision is ``revision - 1`` and ``lease`` (owner and generation) is the live
    lease. ``changes`` holds new values for run fields (``status``, ``output``, ``usage``,
    ``error``, ``pause``), ``checkpoint`` replaces the stored checkpoint when given. On a
    terminal step, ``history`` holds the messages that enter the session (completed runs
    only) and ``release_session`` frees the session; ``release_lease`` expires the lease
    in the same transaction (terminal and paused runs).
    """

    run_id: str
    revision: int
    updated_at: str
    lease: RunLease
    events: tuple[RunEvent, ...] = ()
    changes: Mapping[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None
    history: tuple[dict[str, Any], ...] | None = None
    release_session: bool = False
    release_lease: bool = False
