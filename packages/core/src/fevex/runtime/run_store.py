"""The run-store contract: what the runtime needs from persistence.

Stores keep and return plain JSON only. Every write that changes a run is checked against
the run's ``revision`` (compare-and-swap), and session reservation is atomic with run
creation, so two runs can never hold one session.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from fevex.errors import FevexRunError
from fevex.events import RunEvent
from fevex.runtime.records import AgentRun, Session

__all__ = [
    "EventOrder",
    "ExecutionCommit",
    "ExecutionCreate",
    "RunStore",
    "invalid_cursor",
    "run_conflict",
]

EventOrder = Literal["asc", "desc"]


@dataclass(frozen=True, slots=True)
class ExecutionCreate:
    """A new run, the events that open it and the session it reserves.

    ``session_revision`` is the revision of the session snapshot the caller read its
    history from, or ``None`` when the session does not exist yet.
    """

    run: AgentRun
    session_revision: int | None
    events: tuple[RunEvent, ...] = ()


RUN_FIELDS_A_COMMIT_CHANGES = frozenset(("status", "output", "usage", "error", "pause"))


@dataclass(frozen=True, slots=True)
class ExecutionCommit:
    """One atomic step of a run.

    ``revision`` is the run's new revision: the store accepts the commit only when its
    stored revision is ``revision - 1``. ``changes`` holds new values for run fields
    (``status``, ``output``, ``usage``, ``error``, ``pause``). On the terminal step,
    ``history`` holds the messages that enter the session (completed runs only) and
    ``release_session`` frees the session for the next run.
    """

    run_id: str
    revision: int
    updated_at: str
    events: tuple[RunEvent, ...] = ()
    changes: Mapping[str, Any] | None = None
    history: tuple[dict[str, Any], ...] | None = None
    release_session: bool = False


@runtime_checkable
class RunStore(Protocol):
    """Persistence for runs, their events and sessions."""

    async def create_execution(self, create: ExecutionCreate) -> Session:
        """Create the run and reserve its session atomically.

        Raises ``RUN_CONFLICT`` when the session is held by another run, changed since
        ``session_revision`` was read, or the run id exists. Returns the reserved session.
        """
        ...

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        """Store the step atomically; ``RUN_CONFLICT`` when the revision is stale."""
        ...

    async def get_run(self, run_id: str) -> AgentRun | None: ...

    async def get_session(self, session_id: str) -> Session | None: ...

    async def save_session(self, session: Session, *, expected_revision: int) -> Session:
        """Replace a session that is not held by a run; ``SESSION_CONFLICT`` when its
        stored revision is not ``expected_revision``. Returns it with the next revision."""
        ...

    async def list_events(
        self,
        run_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: EventOrder = "asc",
    ) -> Sequence[RunEvent]:
        """Events of a run by sequence; ``after`` is an event id of the same run and
        selects the events after it in sequence order (``INVALID_CURSOR`` otherwise)."""
        ...

    async def close(self) -> None: ...


def run_conflict(message: str, **details: Any) -> FevexRunError:
    return FevexRunError("RUN_CONFLICT", message, recoverable=True, details=details)


def invalid_cursor(run_id: str, cursor: str) -> FevexRunError:
    return FevexRunError(
        "INVALID_CURSOR",
        f"Event cursor {cursor!r} does not belong to run {run_id}.",
        details={"run_id": run_id},
    )
