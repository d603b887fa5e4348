"""The PostgreSQL run store: the in-memory store's contract, shared by many processes.

Each operation borrows its own connection from the store's pool and, when it writes, runs
in one transaction; nothing in the process serializes operations. Concurrency is the
database's business:

- a commit locks its run row (``SELECT ... FOR UPDATE``) and checks the lease and the
  revision against it before writing anything, so a fenced-out writer changes nothing;
- run creation locks (or inserts) the session row, so one session is reserved by one run;
- lease expiry is judged by the database's clock, never by a worker's;
- ``claim_expired_run`` and ``claim_due_run`` take a candidate with ``FOR UPDATE SKIP
  LOCKED`` (:mod:`fevex_postgres.claims`), so concurrent recovery and wake-up passes split
  the runs instead of queueing on the same one;
- a commit that ends a child run wakes its parent in the same statement;
- no session can hold a row lock for long, nor wait for one: every connection carries the
  server-side timeouts of :mod:`fevex_postgres.timeouts`, so the row of a worker frozen
  inside a commit is released before its lease expires.

Followers wait on LISTEN/NOTIFY instead of polling (:mod:`fevex_postgres.notifications`).

Only JSON goes in and out: JSONB columns, read back with the driver's ``json.loads``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from sqlalchemy import Row, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from fevex.errors import FevexRunError
from fevex.events import RunEvent
from fevex.runtime import (
    AgentRun,
    EventOrder,
    ExecutionCommit,
    ExecutionCreate,
    RunLease,
    RunListing,
    RunTakeover,
    Session,
    check_acquirable,
    check_commit_arguments,
    check_create_arguments,
    check_event_page,
    check_expired_run_limit,
    check_renewal,
    check_run_page,
    check_session_saveable,
    claimable_names,
    cursor_sequence,
    invalid_argument,
    records_cancel_request,
    run_conflict,
    run_cursor,
    run_not_found,
    session_not_found,
)
from fevex_postgres import claims, execution_writes, run_snapshots
from fevex_postgres.migrations import (
    LATEST_VERSION,
    SchemaUpgrade,
    schema_outdated,
    schema_too_new,
    schema_version_of,
    upgrade_schema,
)
from fevex_postgres.notifications import LONGEST_FOLLOW_SECONDS, RunNotifications, follow_run
from fevex_postgres.store_setup import set_up_store
from fevex_postgres.tables import database_now, events, runs, sessions
from fevex_postgres.timeouts import SessionTimeouts

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from fevex_postgres.record_store import PostgresRecordStore

__all__ = ["PostgresRunStore", "create_postgres_run_store"]

_RUN_COLUMNS = (
    runs.c.id,
    runs.c.session_id,
    runs.c.agent_name,
    runs.c.kind,
    runs.c.status,
    runs.c.input,
    runs.c.output,
    runs.c.usage,
    runs.c.error,
    runs.c.pause,
    runs.c.revision,
    runs.c.created_at,
    runs.c.updated_at,
    runs.c.name,
    runs.c.version,
    runs.c.parent_run_id,
    runs.c.root_run_id,
    runs.c.context,
    runs.c.cancel_requested,
    runs.c.wake_at,
)
# The page order of list_runs, byte by byte whatever the database's collation, as the
# other stores compare text (and as the migration 2 indexes are built).
_CREATED = runs.c.created_at.collate("C")
_ID = runs.c.id.collate("C")
_EVENT_COLUMNS = (
    events.c.id,
    events.c.run_id,
    events.c.sequence,
    events.c.type,
    events.c.occurred_at,
    events.c.payload,
)
# The stored lease and the database's clock, which judges it.
_LEASE_COLUMNS = (
    runs.c.lease_owner,
    runs.c.lease_generation,
    runs.c.lease_expires_at,
    database_now().label("now"),
)
_SESSION_COLUMNS = (
    sessions.c.id,
    sessions.c.history,
    sessions.c.summary,
    sessions.c.active_run_id,
    sessions.c.revision,
    sessions.c.created_at,
    sessions.c.updated_at,
)


def create_postgres_run_store(url: str, **options: Any) -> PostgresRunStore:
    """Open a store on the PostgreSQL database at ``url``; see :class:`PostgresRunStore`.

    This is the factory the plugin registers for ``postgresql://`` URLs.
    """
    return PostgresRunStore(url, **options)


class PostgresRunStore:
    """A :class:`~fevex.runtime.RunStore` on PostgreSQL through SQLAlchemy and psycopg 3.

    ``url`` is ``postgresql+psycopg://user:password@host:5432/database`` (``postgresql://``
    works too). ``options`` and the URL's query string set the connection pool:
    ``pool_size`` (5), ``max_overflow`` (10), ``pool_timeout`` seconds (30),
    ``pool_recycle`` seconds (-1: never) and ``pool_pre_ping`` (false); and the server-side
    timeouts of every session, in seconds, each below the app's ``lease_seconds``:
    ``statement_timeout`` (10), ``lock_timeout`` (5, below ``statement_timeout``) and
    ``idle_in_transaction_session_timeout`` (10), kept in :attr:`timeouts`. Keyword
    arguments win over the query string.

    Opening connects to nothing. The schema is never created or changed here: run
    ``fevex db upgrade --store URL`` first; until then every operation fails with
    ``SCHEMA_OUTDATED``.

    Each event loop that uses the store gets pools of its own (see ``connections.py``),
    and, once something follows a run's events in it, one more connection that listens for
    commits (see :meth:`wait_for_events`).
    """

    def __init__(self, url: str, **options: Any) -> None:
        setup = set_up_store("PostgresRunStore", url, options)
        self.url = setup.display_url
        self.pool_options: dict[str, Any] = setup.pool_options
        self.timeouts: SessionTimeouts = setup.timeouts
        self._pools = setup.pools
        self._notifications = RunNotifications(setup.connect_options, self.url)
        self._schema_ready = False
        # What open_record_store opens the same database with.
        self._opened_with = (url, dict(options))

    def __repr__(self) -> str:
        return f"PostgresRunStore({self.url!r})"

    def open_record_store(self) -> PostgresRecordStore:
        """The record store of this store's database, with the same options, which
        ``create_fevex(run_store=store)`` gives the app."""
        from fevex_postgres.record_store import PostgresRecordStore

        url, options = self._opened_with
        return PostgresRecordStore(url, **options)

    # -- schema ---------------------------------------------------------------------

    async def schema_version(self) -> int:
        """The schema version the database holds (0: none)."""
        async with self._pools.driver("schema_version") as db:
            return await schema_version_of(db)

    async def check_schema(self) -> None:
        """Fail with ``SCHEMA_OUTDATED`` (or ``SCHEMA_TOO_NEW``) unless the database holds
        exactly the schema this code needs. Operations call it once, lazily."""
        version = await self.schema_version()
        if version < LATEST_VERSION:
            raise schema_outdated(self.url, version)
        if version > LATEST_VERSION:
            raise schema_too_new(self.url, version)
        self._schema_ready = True

    async def upgrade_schema(self) -> SchemaUpgrade:
        """Apply the migrations the database lacks (what ``fevex db upgrade`` runs)."""
        async with self._pools.connect("upgrade_schema") as connection, connection.begin():
            upgrade = await upgrade_schema(connection, self.url)
        self._schema_ready = True
        return upgrade

    # -- connections ----------------------------------------------------------------

    @asynccontextmanager
    async def _read(self, operation: str) -> AsyncIterator[AsyncConnection]:
        if not self._schema_ready:
            await self.check_schema()
        async with self._pools.connect(operation) as connection:
            yield connection

    @asynccontextmanager
    async def _driver(self, operation: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if not self._schema_ready:
            await self.check_schema()
        async with self._pools.driver(operation) as connection:
            yield connection

    @asynccontextmanager
    async def _transaction(self, operation: str) -> AsyncIterator[AsyncConnection]:
        if not self._schema_ready:
            await self.check_schema()
        async with self._pools.connect(operation) as connection, connection.begin():
            yield connection

    # -- runs -----------------------------------------------------------------------

    async def create_execution(self, create: ExecutionCreate) -> RunLease:
        check_create_arguments(create)
        if not self._schema_ready:
            await self.check_schema()
        return await self._pools.on_driver(
            "create_execution", execution_writes.create_execution, create
        )

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        check_commit_arguments(commit)
        if not self._schema_ready:
            await self.check_schema()
        await self._pools.on_driver("commit_execution", execution_writes.commit_execution, commit)

    async def request_cancel(self, run_id: str) -> AgentRun:
        async with self._transaction("request_cancel") as db:
            # Locked: the status read is the one the request is recorded on.
            row = (
                await db.execute(select(*_RUN_COLUMNS).where(runs.c.id == run_id).with_for_update())
            ).first()
            if row is None:
                raise run_not_found(run_id)
            run = AgentRun.from_json(dict(row._mapping))
            if records_cancel_request(run.status) and not run.cancel_requested:
                await db.execute(
                    update(runs).where(runs.c.id == run_id).values(cancel_requested=True)
                )
                run = dataclasses.replace(run, cancel_requested=True)
        return run

    async def renew_lease(self, run_id: str, lease: RunLease, seconds: float) -> RunLease:
        async with self._transaction("renew_lease") as db:
            stored = await _lock_run_lease(db, run_id)
            check_renewal(run_id, lease, _lease(stored), stored.now, stored.cancel_requested)
            renewed = await db.scalar(
                update(runs)
                .where(runs.c.id == run_id)
                .values(lease_expires_at=database_now() + seconds)
                .returning(runs.c.lease_expires_at)
            )
        return dataclasses.replace(lease, expires_at=float(renewed))

    async def acquire_lease(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunLease:
        try:
            return await self._acquire_lease(run_id, owner, seconds, status)
        except FevexRunError as error:
            if error.code != "STORE_BUSY":
                raise
            raise self._row_locked(run_id) from error

    async def take_over_run(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunTakeover:
        """``acquire_lease`` and the reads of a takeover, in one statement
        (:mod:`fevex_postgres.run_snapshots`)."""
        try:
            async with self._driver("take_over_run") as db:
                return await run_snapshots.take_over_run(db, run_id, owner, seconds, status)
        except FevexRunError as error:
            if error.code != "STORE_BUSY":
                raise
            raise self._row_locked(run_id) from error

    def _row_locked(self, run_id: str) -> FevexRunError:
        """What a taker's ``STORE_BUSY`` means: lock_timeout ran out on the run's row, which
        a transaction of another worker holds, and the lease cannot be judged until it
        ends."""
        return run_conflict(
            f"Run {run_id} stayed locked by another worker's transaction for "
            f"{self.timeouts.lock_timeout:g} s; that worker is writing the run, or froze "
            "inside a commit and the server ends its session after "
            f"{self.timeouts.idle_in_transaction_session_timeout:g} s. Retry then.",
            run_id=run_id,
        )

    async def _acquire_lease(
        self, run_id: str, owner: str, seconds: float, status: str
    ) -> RunLease:
        async with self._transaction("acquire_lease") as db:
            stored = await _lock_run_lease(db, run_id)
            check_acquirable(run_id, status, stored.status, _lease(stored), stored.now)
            acquired = (
                await db.execute(
                    update(runs)
                    .where(runs.c.id == run_id)
                    .values(
                        lease_owner=owner,
                        lease_generation=runs.c.lease_generation + 1,
                        lease_expires_at=database_now() + seconds,
                    )
                    .returning(runs.c.lease_generation, runs.c.lease_expires_at)
                )
            ).one()
        return RunLease(owner, int(acquired.lease_generation), float(acquired.lease_expires_at))

    async def claim_expired_run(
        self, owner: str, seconds: float, *, names: Collection[str] | None = None
    ) -> tuple[str, RunLease] | None:
        chosen = claimable_names(names)
        if chosen is not None and not chosen:
            return None  # no name: no run it could continue
        async with self._driver("claim_expired_run") as db:
            return await claims.claim_expired_run(db, owner, seconds, chosen)

    async def claim_due_run(
        self, owner: str, seconds: float, *, names: Collection[str] | None = None
    ) -> tuple[str, RunLease] | None:
        chosen = claimable_names(names)
        if chosen is not None and not chosen:
            return None  # no name: no run it could wake
        async with self._driver("claim_due_run") as db:
            return await claims.claim_due_run(db, owner, seconds, chosen)

    async def expired_run_ids(
        self, *, limit: int = 100, names: Collection[str] | None = None
    ) -> Sequence[str]:
        check_expired_run_limit(limit)
        chosen = claimable_names(names)
        if chosen is not None and not chosen:
            return []
        async with self._driver("expired_run_ids") as db:
            return await claims.expired_run_ids(db, limit, chosen)

    async def get_run(self, run_id: str) -> AgentRun | None:
        if not self._schema_ready:
            await self.check_schema()
        return await self._pools.on_driver("get_run", run_snapshots.get_run, run_id)

    async def list_runs(self, **listing: Unpack[RunListing]) -> Sequence[AgentRun]:
        page = check_run_page(**listing)
        query = select(*_RUN_COLUMNS).where(
            *(runs.c[field] == value for field, value in page.filters.items())
        )
        async with self._read("list_runs") as db:
            if page.after is not None:
                cursor = (
                    await db.execute(
                        select(runs.c.created_at, runs.c.id).where(runs.c.id == page.after)
                    )
                ).first()
                position = None if cursor is None else (cursor.created_at, cursor.id)
                below = run_cursor(page.after, position)
                # A row comparison over the index's columns: one range scan below the cursor.
                query = query.where(tuple_(_CREATED, _ID) < tuple_(*below))
            query = query.order_by(_CREATED.desc(), _ID.desc()).limit(page.limit)
            rows = (await db.execute(query)).all()
        return [AgentRun.from_json(dict(row._mapping)) for row in rows]

    async def get_checkpoint(self, run_id: str) -> dict[str, Any] | None:
        async with self._read("get_checkpoint") as db:
            checkpoint: dict[str, Any] | None = await db.scalar(
                select(runs.c.checkpoint).where(runs.c.id == run_id)
            )
        return checkpoint

    # -- sessions -------------------------------------------------------------------

    async def get_session(self, session_id: str) -> Session | None:
        async with self._read("get_session") as db:
            row = (
                await db.execute(select(*_SESSION_COLUMNS).where(sessions.c.id == session_id))
            ).first()
        return None if row is None else Session.from_json(dict(row._mapping))

    async def save_session(self, session: Session, *, expected_revision: int) -> Session:
        async with self._transaction("save_session") as db:
            stored = (
                await db.execute(
                    select(sessions.c.active_run_id, sessions.c.revision)
                    .where(sessions.c.id == session.id)
                    .with_for_update()
                )
            ).first()
            if stored is None:
                raise session_not_found(session.id)
            check_session_saveable(
                session.id, stored.active_run_id, stored.revision, expected_revision
            )
            saved = dataclasses.replace(session, revision=expected_revision + 1, active_run_id=None)
            await db.execute(
                update(sessions)
                .where(sessions.c.id == session.id)
                .values(
                    history=list(saved.history),
                    summary=saved.summary,
                    active_run_id=None,
                    revision=saved.revision,
                    created_at=saved.created_at,
                    updated_at=saved.updated_at,
                )
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
        check_event_page(after, limit, order)
        async with self._read("list_events") as db:
            start = 0
            if after is not None:
                # The cursor is resolved by id alone: no earlier payload is read.
                cursor = (
                    await db.execute(
                        select(events.c.run_id, events.c.sequence).where(events.c.id == after)
                    )
                ).first()
                found = None if cursor is None else (cursor.run_id, cursor.sequence)
                start = cursor_sequence(run_id, after, found)
            by_sequence = events.c.sequence.desc() if order == "desc" else events.c.sequence.asc()
            query = (
                select(*_EVENT_COLUMNS)
                .where(events.c.run_id == run_id, events.c.sequence > start)
                .order_by(by_sequence)
                .limit(limit)
            )
            rows = (await db.execute(query)).all()
        return [RunEvent.from_json(dict(row._mapping)) for row in rows]

    async def wait_for_events(self, run_id: str, *, after: str | None, timeout: float) -> bool:
        """Wait until the run has an event after ``after`` or has ended (see
        :class:`~fevex.runtime.NotifyingRunStore`), without reading it again
        meanwhile: the wait records on the run's row that it follows the run, its commits
        then announce themselves with NOTIFY, and this event loop's listening connection
        wakes the wait. One statement, once listening, checks whether the run moved on
        already; it writes only when no registration covers the wait. A wait longer than
        :data:`~fevex_postgres.notifications.LONGEST_FOLLOW_SECONDS` is several in a row."""
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0:
            raise invalid_argument("timeout must be seconds, 0 or more.")
        if not self._schema_ready:
            await self.check_schema()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            span = min(max(deadline - loop.time(), 0.0), LONGEST_FOLLOW_SECONDS)
            moved_on = functools.partial(
                self._pools.on_driver, "wait_for_events", follow_run, (run_id, after, span)
            )
            if await self._notifications.wait(run_id, moved_on, span):
                return True
            if loop.time() >= deadline:
                return False

    def followers_waiting(self) -> int:
        """How many :meth:`wait_for_events` calls of the running event loop are waiting:
        the followers of idle runs, for diagnostics."""
        return self._notifications.waiting()

    async def close(self) -> None:
        """Close the pooled and the listening connections; a closed store reconnects if
        used again."""
        await self._notifications.close()
        await self._pools.close()

    async def __aenter__(self) -> PostgresRunStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """``async with`` closes the store on exit."""
        await self.close()


# -- transaction steps ------------------------------------------------------------------


async def _lock_run_lease(db: AsyncConnection, run_id: str) -> Row[Any]:
    """The run's status, cancel request and lease, and the database's clock, with the row
    locked until the transaction ends; ``RUN_NOT_FOUND`` for an unknown run."""
    stored = (
        await db.execute(
            select(runs.c.status, runs.c.cancel_requested, *_LEASE_COLUMNS)
            .where(runs.c.id == run_id)
            .with_for_update()
        )
    ).first()
    if stored is None:
        raise run_not_found(run_id)
    return stored


def _lease(stored: Row[Any]) -> RunLease:
    return RunLease(stored.lease_owner, stored.lease_generation, stored.lease_expires_at)
