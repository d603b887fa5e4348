"""The run-store contract on a local SQLite file, with the in-memory store's semantics.

Each operation is one synchronous function run whole, in one transaction, on the store's
own thread (:mod:`fevex_sqlite.transaction_thread`): one hand-off per operation, however
many statements it runs. Before that hand-off the caller's arguments are checked and
encoded to JSON on the caller's own thread: the transaction never reads the caller's
objects, and holds the write lock for SQL only.

Every write is one transaction begun ``IMMEDIATE`` (see :mod:`fevex_sqlite.engine`): it
holds the file's write lock from its first read to its commit, so the revision, lease and
session checks it makes still hold when it writes, whichever thread or process shares the
file. A failed check raises before anything is written, and the transaction rolls back.
Leases are judged by ``clock`` of the writing process, read after the lock is taken.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Row, TextClause
from sqlalchemy.exc import IntegrityError

from fevex.errors import FevexConfigurationError
from fevex.events import RunEvent
from fevex.runtime import (
    AgentRun,
    EventOrder,
    ExecutionCommit,
    ExecutionCreate,
    RunLease,
    RunListing,
    RunQuery,
    RunTakeover,
    Session,
    StoredRun,
    check_acquirable,
    check_commit,
    check_commit_arguments,
    check_create_arguments,
    check_event_page,
    check_expired_run_limit,
    check_new_session,
    check_renewal,
    check_run_is_new,
    check_run_page,
    check_sequence,
    check_session_reservable,
    claimable_names,
    cursor_sequence,
    event_id_taken,
    invalid_argument,
    parent_to_wake,
    records_cancel_request,
    run_cursor,
    run_not_found,
)
from fevex_sqlite import statements as sql
from fevex_sqlite.location import DEFAULT_BUSY_TIMEOUT, parse_location
from fevex_sqlite.schema import prepare_database
from fevex_sqlite.session_rows import end_session_turn, read_session, replace_session
from fevex_sqlite.session_snapshots import SessionSnapshots
from fevex_sqlite.transaction_thread import TransactionThread

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from fevex_sqlite.record_store import SQLiteRecordStore

__all__ = ["SQLiteRunStore", "create_sqlite_run_store"]


class SQLiteRunStore:
    """A :class:`~fevex.runtime.RunStore` on a local SQLite file that several processes of
    one machine may share.

    ``path`` is a file path or a ``sqlite:///`` URL; the file, its directory and its schema
    are created (or migrated) on open. With ``create=False`` (or ``?create=false`` in the
    URL) a file that does not exist is refused with ``STORE_NOT_FOUND`` instead, so that a
    misspelt path cannot become a new, empty store; the argument overrides the URL.
    ``busy_timeout`` (seconds) bounds how long a write waits for another writer's lock
    before ``STORE_BUSY``; ``clock`` (seconds since the epoch) decides lease expiry, and
    tests may pass their own: it is called on the store's thread, inside its transactions.

    Operations run one at a time, on one thread of the store's own, started on first use;
    :meth:`close` ends it, and a closed store starts a new one if used again. A failure of
    SQLite is a :class:`~fevex.FevexRunError` with a stable code (``STORE_BUSY``,
    ``STORE_FULL``, ``STORE_READ_ONLY`` or ``STORE_ERROR``) whose message never quotes the
    SQL or its parameters; the driver's error is its ``__cause__``. The sessions it last
    read or wrote are kept (:class:`~fevex_sqlite.session_snapshots.SessionSnapshots`), so a
    turn on a long session reads its history only when another writer changed it.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float | None = None,
        clock: Callable[[], float] = time.time,
        create: bool | None = None,
    ) -> None:
        location = parse_location(path)
        if create is None:
            create = True if location.create is None else location.create
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
        self.schema_version = prepare_database(
            self.path, busy_timeout=self.busy_timeout, create=create
        )
        self._transactions = TransactionThread(self.path, busy_timeout=self.busy_timeout)
        self._snapshots = SessionSnapshots()

    def __repr__(self) -> str:
        return f"SQLiteRunStore({str(self.path)!r})"

    def open_record_store(self) -> SQLiteRecordStore:
        """The record store of this store's file, which ``create_fevex(run_store=store)``
        gives the app."""
        from fevex_sqlite.record_store import SQLiteRecordStore

        return SQLiteRecordStore(self.path, busy_timeout=self.busy_timeout)

    # -- runs -----------------------------------------------------------------------

    async def create_execution(self, create: ExecutionCreate) -> RunLease:
        check_create_arguments(create)
        run = create.run
        row = run.to_json()
        for field in sql.JSON_RUN_FIELDS:
            row[field] = _dumps(row[field], f"The run's {field}")
        row["checkpoint"] = _dumps(create.checkpoint, "The checkpoint")
        events = _event_rows(create.events)
        lease: RunLease = await self._transactions.write(
            "create_execution", self._create_execution, create, row, events
        )
        self._snapshots.reserved(create)
        return lease

    def _create_execution(
        self,
        db: Connection,
        create: ExecutionCreate,
        row: dict[str, Any],
        events: list[dict[str, Any]],
    ) -> RunLease:
        run = create.run
        target = db.execute(
            sql.SELECT_CREATE_TARGET, {"run_id": run.id, "session_id": run.session_id}
        ).one()
        check_run_is_new(run.id, bool(target.run_exists))
        if target.id is None:
            check_new_session(run.session_id, create.session_revision)
        else:
            check_session_reservable(
                run.session_id, target.active_run_id, int(target.revision), create.session_revision
            )
        check_sequence(run.id, 0, create.events)
        if target.id is None:
            db.execute(
                sql.INSERT_SESSION,
                {
                    "id": run.session_id,
                    "summary": None,
                    "active_run_id": run.id,
                    "revision": 1,
                    "created_at": run.created_at,
                    "updated_at": run.created_at,
                },
            )
        else:
            db.execute(
                sql.RESERVE_SESSION,
                {"id": run.session_id, "run_id": run.id, "updated_at": run.created_at},
            )
        lease = RunLease(create.lease_owner, 1, self.clock() + create.lease_seconds)
        db.execute(
            sql.INSERT_RUN,
            {
                **row,
                "lease_owner": lease.owner,
                "lease_generation": lease.generation,
                "lease_expires_at": lease.expires_at,
            },
        )
        # Events reference their run (a foreign key): a run id that was free has none. A
        # stored event id rolls back the whole transaction: nothing of the run is written.
        _insert_events(db, run.id, events)
        return lease

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        check_commit_arguments(commit)
        changes = commit.changes
        updates: dict[str, Any] = {"revision": commit.revision, "updated_at": commit.updated_at}
        for field, value in (changes or {}).items():
            if field == "status":
                updates[field] = value
            elif field == "wake_at":
                # A REAL column, not JSON: the claims compare it with the store's clock.
                updates[field] = None if value is None else float(value)
            else:
                updates[field] = _dumps(value, f"The {field}")
        if commit.checkpoint is not None:
            updates["checkpoint"] = _dumps(commit.checkpoint, "The checkpoint")
        if commit.release_lease:
            # Expired now, generation kept: the next acquire_lease advances it.
            updates["lease_expires_at"] = 0.0
        events = _event_rows(commit.events)
        history = _dumps(list(commit.history), "The session history") if commit.history else None
        ended = await self._transactions.write(
            "commit_execution", self._commit_execution, commit, updates, events, history
        )
        if ended is not None:
            self._snapshots.ended(*ended, commit)

    def _commit_execution(
        self,
        db: Connection,
        commit: ExecutionCommit,
        updates: dict[str, Any],
        events: list[dict[str, Any]],
        history: str | None,
    ) -> tuple[str, int] | None:
        run_id = commit.run_id
        stored = self._stored(db, run_id, sql.SELECT_COMMIT_TARGET)
        state = StoredRun(int(stored.revision), _lease(stored), int(stored.last_sequence))
        now = self.clock()
        check_commit(commit, state, now)
        _insert_events(db, run_id, events)
        db.execute(sql.update_run_statement(tuple(updates)), {**updates, "_key": run_id})
        parent = parent_to_wake(commit.changes, stored.parent_run_id)
        if parent is not None:
            db.execute(sql.WAKE_PARENT, {"id": parent, "now": now, "ended": sql.ENDED_STATUSES})
        if commit.history is not None or commit.release_session:
            return stored.session_id, end_session_turn(db, stored.session_id, commit, history)
        return None

    def _stored(
        self, db: Connection, run_id: str, statement: TextClause = sql.SELECT_RUN_LEASE
    ) -> Row[Any]:
        stored = _one(db, statement, id=run_id)
        if stored is None:
            raise run_not_found(run_id)
        return stored

    async def request_cancel(self, run_id: str) -> AgentRun:
        return await self._transactions.write("request_cancel", _request_cancel, run_id)

    # -- leases ---------------------------------------------------------------------

    async def renew_lease(self, run_id: str, lease: RunLease, seconds: float) -> RunLease:
        return await self._transactions.write(
            "renew_lease", self._renew_lease, run_id, lease, seconds
        )

    def _renew_lease(
        self, db: Connection, run_id: str, lease: RunLease, seconds: float
    ) -> RunLease:
        stored = self._stored(db, run_id)
        check_renewal(run_id, lease, _lease(stored), self.clock(), bool(stored.cancel_requested))
        renewed = RunLease(lease.owner, lease.generation, self.clock() + seconds)
        _set_lease(db, run_id, renewed)
        return renewed

    async def acquire_lease(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunLease:
        lease, _ = await self._transactions.write(
            "acquire_lease", self._acquire_lease, run_id, owner, seconds, status
        )
        return lease

    async def take_over_run(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunTakeover:
        lease, row = await self._transactions.write(
            "take_over_run",
            self._acquire_lease,
            run_id,
            owner,
            seconds,
            status,
            sql.SELECT_TAKEOVER,
        )
        # Decoded here, after the commit: the write lock is held for SQL only.
        try:
            checkpoint = None if row.checkpoint is None else json.loads(row.checkpoint)
        except ValueError:
            checkpoint = None  # not JSON: the taker fails the run
        return RunTakeover(lease, _run(row), checkpoint, int(row.last_sequence))

    def _acquire_lease(
        self,
        db: Connection,
        run_id: str,
        owner: str,
        seconds: float,
        status: str,
        read: TextClause = sql.SELECT_RUN_LEASE,
    ) -> tuple[RunLease, Row[Any]]:
        """Lease the run with the next generation, and return the lease and the row
        ``read`` found before (which holds at least the run's status and lease)."""
        stored = self._stored(db, run_id, read)
        now = self.clock()
        check_acquirable(run_id, status, stored.status, _lease(stored), now)
        lease = RunLease(owner, int(stored.lease_generation) + 1, now + seconds)
        _set_lease(db, run_id, lease)
        return lease, stored

    async def claim_expired_run(
        self, owner: str, seconds: float, *, names: Collection[str] | None = None
    ) -> tuple[str, RunLease] | None:
        return await self._claim("claim_expired_run", sql.EXPIRED, owner, seconds, names)

    async def claim_due_run(
        self, owner: str, seconds: float, *, names: Collection[str] | None = None
    ) -> tuple[str, RunLease] | None:
        return await self._claim("claim_due_run", sql.DUE, owner, seconds, names)

    async def _claim(
        self,
        operation: str,
        claimable: sql.Claimable,
        owner: str,
        seconds: float,
        names: Collection[str] | None,
    ) -> tuple[str, RunLease] | None:
        chosen = claimable_names(names)
        if chosen is not None and not chosen:
            return None  # no name: no run it could take
        return await self._transactions.write(
            operation, self._take_first, claimable, owner, seconds, chosen
        )

    def _take_first(
        self,
        db: Connection,
        claimable: sql.Claimable,
        owner: str,
        seconds: float,
        names: frozenset[str] | None,
    ) -> tuple[str, RunLease] | None:
        # The write lock is held from the scan to the update, so a concurrent claimer,
        # in this process or another, finds the run already leased.
        now = self.clock()
        parameters: dict[str, Any] = {"now": now}
        if names is not None:
            parameters["names"] = sorted(names)
        statement = claimable.first if names is None else claimable.first_of_names
        first = db.execute(statement, parameters).one_or_none()
        if first is None:
            return None
        run_id = str(first.id)
        lease = RunLease(owner, int(first.lease_generation) + 1, now + seconds)
        db.execute(
            claimable.take,
            {
                "id": run_id,
                "owner": lease.owner,
                "generation": lease.generation,
                "expires_at": lease.expires_at,
            },
        )
        return run_id, lease

    async def expired_run_ids(
        self, *, limit: int = 100, names: Collection[str] | None = None
    ) -> Sequence[str]:
        # A read: in WAL mode it neither takes nor waits for the write lock, so a writer
        # stuck inside a transaction (in this store's thread or another process) does not
        # keep it from listing the runs that writer holds.
        check_expired_run_limit(limit)
        chosen = claimable_names(names)
        if chosen is not None and not chosen:
            return []
        return await self._transactions.read(
            "expired_run_ids", self._expired_run_ids, limit, chosen
        )

    def _expired_run_ids(
        self, db: Connection, limit: int, names: frozenset[str] | None
    ) -> list[str]:
        parameters = {"now": self.clock(), "limit": limit}
        if names is None:
            rows = db.execute(sql.EXPIRED_RUN_IDS, parameters)
        else:
            rows = db.execute(sql.EXPIRED_RUN_IDS_OF, {**parameters, "names": sorted(names)})
        return [str(row.id) for row in rows]

    # -- reads ----------------------------------------------------------------------

    async def get_run(self, run_id: str) -> AgentRun | None:
        return await self._transactions.read("get_run", _read_run, run_id)

    async def list_runs(self, **listing: Unpack[RunListing]) -> Sequence[AgentRun]:
        page = check_run_page(**listing)
        return await self._transactions.read("list_runs", _read_runs, page)

    async def get_checkpoint(self, run_id: str) -> dict[str, Any] | None:
        return await self._transactions.read("get_checkpoint", _read_checkpoint, run_id)

    # -- sessions -------------------------------------------------------------------

    async def get_session(self, session_id: str) -> Session | None:
        known = self._snapshots.get(session_id)
        session = await self._transactions.read("get_session", read_session, session_id, known)
        if session is None:
            self._snapshots.forget(session_id)
        elif session is not known:
            self._snapshots.keep(session)
        return session

    async def save_session(self, session: Session, *, expected_revision: int) -> Session:
        saved = Session(
            session.id,
            session.created_at,
            session.updated_at,
            tuple(session.history),
            session.summary,
            None,
            expected_revision + 1,
        )
        row = {
            "id": saved.id,
            "summary": saved.summary,
            "revision": saved.revision,
            "created_at": saved.created_at,
            "updated_at": saved.updated_at,
        }
        history = _dumps(list(saved.history), "The session history")
        await self._transactions.write(
            "save_session", replace_session, row, history, expected_revision
        )
        self._snapshots.keep(saved)
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
        check_event_page(after, limit, order)
        statement = sql.LIST_EVENTS_SQL[order]
        return await self._transactions.read(
            "list_events", _read_events, statement, run_id, after, -1 if limit is None else limit
        )

    async def close(self) -> None:
        """Let the operations already called finish, close the connection and end the
        store's thread; safe to call more than once, and a closed store opens again if used."""
        await self._transactions.close()

    async def __aenter__(self) -> SQLiteRunStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """``async with`` closes the store on exit."""
        await self.close()


def create_sqlite_run_store(
    path_or_url: str | os.PathLike[str],
    *,
    busy_timeout: float | None = None,
    clock: Callable[[], float] = time.time,
    create: bool | None = None,
) -> SQLiteRunStore:
    """Open the store in the file at ``path_or_url`` (a path, or ``sqlite:///runs.db``),
    creating the file and its schema when they do not exist yet, unless ``create=False``
    (or ``?create=false`` in the URL): then a missing file is ``STORE_NOT_FOUND``."""
    return SQLiteRunStore(path_or_url, busy_timeout=busy_timeout, clock=clock, create=create)


# -- transactions that need no clock, each run whole on the store's thread -------------


def _read_run(db: Connection, run_id: str) -> AgentRun | None:
    row = _one(db, sql.SELECT_RUN, id=run_id)
    return None if row is None else _run(row)


def _request_cancel(db: Connection, run_id: str) -> AgentRun:
    # A write transaction: the status read is the one the request is recorded on.
    row = _one(db, sql.SELECT_RUN, id=run_id)
    if row is None:
        raise run_not_found(run_id)
    run = _run(row)
    if records_cancel_request(run.status) and not run.cancel_requested:
        db.execute(sql.REQUEST_CANCEL, {"id": run_id})
        run = dataclasses.replace(run, cancel_requested=True)
    return run


def _read_runs(db: Connection, page: RunQuery) -> list[AgentRun]:
    parameters: dict[str, Any] = {**page.filters, "limit": page.limit}
    if page.after is not None:
        cursor = _one(db, sql.SELECT_RUN_POSITION, id=page.after)
        position = None if cursor is None else (str(cursor.created_at), str(cursor.id))
        parameters["below_created_at"], parameters["below_id"] = run_cursor(page.after, position)
    statement = sql.list_runs_statement(tuple(page.filters), page.after is not None)
    return [_run(row) for row in db.execute(statement, parameters)]


def _read_checkpoint(db: Connection, run_id: str) -> dict[str, Any] | None:
    row = _one(db, sql.SELECT_CHECKPOINT, id=run_id)
    if row is None:
        return None
    checkpoint: dict[str, Any] | None = json.loads(row.checkpoint)
    return checkpoint


def _read_events(
    db: Connection, statement: TextClause, run_id: str, after: str | None, limit: int
) -> list[RunEvent]:
    start = 0
    if after is not None:
        cursor = _one(db, sql.SELECT_CURSOR, id=after)
        found = None if cursor is None else (str(cursor.run_id), int(cursor.sequence))
        start = cursor_sequence(run_id, after, found)
    rows = db.execute(statement, {"run_id": run_id, "after": start, "limit": limit})
    return [_event(row) for row in rows]


# -- statements ------------------------------------------------------------------------


def _one(db: Connection, statement: TextClause, **params: Any) -> Row[Any] | None:
    return db.execute(statement, params).one_or_none()


def _set_lease(db: Connection, run_id: str, lease: RunLease) -> None:
    db.execute(
        sql.SET_LEASE,
        {
            "id": run_id,
            "owner": lease.owner,
            "generation": lease.generation,
            "expires_at": lease.expires_at,
        },
    )


def _insert_events(db: Connection, run_id: str, rows: list[dict[str, Any]]) -> None:
    """Insert events whose sequence was checked; the primary key refuses an id stored
    already (event_id_taken)."""
    if not rows:
        return
    try:
        db.execute(sql.INSERT_EVENT, rows)
    except IntegrityError as error:
        raise event_id_taken(run_id) from error


# -- rows ------------------------------------------------------------------------------


def _event_rows(events: Sequence[RunEvent]) -> list[dict[str, Any]]:
    """Rows of events whose run was checked (check_create_arguments, check_commit_arguments)."""
    rows = []
    for event in events:
        rows.append(
            {
                "id": event.id,
                "run_id": event.run_id,
                "sequence": event.sequence,
                "type": event.type,
                "occurred_at": event.occurred_at,
                "payload": _dumps(event.payload, f"The payload of event {event.id}"),
            }
        )
    return rows


def _run(row: Row[Any]) -> AgentRun:
    data = dict(row._mapping)
    for field in sql.JSON_RUN_FIELDS:
        data[field] = json.loads(data[field])
    return AgentRun.from_json(data)


def _lease(stored: Row[Any]) -> RunLease:
    return RunLease(
        str(stored.lease_owner), int(stored.lease_generation), float(stored.lease_expires_at)
    )


def _event(row: Row[Any]) -> RunEvent:
    return RunEvent(
        id=row.id,
        run_id=row.run_id,
        sequence=int(row.sequence),
        type=row.type,
        occurred_at=row.occurred_at,
        payload=json.loads(row.payload),
    )


def _dumps(value: Any, what: str) -> str:
    try:
        # NaN and infinities are not JSON: refused here as the PostgreSQL store refuses them.
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise invalid_argument(f"{what} is not plain JSON: {error}.") from error


def _is_seconds(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )
