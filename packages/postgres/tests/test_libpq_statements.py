"""The run's writes go through libpq itself (``libpq_statements.py``), not psycopg's
``execute``: what the server refuses still reaches the caller with the code it had, a
connection that failed or was left mid-statement is never lent again, a cancelled write is
all or nothing, and a connection that served a refused or a cancelled write serves the next
one."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

import psycopg
import pytest

from fevex import FevexRunError
from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCommit, ExecutionCreate, RunLease
from fevex.runtime.store_rules import event_id_taken
from fevex_postgres import PostgresRunStore
from fevex_postgres.testing import libpq_url

pytestmark = pytest.mark.anyio

OpenStore = Callable[..., PostgresRunStore]
NOW = "2024-05-01T10:00:00Z"


def new_id(prefix: str) -> str:
    return f"{prefix}_{os.urandom(8).hex()}"


def new_run() -> AgentRun:
    return AgentRun(new_id("run"), new_id("ses"), "a", "running", "hi", NOW, NOW, revision=1)


def creation(run: AgentRun, event_id: str | None = None) -> ExecutionCreate:
    started = RunEvent(event_id or new_id("evt"), run.id, 1, "run.started", NOW, {})
    return ExecutionCreate(run, None, (started,), None, "worker-a", 60.0)


def step(
    run_id: str, revision: int, lease: RunLease, event_id: str | None = None
) -> ExecutionCommit:
    event = RunEvent(event_id or new_id("evt"), run_id, revision, "model.started", NOW, {})
    return ExecutionCommit(run_id, revision, NOW, lease, (event,), changes={"output": revision})


async def store_backends(url: str) -> set[int]:
    """The server processes of the store's connections to this database."""
    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as admin:
        rows = await admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'fevex' AND pid <> pg_backend_pid()"
        )
        return {pid for (pid,) in await rows.fetchall()}


async def gone(url: str, backend: int, within: float = 10.0) -> bool:
    """Whether the server process ``backend`` has ended within ``within`` seconds: a closed
    connection's backend leaves ``pg_stat_activity`` only once it notices, after the close."""
    deadline = time.monotonic() + within
    while backend in await store_backends(url):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def refused(code: str, attempt: object) -> FevexRunError:
    with pytest.raises(FevexRunError) as raised:
        await attempt  # type: ignore[misc]
    assert raised.value.code == code, raised.value
    assert isinstance(raised.value.__cause__, psycopg.Error), repr(raised.value.__cause__)
    return raised.value


