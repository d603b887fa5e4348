"""The default store: everything in process memory, gone when the process ends.

All its methods complete without awaiting anything else, so on one event loop each
operation is atomic without locks. Runs, checkpoints and leases are kept in their JSON
form and read back as fresh snapshots. Every call is checked by the rules of
:mod:`fevex.runtime.store_rules`, in their order, as in every other store.

Pages cost what they hold, not what the store holds: a run's events are a list whose index is
the sequence less one (sequences have no gaps), so a page is one slice; runs are kept in
``(created_at, id)`` order, overall and per value of each field ``list_runs`` filters on, so a
page is a bisection and a walk down the shortest of those lists.
"""

from __future__ import annotations

import bisect
import copy
import dataclasses
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fevex.events import RunEvent
from fevex.runtime import store_rules as rules
from fevex.runtime.executions import (
    EventOrder,
    ExecutionCommit,
    ExecutionCreate,
    RunLease,
    RunTakeover,
)
from fevex.runtime.records import TERMINAL_STATUSES, AgentRun, Session, changed_session

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["InMemoryRunStore"]

# The run fields list_runs filters on (the keys of RunQuery.filters).
_LISTED_FIELDS = ("status", "kind", "name", "session_id", "parent_run_id")
_RunKey = tuple[str, str]


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
        # (created_at, id) of every run, ascending; and of the runs holding each
        # (field, value) of _LISTED_FIELDS.
        self._listed: list[_RunKey] = []
        self._listed_by: dict[tuple[str, str], list[_RunKey]] = {}

    async def create_execution(self, create: ExecutionCreate) -> RunLease:
        rules.check_create_arguments(create)
        run = create.run
        rules.check_run_is_new(run.id, run.id in self._runs)
        session = self._sessions.get(run.session_id)
        if session is None:
            rules.check_new_session(run.session_id, create.session_revision)
            session = Session(run.session_id, run.created_at, run.created_at)
        else:
            rules.check_session_reservable(
                session.id, session.active_run_id, session.revision, create.session_revision
            )
        rules.check_sequence(run.id, 0, create.events)
        rules.check_event_ids_new(run.id, create.events, self._cursors)
        self._sessions[session.id] = changed_session(
            session, active_run_id=run.id, revision=session.revision + 1, updated_at=run.created_at
        )
        lease = RunLease(create.lease_owner, 1, self.clock() + create.lease_seconds)
        stored = self._runs[run.id] = run.to_json()
        self._index_run(stored)
        self._checkpoints[run.id] = create.checkpoint
        self._leases[run.id] = lease
        self._events[run.id] = []
        self._append_events(run.id, create.events)
        return lease

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        rules.check_commit_arguments(commit)
        run_id = commit.run_id
        stored = self._stored(run_id)
        state = rules.StoredRun(stored["revision"], self._leases[run_id], len(self._events[run_id]))
        rules.check_commit(commit, state, self.clock())
        rules.check_event_ids_new(run_id, commit.events, self._cursors)
        self._append_events(run_id, commit.events)
        stored["revision"] = commit.revision
        stored["updated_at"] = commit.updated_at
        if commit.changes:
            self._reindex_run(stored, commit.changes)
            stored.update(commit.changes)
        parent = self._runs.get(rules.parent_to_wake(commit.changes, stored["parent_run_id"]) or "")
        if parent is not None and parent["status"] not in TERMINAL_STATUSES:
            parent["wake_at"] = self.clock()
        if commit.checkpoint is not None:
            self._checkpoints[run_id] = commit.checkpoint
        if commit.release_lease:
            self._leases[run_id] = dataclasses.replace(commit.lease, expires_at=0.0)
        if commit.history is not None or commit.release_session:
            session = self._sessions[stored["session_id"]]
            self._sessions[session.id] = changed_session(
                session,
                tuple(commit.history or ()),
                active_run_id=None if commit.release_session else session.active_run_id,
                revision=session.revision + 1,
                updated_at=commit.updated_at,
            )

    def _stored(self, run_id: str) -> dict[str, Any]:
        stored = self._runs.get(run_id)
        if stored is None:
            raise rules.run_not_found(run_id)
        return stored

    def _index_run(self, stored: dict[str, Any]) -> None:
        key = (stored["created_at"], stored["id"])
        bisect.insort(self._listed, key)
        for field in _LISTED_FIELDS:
            value = stored.get(field)
            if isinstance(value, str):
                bisect.insort(self._listed_by.setdefault((field, value), []), key)

    def _reindex_run(self, stored: dict[str, Any], changes: Mapping[str, Any]) -> None:
        key = (stored["created_at"], stored["id"])
        for field in _LISTED_FIELDS:
            if field not in changes or changes[field] == stored.get(field):
                continue
            before, after = stored.get(field), changes[field]
            keys = self._listed_by.get((field, before), []) if isinstance(before, str) else []
            at = bisect.bisect_left(keys, key)
            if at < len(keys) and keys[at] == key:
                del keys[at]
            if isinstance(after, str):
                bisect.insort(self._listed_by.setdefault((field, after), []), key)

    def _append_events(self, run_id: str, events: Sequence[RunEvent]) -> None:
        stored = self._events[run_id]
        for event in events:
            stored.append(event)
            self._cursors[event.id] = (run_id, event.sequence)

    async def request_cancel(self, run_id: str) -> AgentRun:
        stored = self._stored(run_id)
        if rules.records_cancel_request(stored["status"]):
            stored["cancel_requested"] = True
        return AgentRun.from_json(stored)

    async def renew_lease(self, run_id: str, lease: RunLease, seconds: float) -> RunLease:
        stored = self._stored(run_id)
        rules.check_renewal(
            run_id, lease, self._leases[run_id], self.clock(), stored["cancel_requested"]
        )
        renewed = dataclasses.replace(lease, expires_at=self.clock() + seconds)
        self._leases[run_id] = renewed
        return renewed

    async def acquire_lease(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunLease:
        stored = self._stored(run_id)
        live = self._leases[run_id]
        now = self.clock()
        rules.check_acquirable(run_id, status, stored["status"], live, now)
        lease = RunLease(owner, live.generation + 1, now + seconds)
        self._leases[run_id] = lease
        return lease

    async def take_over_run(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunTakeover:
        # Through acquire_lease, so that a store built on this one takes leases one way.
        lease = await self.acquire_lease(run_id, owner, seconds, status=status)
        events = self._events[run_id]
        return RunTakeover(
            lease,
            AgentRun.from_json(self._runs[run_id]),
            copy.deepcopy(self._checkpoints[run_id]),
            events[-1].sequence if events else 0,
        )

    async def claim_expired_run(
        self, owner: str, seconds: float, *, names: Collection[str] | None = None
    ) -> tuple[str, RunLease] | None:
        chosen = rules.claimable_names(names)
        now = self.clock()
        for run_id, stored in self._runs.items():
            lease = self._leases[run_id]
            if rules.is_claimable(stored["status"], stored["name"], lease, now, chosen):
                return run_id, await self.acquire_lease(run_id, owner, seconds)
        return None

    async def claim_due_run(
        self, owner: str, seconds: float, *, names: Collection[str] | None = None
    ) -> tuple[str, RunLease] | None:
        chosen = rules.claimable_names(names)
        now = self.clock()
        due = [
            (stored["wake_at"], run_id)
            for run_id, stored in self._runs.items()
            if rules.is_due(
                stored["status"],
                stored["name"],
                stored["wake_at"],
                self._leases[run_id],
                now,
                chosen,
            )
        ]
        if not due:
            return None
        _, run_id = min(due)
        lease = await self.acquire_lease(run_id, owner, seconds, status="paused")
        self._runs[run_id]["wake_at"] = lease.expires_at
        return run_id, lease

    async def expired_run_ids(
        self, *, limit: int = 100, names: Collection[str] | None = None
    ) -> Sequence[str]:
        rules.check_expired_run_limit(limit)
        chosen = rules.claimable_names(names)
        now = self.clock()
        leases = self._leases
        expired = sorted(
            (leases[run_id].expires_at, run_id)
            for run_id, stored in self._runs.items()
            if rules.is_claimable(stored["status"], stored["name"], leases[run_id], now, chosen)
        )
        return [run_id for _, run_id in expired[:limit]]

    async def get_run(self, run_id: str) -> AgentRun | None:
        stored = self._runs.get(run_id)
        return None if stored is None else AgentRun.from_json(stored)

    async def list_runs(self, **listing: Unpack[rules.RunListing]) -> Sequence[AgentRun]:
        page = rules.check_run_page(**listing)
        below: tuple[str, str] | None = None
        if page.after is not None:
            cursor = self._runs.get(page.after)
            named = None if cursor is None else (cursor["created_at"], cursor["id"])
            below = rules.run_cursor(page.after, named)
        # The shortest list that holds every run of the page; the walk checks the other
        # filters on each run it passes.
        keys = min(
            (self._listed_by.get(item, []) for item in page.filters.items()),
            key=len,
            default=self._listed,
        )
        position = len(keys) if below is None else bisect.bisect_left(keys, below)
        found: list[AgentRun] = []
        while position > 0 and len(found) < page.limit:
            position -= 1
            stored = self._runs[keys[position][1]]
            if page.matches(stored):
                found.append(AgentRun.from_json(stored))
        return found

    async def get_checkpoint(self, run_id: str) -> dict[str, Any] | None:
        return copy.deepcopy(self._checkpoints.get(run_id))

    async def get_session(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    async def save_session(self, session: Session, *, expected_revision: int) -> Session:
        stored = self._sessions.get(session.id)
        if stored is None:
            raise rules.session_not_found(session.id)
        rules.check_session_saveable(
            session.id, stored.active_run_id, stored.revision, expected_revision
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
        rules.check_event_page(after, limit, order)
        start = 0
        if after is not None:
            start = rules.cursor_sequence(run_id, after, self._cursors.get(after))
        events = self._events.get(run_id, [])
        end = len(events)
        if order == "asc":
            return events[start : end if limit is None else min(end, start + limit)]
        # The newest events after the cursor, newest first.
        selected = events[start if limit is None else max(start, end - limit) : end]
        selected.reverse()
        return selected

    async def close(self) -> None:
        return None

    async def __aenter__(self) -> InMemoryRunStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """``async with`` closes the store on exit."""
        await self.close()
