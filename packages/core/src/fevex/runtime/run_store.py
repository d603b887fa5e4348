"""The run-store contract: what the runtime needs from persistence.

Stores keep and return plain JSON only. Every write that changes a run is checked against
the run's ``revision`` (compare-and-swap), and session reservation is atomic with run
creation, so two runs can never hold one session.
"""

from __future__ import annotations

from collections.abc import Sequence
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


@dataclass(frozen=True, slots=True)
class ExecutionCommit:
    """One atomic step of a run: its new snapshot (``run.revision`` one above the stored
    one), the events of that step, and on the terminal step the messages that enter the
    session history (``history``, completed runs only) and the release of the session."""

    run: AgentRun
    events: tuple[RunEvent, ...] = ()
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
