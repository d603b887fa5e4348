"""The default store: everything in process memory, gone when the process ends.

All its methods complete without awaiting anything else, so on one event loop each
operation is atomic without locks. Runs, checkpoints and leases are kept in their JSON
form and read back as fresh snapshots.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from fevex.errors import FevexRunError
from fevex.events import RunEvent
from fevex.runtime.records import AgentRun, Session
from fevex.runtime.run_store import (
    RUN_FIELDS_A_COMMIT_CHANGES,
    EventOrder,
    ExecutionCommit,
    ExecutionCreate,
    RunLease,
    invalid_cursor,
    lease_lost,
    run_conflict,
)

__all__ = ["InMemoryRunStore"]


class InMemoryRunStore:
    """A :class:`~fevex.runtime.RunStore` for tests and single-process apps.

    ``clock`` (seconds since the epoch) decides lease expiry; tests may pass their own.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._runs: dict[str, dict[str, Any]] = {}
        self._checkpoints: dict[str, dict[str, Any] | None] = {}
        self._leases: dict[str, RunLease] = {}
        self._sessions: dict[str, Session] = {}
        self._events: dict[str, list[RunEvent]] = {}
        self._cursors: dict[str, tuple[str, int]] = {}

    async def create_execution(self, create: ExecutionCreate) -> RunLease:
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
        _check_sequence(run.id, 0, create.events)
        self._sessions[session.id] = dataclasses.replace(
            session, active_run_id=run.id, revision=session.revision + 1, updated_at=run.created_at
        )
        lease = RunLease(create.lease_owner, 1, self.clock() + create.lease_seconds)
        self._runs[run.id] = run.to_json()
        self._checkpoints[run.id] = create.checkpoint
        self._leases[run.id] = lease
        self._events[run.id] = []
        self._append_events(run.id, create.events)
        return lease

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        run_id = commit.run_id
        stored = self._stored(run_id)
        self._check_lease(run_id, commit.lease)
        if stored["revision"] + 1 != commit.revision:
            raise run_conflict(
                f"Run {run_id} was changed by another writer (revision {stored['revision']}).",
                run_id=run_id,
            )
        changes = commit.changes
        if changes and not RUN_FIELDS_A_COMMIT_CHANGES.issuperset(changes):
            raise FevexRunError(
                "INVALID_ARGUMENT", f"A commit cannot change {sorted(changes)} of a run."
            )
        _check_sequence(run_id, len(self._events[run_id]), commit.events)
        self._append_events(run_id, commit.events)
        stored["revision"] = commit.revision
        stored["updated_at"] = commit.updated_at
        if changes:
            stored.update(changes)
        if commit.checkpoint is not None:
            self._checkpoints[run_id] = commit.checkpoint
        if commit.release_lease:
            self._leases[run_id] = dataclasses.replace(commit.lease, expires_at=0.0)
        if commit.history is not None or commit.release_session:
            session = self._sessions[stored["session_id"]]
            self._sessions[session.id] = dataclasses.replace(
                session,
                history=session.history + commit.history if commit.history else session.history,
                active_run_id=None if commit.release_session else session.active_run_id,
                revision=session.revision + 1,
                updated_at=commit.updated_at,
            )

    def _stored(self, run_id: str) -> dict[str, Any]:
        stored = self._runs.get(run_id)
        if stored is None:
            raise FevexRunError("RUN_NOT_FOUND", f"Run {run_id} does not exist.")
        return stored

    def _check_lease(self, run_id: str, lease: RunLease) -> None:
        live = self._leases.get(run_id)
        if (
            live is None
            or live.owner != lease.owner
            or live.generation != lease.generation
            or live.expires_at <= self.clock()
        ):
            raise lease_lost(run_id, lease)

    def _append_events(self, run_id: str, events: Sequence[RunEvent]) -> None:
        stored = self._events[run_id]
        for event in events:
            stored.append(event)
            self._cursors[event.id] = (run_id, event.sequence)

    async def renew_lease(self, run_id: str, lease: RunLease, seconds: float) -> RunLease:
        self._stored(run_id)
        self._check_lease(run_id, lease)
        renewed = dataclasses.replace(lease, expires_at=self.clock() + seconds)
        self._leases[run_id] = renewed
        return renewed

    async def acquire_lease(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunLease:
        stored = self._stored(run_id)
        if stored["status"] != status:
            raise run_conflict(f"Run {run_id} is {stored['status']}, not {status}.")
        live = self._leases.get(run_id)
        now = self.clock()
        if live is not None and live.expires_at > now:
            raise run_conflict(
                f"Run {run_id} is leased to {live.owner} for {live.expires_at - now:.1f} s more."
            )
        lease = RunLease(owner, (live.generation if live else 0) + 1, now + seconds)
        self._leases[run_id] = lease
        return lease

    async def claim_expired_run(self, owner: str, seconds: float) -> tuple[str, RunLease] | None:
        now = self.clock()
        for run_id, stored in self._runs.items():
            live = self._leases.get(run_id)
            if stored["status"] == "running" and (live is None or live.expires_at <= now):
                return run_id, await self.acquire_lease(run_id, owner, seconds)
        return None

    async def expired_run_ids(self, *, limit: int = 100) -> Sequence[str]:
        now = self.clock()
        expired = [
            (live.expires_at if live is not None else 0.0, run_id)
            for run_id, stored in self._runs.items()
            if stored["status"] == "running"
            and ((live := self._leases.get(run_id)) is None or live.expires_at <= now)
        ]
        return [run_id for _, run_id in sorted(expired)[:limit]]

    async def get_run(self, run_id: str) -> AgentRun | None:
        stored = self._runs.get(run_id)
        return None if stored is None else AgentRun.from_json(stored)

    async def get_checkpoint(self, run_id: str) -> dict[str, Any] | None:
        return copy.deepcopy(self._checkpoints.get(run_id))

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


def _check_sequence(run_id: str, stored: int, events: Sequence[RunEvent]) -> None:
    """Checked before anything is written, so a rejected write changes nothing."""
    for offset, event in enumerate(events, start=1):
        if event.sequence != stored + offset or event.run_id != run_id:
            raise run_conflict(
                f"Event sequence {event.sequence} of run {run_id} is out of order.",
                run_id=run_id,
            )


def _check_session_free(session: Session, session_id: str) -> None:
    if session.active_run_id is not None:
        raise run_conflict(
            f"Session {session_id} is held by run {session.active_run_id}; finish, resume "
            "or cancel that run first.",
            session_id=session_id,
            active_run_id=session.active_run_id,
        )