async def test_a_taken_event_id_is_event_id_taken_on_create_and_on_commit(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store(pool_size=1, max_overflow=0)
    run = new_run()
    lease = await store.create_execution(creation(run))
    (connection,) = await store_backends(database_url)
    taken = (await store.list_events(run.id))[0].id

    other = new_run()
    error = await refused("RUN_CONFLICT", store.create_execution(creation(other, taken)))
    assert error.message == event_id_taken(other.id).message
    assert isinstance(error.__cause__, psycopg.errors.UniqueViolation)
    assert await store.get_run(other.id) is None
    assert await store.get_session(other.session_id) is None

    error = await refused("RUN_CONFLICT", store.commit_execution(step(run.id, 2, lease, taken)))
    assert error.message == event_id_taken(run.id).message
    assert isinstance(error.__cause__, psycopg.errors.UniqueViolation)
    stored = await store.get_run(run.id)
    assert stored is not None
    assert stored.revision == 1
    assert len(await store.list_events(run.id)) == 1

    # The refusals left the pool's one connection ready: it serves the next writes.
    await store.commit_execution(step(run.id, 2, lease))
    await store.create_execution(creation(new_run()))
    assert connection in await store_backends(database_url)


async def test_a_statement_the_server_cancels_mid_commit_is_store_timeout(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store(pool_size=1, max_overflow=0, statement_timeout=0.5, lock_timeout=0.2)
    run = new_run()
    lease = await store.create_execution(creation(run))
    (connection,) = await store_backends(database_url)
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as admin:
        await admin.execute(
            "CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep(5); RETURN NEW; END $$"
        )
        await admin.execute(
            "CREATE TRIGGER slow BEFORE INSERT ON fevex_events "
            "FOR EACH ROW EXECUTE FUNCTION slow_insert()"
        )
        await admin.commit()
        error = await refused("STORE_TIMEOUT", store.commit_execution(step(run.id, 2, lease)))
        assert error.details == {"operation": "commit_execution"}
        assert isinstance(error.__cause__, psycopg.errors.QueryCanceled)
        await admin.execute("DROP TRIGGER slow ON fevex_events")
        await admin.commit()
    # The whole statement was rolled back, and its connection serves again.
    stored = await store.get_run(run.id)
    assert stored is not None
    assert (stored.revision, stored.output) == (1, None)
    await store.commit_execution(step(run.id, 2, lease))
    assert connection in await store_backends(database_url)


async def test_a_connection_ended_mid_statement_is_store_unavailable_and_replaced(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store(pool_size=1, max_overflow=0)
    run = new_run()
    lease = await store.create_execution(creation(run))
    (connection,) = await store_backends(database_url)
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as locker:
        await locker.execute("SELECT 1 FROM fevex_runs WHERE id = %s FOR UPDATE", (run.id,))
        blocked = asyncio.create_task(store.commit_execution(step(run.id, 2, lease)))
        await asyncio.sleep(0.2)
        async with await psycopg.AsyncConnection.connect(
            libpq_url(database_url), autocommit=True
        ) as admin:
            await admin.execute("SELECT pg_terminate_backend(%s, 10000)", (connection,))
        error = await refused("STORE_UNAVAILABLE", blocked)
        assert error.recoverable
        await locker.rollback()
    # The broken connection was closed, not pooled: the next write opens another.
    await store.commit_execution(step(run.id, 2, lease))
    assert await gone(database_url, connection)
    stored = await store.get_run(run.id)
    assert stored is not None
    assert stored.revision == 2


async def test_a_write_cancelled_twice_is_all_or_nothing_and_its_connection_closed(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store(pool_size=1, max_overflow=0)
    run = new_run()
    lease = await store.create_execution(creation(run))
    (connection,) = await store_backends(database_url)
    commit = step(run.id, 2, lease)
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as locker:
        await locker.execute("SELECT 1 FROM fevex_runs WHERE id = %s FOR UPDATE", (run.id,))
        blocked = asyncio.create_task(store.commit_execution(commit))
        await asyncio.sleep(0.2)
        blocked.cancel()
        # The first cancellation is being answered (the server asked to cancel the
        # statement); the second interrupts that, leaving the connection mid-statement.
        await asyncio.sleep(0)
        blocked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await blocked
        await locker.rollback()
    # Never lent again mid-statement: the next write runs on a new connection.
    other = new_run()
    await store.create_execution(creation(other))
    assert await gone(database_url, connection)
    # The cancelled commit was written whole or not at all.
    stored = await store.get_run(run.id)
    assert stored is not None
    events = await store.list_events(run.id)
    if stored.revision == 1:
        assert stored.output is None
        assert [event.sequence for event in events] == [1]
    else:
        assert (stored.revision, stored.output) == (2, 2)
        assert [event.id for event in events][1:] == [commit.events[0].id]


async def test_a_write_cancelled_once_its_statement_was_prepared_leaves_a_usable_connection(
    open_store: OpenStore, database_url: str
) -> None:
    """The commit statement's first prepare on a connection is held on a table lock; the
    lock goes and the server prepares it, and then, before its answer is read, the write is
    cancelled. The connection serves again, and its next commit, which prepares again, is
    written (it was STORE_ERROR, DuplicatePreparedStatement, on every later commit there)."""
    store = open_store(pool_size=1, max_overflow=0)
    run = new_run()
    lease = await store.create_execution(creation(run))
    (connection,) = await store_backends(database_url)
    with psycopg.connect(libpq_url(database_url)) as locker:
        locker.execute("LOCK TABLE fevex_events IN ACCESS EXCLUSIVE MODE")
        blocked = asyncio.create_task(store.commit_execution(step(run.id, 2, lease)))
        await asyncio.sleep(0.3)
        # Blocking, on purpose: the write's task cannot read the prepare's answer before it
        # is cancelled.
        locker.rollback()
        time.sleep(0.3)  # noqa: ASYNC251
        blocked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await blocked
    stored = await store.get_run(run.id)
    assert stored is not None
    assert stored.revision == 1
    await store.commit_execution(step(run.id, 2, lease))
    stored = await store.get_run(run.id)
    assert stored is not None
    assert (stored.revision, stored.output) == (2, 2)
    assert connection in await store_backends(database_url)
