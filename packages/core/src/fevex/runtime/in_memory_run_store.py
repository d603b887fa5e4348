"""The default store: everything in process memory, gone when the process ends.

All its methods complete without awaiting anything else, so on one event loop each
operation is atomic without locks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from fevex.errors import FevexRunError
from fevex.events import RunEvent
from fevex.runtime.records import AgentRun, Session
from fevex.runtime.run_store import (
    EventOrder,
    ExecutionCommit,
    ExecutionCreate,
    invalid_cursor,
    run_conflict,
)

__all__ = ["InMemoryRunStore"]


class InMemoryRunStore:
    """A :class:`~fevex.runtime.RunStore` for tests and single-process apps."""

    def __init__(self) -> None:
        self._runs: dict[str, AgentRun] = {}
        self._sessions: dict[str, Session] = {}
        self._events: dict[str, list[RunEvent]] = {}
        self._cursors: dict[str, tuple[str, int]] = {}

    async def create_execution(self, create: ExecutionCreate) -> Session:
        run = create.run
        if run.id in self._runs:
            raise run_conflict(f"Run {run.id} already exists.", run_id=run.id)
        session = self._sessions.get(run.session_id)
        if session is None:
            if create.session_revision is not None:
                raise run_conflict(f"Session {run.session_id} no longer exists.")
            session = Session(run.session_id, run.created_at, run.created_at)
        else:
            _check_session_free(session, run.session_id)
            if session.revision != create.session_revision:
                raise run_conflict(
                    f"Session {run.session_id} changed while the run was being created."
                )
        session = dataclasses.replace(
            session, active_run_id=run.id, revision=session.revision + 1, updated_at=run.created_at
        )
        self._sessions[session.id] = session
        self._runs[run.id] = run
        self._events[run.id] = []
        self._append_events(run.id, create.events)
        return session

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        run = commit.run
        stored = self._runs.get(run.id)
        if stored is None:
            raise FevexRunError("RUN_NOT_FOUND", f"Run {run.id} does not exist.")
        if stored.revision + 1 != run.revision:
            raise run_conflict(
                f"Run {run.id} was changed by another writer (revision {stored.revision}).",
                run_id=run.id,
            )
        self._runs[run.id] = run
        self._append_events(run.id, commit.events)
        if commit.history is not None or commit.release_session:
            session = self._sessions[run.session_id]
            self._sessions[session.id] = dataclasses.replace(
                session,
                history=session.history + commit.history if commit.history else session.history,
                active_run_id=None if commit.release_session else session.active_run_id,
                revision=session.revision + 1,
                updated_at=run.updated_at,
            )

    def _append_events(self, run_id: str, events: Sequence[RunEvent]) -> None:
        stored = self._events[run_id]
        for event in events:
            if event.sequence != len(stored) + 1:
                raise run_conflict(
                    f"Event sequence {event.sequence} of run {run_id} is out of order.",
                    run_id=run_id,
                )
            stored.append(event)
            self._cursors[event.id] = (run_id, event.sequence)

    async def get_run(self, run_id: str) -> AgentRun | None:
        return self._runs.get(run_id)

    async def get_session(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    async def save_session(self, session: Session, *, expected_revision: int) -> Session:
        stored = self._sessions.get(session.id)
        if stored is None:
            raise FevexRunError("SESSION_NOT_FOUND", f"Session {session.id} does not exist.")
        _check_session_free(stored, session.id)
        if stored.revision != expected_revision:
            raise FevexRunError(
                "SESSION_CONFLICT",
                f"Session {session.id} changed (revision {stored.revision}, "
                f"expected {expected_revision}); reload it and decide again.",
                recoverable=True,
            )
        saved = dataclasses.replace(session, revision=expected_revision + 1, active_run_id=None)
        self._sessions[session.id] = saved
        return saved

    async def list_events(
        self,
        run_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: EventOrder = "asc",
    ) -> Sequence[RunEvent]:
        events = self._events.get(run_id, [])
        start = 0
        if after is not None:
            owner = self._cursors.get(after)
            if owner is None or owner[0] != run_id:
                raise invalid_cursor(run_id, after)
            start = owner[1]
        selected = events[start:]
        if order == "desc":
            selected = selected[::-1]
        return selected if limit is None else selected[:limit]

    async def close(self) -> None:
        return None


def _check_session_free(session: Session, session_id: str) -> None:
    if session.active_run_id is not None:
        raise run_conflict(
            f"Session {session_id} is held by run {session.active_run_id}; finish, resume "
            "or cancel that run first.",
            session_id=session_id,
            active_run_id=session.active_run_id,
        )
