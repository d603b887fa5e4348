"""The run-store contract on a local SQLite file, with the in-memory store's semantics.

Every write is one transaction begun ``IMMEDIATE`` (see :mod:`fevex_sqlite.engine`): it
holds the file's write lock from its first read to its commit, so the revision, lease and
session checks it makes still hold when it writes, whichever thread or process shares the
file. A failed check raises before anything is written, and the transaction rolls back.
Leases are judged by ``clock`` of the writing process, read after the lock is taken.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from sqlalchemy import RowMapping, text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from fevex.errors import FevexConfigurationError, FevexRunError
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
from fevex_sqlite.engine import open_engines
from fevex_sqlite.errors import is_busy, store_busy
from fevex_sqlite.location import DEFAULT_BUSY_TIMEOUT, parse_location
from fevex_sqlite.schema import prepare_database

__all__ = ["SQLiteRunStore", "create_sqlite_run_store"]

_RUN_COLUMNS = (
    "id, session_id, agent_name, kind, status, input, output, usage, error, pause, "
    "revision, created_at, updated_at"
)
_JSON_RUN_FIELDS = ("input", "output", "usage", "error", "pause")
_EVENT_COLUMNS = "id, run_id, sequence, type, occurred_at, payload"

_SELECT_RUN = text(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = :id")
_SELECT_RUN_LEASE = text(
    "SELECT session_id, status, revision, lease_owner, lease_generation, lease_expires_at "
    "FROM runs WHERE id = :id"
)
_SELECT_CHECKPOINT = text("SELECT checkpoint FROM runs WHERE id = :id")
_RUN_EXISTS = text("SELECT 1 AS found FROM runs WHERE id = :id")
_INSERT_RUN = text(
    f"INSERT INTO runs ({_RUN_COLUMNS}, checkpoint, lease_owner, lease_generation, "
    "lease_expires_at) VALUES (:id, :session_id, :agent_name, :kind, :status, :input, "
    ":output, :usage, :error, :pause, :revision, :created_at, :updated_at, :checkpoint, "
    ":lease_owner, :lease_generation, :lease_expires_at)"
)
_SET_LEASE = text(
    "UPDATE runs SET lease_owner = :owner, lease_generation = :generation, "
    "lease_expires_at = :expires_at WHERE id = :id"
)
# Insertion order, as the in-memory store scans; the partial index narrows the scan to
# running runs whose lease has expired.
_FIRST_EXPIRED_RUN = text(
    "SELECT id, lease_generation FROM runs WHERE status = 'running' "
    "AND lease_expires_at <= :now ORDER BY rowid LIMIT 1"
)

_SELECT_SESSION = text(
    "SELECT id, history, summary, active_run_id, revision, created_at, updated_at "
    "FROM sessions WHERE id = :id"
)
_INSERT_SESSION = text(
    "INSERT INTO sessions (id, history, summary, active_run_id, revision, created_at, "
    "updated_at) VALUES (:id, :history, :summary, :active_run_id, :revision, :created_at, "
    ":updated_at)"
)
_RESERVE_SESSION = text(
    "UPDATE sessions SET active_run_id = :run_id, revision = revision + 1, "
    "updated_at = :updated_at WHERE id = :id"
)
_REPLACE_SESSION = text(
    "UPDATE sessions SET history = :history, summary = :summary, active_run_id = NULL, "
    "revision = :revision, created_at = :created_at, updated_at = :updated_at WHERE id = :id"
)

_LAST_SEQUENCE = text("SELECT COALESCE(MAX(sequence), 0) FROM events WHERE run_id = :run_id")
_INSERT_EVENT = text(
    f"INSERT INTO events ({_EVENT_COLUMNS}) "
    "VALUES (:id, :run_id, :sequence, :type, :occurred_at, :payload)"
)
_SELECT_CURSOR = text("SELECT run_id, sequence FROM events WHERE id = :id")
# The cursor is resolved by id alone, then one range scan of the (run_id, sequence)
# index returns the page: earlier events are never read. LIMIT -1 means no limit.
LIST_EVENTS_SQL = {
    order: text(
        f"SELECT {_EVENT_COLUMNS} FROM events WHERE run_id = :run_id AND sequence > :after "
        f"ORDER BY sequence {order.upper()} LIMIT :limit"
    )
    for order in ("asc", "desc")
}


class SQLiteRunStore:
    """A :class:`~fevex.runtime.RunStore` on a local SQLite file that several processes of
    one machine may share.

    ``path`` is a file path or a ``sqlite:///`` URL; the file, its directory and its schema
    are created (or migrated) on open. ``busy_timeout`` (seconds) bounds how long a write
    waits for another writer's lock before ``STORE_BUSY``; ``clock`` (seconds since the
    epoch) decides lease expiry, and tests may pass their own.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        location = parse_location(path)
        if busy_timeout is None:
            busy_timeout = location.busy_timeout
        if busy_timeout is None:
            busy_timeout = DEFAULT_BUSY_TIMEOUT
        if not _is_seconds(busy_timeout):
            raise FevexConfigurationError(
                "INVALID_CONFIG",
                f"busy_timeout must be a non-negative number of seconds, not {busy_timeout!r}.",
                category="store",
            )
        self.path = location.path
        self.busy_timeout = float(busy_timeout)
        self.clock = clock
        self.schema_version = prepare_database(self.path, busy_timeout=self.busy_timeout)
        self._engine, self._write_engine = open_engines(self.path, busy_timeout=self.busy_timeout)

    def __repr__(self) -> str:
        return f"SQLiteRunStore({str(self.path)!r})"

    # -- transactions ---------------------------------------------------------------

    def _read(self) -> AbstractAsyncContextManager[AsyncConnection]:
        return self._transaction(self._engine)

    def _write(self) -> AbstractAsyncContextManager[AsyncConnection]:
        return self._transaction(self._write_engine)

    @asynccontextmanager
    async def _transaction(self, engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
        try:
            async with engine.begin() as connection:
                yield connection
        except OperationalError as error:
            if is_busy(error.orig or error):
                raise store_busy(self.path, self.busy_timeout) from error
            raise

    # -- runs -----------------------------------------------------------------------

    async def create_execution(self, create: ExecutionCreate) -> RunLease:
        run = create.run
        async with self._write() as db:
            if await _one(db, _RUN_EXISTS, id=run.id) is not None:
                raise run_conflict(f"Run {run.id} already exists.", run_id=run.id)
            session = await _one(db, _SELECT_SESSION, id=run.session_id)
            if session is None:
                if create.session_revision is not None:
                    raise run_conflict(f"Session {run.session_id} no longer exists.")
                await db.execute(
                    _INSERT_SESSION,
                    {
                        "id": run.session_id,
                        "history": "[]",
                        "summary": None,
                        "active_run_id": run.id,
                        "revision": 1,
                        "created_at": run.created_at,
                        "updated_at": run.created_at,
                    },
                )
            else:
                _check_session_free(session)
                if session["revision"] != create.session_revision:
                    raise run_conflict(
                        f"Session {run.session_id} changed while the run was being created."
                    )
                await db.execute(
                    _RESERVE_SESSION,
                    {"id": run.session_id, "run_id": run.id, "updated_at": run.created_at},
                )
            lease = RunLease(create.lease_owner, 1, self.clock() + create.lease_seconds)
            row = run.to_json()
            for field in _JSON_RUN_FIELDS:
                row[field] = _dumps(row[field], f"The run's {field}")
            row["checkpoint"] = _dumps(create.checkpoint, "The checkpoint")
            row.update(
                lease_owner=lease.owner,
                lease_generation=lease.generation,
                lease_expires_at=lease.expires_at,
            )
            await db.execute(_INSERT_RUN, row)
            await _append_events(db, run.id, create.events)
        return lease

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        run_id = commit.run_id
        async with self._write() as db:
            stored = await self._stored(db, run_id)
            self._check_lease(run_id, commit.lease, stored)
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
            await _append_events(db, run_id, commit.events)
            updates: dict[str, Any] = {"revision": commit.revision, "updated_at": commit.updated_at}
            for field, value in (changes or {}).items():
                updates[field] = value if field == "status" else _dumps(value, f"The {field}")
            if commit.checkpoint is not None:
                updates["checkpoint"] = _dumps(commit.checkpoint, "The checkpoint")
            if commit.release_lease:
                # Expired now, generation kept: the next acquire_lease advances it.
                updates["lease_expires_at"] = 0.0
            await _update(db, "runs", run_id, updates)
            if commit.history is not None or commit.release_session:
                await self._update_session(db, stored["session_id"], commit)

    async def _update_session(
        self, db: AsyncConnection, session_id: str, commit: ExecutionCommit
    ) -> None:
        session = await _one(db, _SELECT_SESSION, id=session_id)
        if session is None:
            raise FevexRunError("SESSION_NOT_FOUND", f"Session {session_id} does not exist.")
        updates: dict[str, Any] = {
            "revision": session["revision"] + 1,
            "updated_at": commit.updated_at,
        }
        if commit.history:
            history = json.loads(session["history"]) + list(commit.history)
            updates["history"] = _dumps(history, "The session history")
        if commit.release_session:
            updates["active_run_id"] = None
        await _update(db, "sessions", session_id, updates)

    async def _stored(self, db: AsyncConnection, run_id: str) -> RowMapping:
        stored = await _one(db, _SELECT_RUN_LEASE, id=run_id)
        if stored is None:
            raise FevexRunError("RUN_NOT_FOUND", f"Run {run_id} does not exist.")
        return stored

    def _check_lease(self, run_id: str, lease: RunLease, stored: RowMapping) -> None:
        if (
            stored["lease_owner"] != lease.owner
            or stored["lease_generation"] != lease.generation
            or stored["lease_expires_at"] <= self.clock()
        ):
            raise lease_lost(run_id, lease)

    # -- leases ---------------------------------------------------------------------

    async def renew_lease(self, run_id: str, lease: RunLease, seconds: float) -> RunLease:
        async with self._write() as db:
            stored = await self._stored(db, run_id)
            self._check_lease(run_id, lease, stored)
            renewed = RunLease(lease.owner, lease.generation, self.clock() + seconds)
            await _set_lease(db, run_id, renewed)
        return renewed

    async def acquire_lease(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunLease:
        async with self._write() as db:
            stored = await self._stored(db, run_id)
            if stored["status"] != status:
                raise run_conflict(f"Run {run_id} is {stored['status']}, not {status}.")
            now = self.clock()
            if stored["lease_expires_at"] > now:
                raise run_conflict(
                    f"Run {run_id} is leased to {stored['lease_owner']} for "
                    f"{stored['lease_expires_at'] - now:.1f} s more."
                )
            lease = RunLease(owner, int(stored["lease_generation"]) + 1, now + seconds)
            await _set_lease(db, run_id, lease)
        return lease

    async def claim_expired_run(self, owner: str, seconds: float) -> tuple[str, RunLease] | None:
        # The write lock is held from the scan to the update, so a concurrent claimer,
        # in this process or another, finds the run already leased.
        async with self._write() as db:
            now = self.clock()
            expired = await _one(db, _FIRST_EXPIRED_RUN, now=now)
            if expired is None:
                return None
            run_id = str(expired["id"])
            lease = RunLease(owner, int(expired["lease_generation"]) + 1, now + seconds)
            await _set_lease(db, run_id, lease)
        return run_id, lease

    # -- reads ----------------------------------------------------------------------

    async def get_run(self, run_id: str) -> AgentRun | None:
        async with self._read() as db:
            row = await _one(db, _SELECT_RUN, id=run_id)
        if row is None:
            return None
        data = dict(row)
        for field in _JSON_RUN_FIELDS:
            data[field] = json.loads(data[field])
        return AgentRun.from_json(data)

    async def get_checkpoint(self, run_id: str) -> dict[str, Any] | None:
        async with self._read() as db:
            row = await _one(db, _SELECT_CHECKPOINT, id=run_id)
        if row is None:
            return None
        checkpoint: dict[str, Any] | None = json.loads(row["checkpoint"])
        return checkpoint

    # -- sessions -------------------------------------------------------------------

    async def get_session(self, session_id: str) -> Session | None:
        async with self._read() as db:
            row = await _one(db, _SELECT_SESSION, id=session_id)
        return None if row is None else _session(row)

    async def save_session(self, session: Session, *, expected_revision: int) -> Session:
        async with self._write() as db:
            stored = await _one(db, _SELECT_SESSION, id=session.id)
            if stored is None:
                raise FevexRunError("SESSION_NOT_FOUND", f"Session {session.id} does not exist.")
            _check_session_free(stored)
            if stored["revision"] != expected_revision:
                raise FevexRunError(
                    "SESSION_CONFLICT",
                    f"Session {session.id} changed (revision {stored['revision']}, "
                    f"expected {expected_revision}); reload it and decide again.",
                    recoverable=True,
                )
            saved = Session(
                session.id,
                session.created_at,
                session.updated_at,
                tuple(session.history),
                session.summary,
                None,
                expected_revision + 1,
            )
            await db.execute(
                _REPLACE_SESSION,
                {
                    "id": saved.id,
                    "history": _dumps(list(saved.history), "The session history"),
                    "summary": saved.summary,
                    "revision": saved.revision,
                    "created_at": saved.created_at,
                    "updated_at": saved.updated_at,
                },
            )
        return saved

    # -- events ---------------------------------------------------------------------

    async def list_events(
        self,
        run_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: EventOrder = "asc",
    ) -> Sequence[RunEvent]:
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise FevexRunError("INVALID_ARGUMENT", "limit must be a whole number, not negative.")
        statement = LIST_EVENTS_SQL["desc" if order == "desc" else "asc"]
        async with self._read() as db:
            start = 0
            if after is not None:
                cursor = await _one(db, _SELECT_CURSOR, id=after)
                if cursor is None or cursor["run_id"] != run_id:
                    raise invalid_cursor(run_id, after)
                start = int(cursor["sequence"])
            result = await db.execute(
                statement,
                {"run_id": run_id, "after": start, "limit": -1 if limit is None else limit},
            )
            rows = result.mappings().all()
        return [_event(row) for row in rows]

    async def close(self) -> None:
        """Close the pooled connections; safe to call more than once."""
        await self._engine.dispose()


def create_sqlite_run_store(
    path_or_url: str | os.PathLike[str],
    *,
    busy_timeout: float | None = None,
    clock: Callable[[], float] = time.time,
) -> SQLiteRunStore:
    """Open the store in the file at ``path_or_url`` (a path, or ``sqlite:///runs.db``),
    creating the file and its schema when they do not exist yet."""
    return SQLiteRunStore(path_or_url, busy_timeout=busy_timeout, clock=clock)


async def _one(db: AsyncConnection, statement: Any, **params: Any) -> RowMapping | None:
    result = await db.execute(statement, params)
    return result.mappings().one_or_none()


async def _update(db: AsyncConnection, table: str, key: str, values: Mapping[str, Any]) -> None:
    # Column names come from this module only (commit changes are checked against
    # RUN_FIELDS_A_COMMIT_CHANGES first); values are always bound parameters.
    assignments = ", ".join(f"{column} = :{column}" for column in values)
    await db.execute(
        text(f"UPDATE {table} SET {assignments} WHERE id = :_key"), {**values, "_key": key}
    )


async def _set_lease(db: AsyncConnection, run_id: str, lease: RunLease) -> None:
    await db.execute(
        _SET_LEASE,
        {
            "id": run_id,
            "owner": lease.owner,
            "generation": lease.generation,
            "expires_at": lease.expires_at,
        },
    )


async def _append_events(db: AsyncConnection, run_id: str, events: Sequence[RunEvent]) -> None:
    if not events:
        return
    result = await db.execute(_LAST_SEQUENCE, {"run_id": run_id})
    last = int(result.scalar_one())
    rows = []
    for offset, event in enumerate(events, start=1):
        if event.sequence != last + offset:
            raise run_conflict(
                f"Event sequence {event.sequence} of run {run_id} is out of order.",
                run_id=run_id,
            )
        if event.run_id != run_id:
            raise FevexRunError(
                "INVALID_ARGUMENT",
                f"Event {event.id} belongs to run {event.run_id}, not to run {run_id}.",
            )
        rows.append(
            {
                "id": event.id,
                "run_id": run_id,
                "sequence": event.sequence,
                "type": event.type,
                "occurred_at": event.occurred_at,
                "payload": _dumps(event.payload, f"The payload of event {event.id}"),
            }
        )
    try:
        await db.execute(_INSERT_EVENT, rows)
    except IntegrityError as error:
        raise run_conflict(
            f"An event id given for run {run_id} is already stored.", run_id=run_id
        ) from error


def _check_session_free(session: RowMapping) -> None:
    if session["active_run_id"] is not None:
        raise run_conflict(
            f"Session {session['id']} is held by run {session['active_run_id']}; finish, "
            "resume or cancel that run first.",
            session_id=session["id"],
            active_run_id=session["active_run_id"],
        )


def _session(row: RowMapping) -> Session:
    return Session(
        id=row["id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        history=tuple(json.loads(row["history"])),
        summary=row["summary"],
        active_run_id=row["active_run_id"],
        revision=int(row["revision"]),
    )


def _event(row: RowMapping) -> RunEvent:
    return RunEvent(
        id=row["id"],
        run_id=row["run_id"],
        sequence=int(row["sequence"]),
        type=row["type"],
        occurred_at=row["occurred_at"],
        payload=json.loads(row["payload"]),
    )


def _dumps(value: Any, what: str) -> str:
    try:
        return json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise FevexRunError("INVALID_ARGUMENT", f"{what} is not plain JSON: {error}.") from error


def _is_seconds(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )
