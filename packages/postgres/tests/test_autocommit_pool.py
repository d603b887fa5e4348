"""The pool of the one-statement writes (``autocommit_pool.py``): its size limits and
timeout, dropped and half-used connections replaced, one pool per event loop, and
``close``. Connections are observed from the server (``pg_stat_activity``)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

import psycopg
import pytest

from fevex import FevexRunError
from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCommit, ExecutionCreate, RunLease
from fevex_postgres import PostgresRunStore
from fevex_postgres.testing import libpq_url

pytestmark = pytest.mark.anyio

OpenStore = Callable[..., PostgresRunStore]
NOW = "2024-05-01T10:00:00Z"


def new_id(prefix: str) -> str:
    return f"{prefix}_{os.urandom(8).hex()}"


def new_run() -> AgentRun:
    return AgentRun(new_id("run"), new_id("ses"), "a", "running", "hi", NOW, NOW, revision=1)


def creation(run: AgentRun) -> ExecutionCreate:
    started = RunEvent(new_id("evt"), run.id, 1, "run.started", NOW, {})
    return ExecutionCreate(run, None, (started,), None, "worker-a", 60.0)


async def store_backends(url: str) -> set[int]:
    """The server processes of the store's connections to this database."""
    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as admin:
        rows = await admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'fevex' AND pid <> pg_backend_pid()"
        )
        return {pid for (pid,) in await rows.fetchall()}


async def terminate(url: str, backends: set[int]) -> None:
    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as admin:
        for pid in backends:
            await admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))


def step(run_id: str, revision: int, lease: RunLease) -> ExecutionCommit:
    event = RunEvent(new_id("evt"), run_id, revision, "model.started", NOW, {})
    return ExecutionCommit(run_id, revision, NOW, lease, (event,))


async def test_writes_beyond_the_pool_wait_for_a_connection_then_time_out(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store(pool_size=1, max_overflow=0, pool_timeout=0.5)
    run = new_run()
    lease = await store.create_execution(creation(run))
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as locker:
        await locker.execute("SELECT 1 FROM fevex_runs WHERE id = %s FOR UPDATE", (run.id,))
        # The commit holds the pool's one connection while it waits for the row.
        blocked = asyncio.create_task(store.commit_execution(step(run.id, 2, lease)))
        await asyncio.sleep(0.2)
        with pytest.raises(FevexRunError) as raised:
            await store.create_execution(creation(new_run()))
        assert raised.value.code == "STORE_UNAVAILABLE"
        assert "no pooled connection came free" in raised.value.message
        # A write that waits gets the connection once the commit gives it back.
        waiting = asyncio.create_task(store.create_execution(creation(new_run())))
        await asyncio.sleep(0.1)
        await locker.rollback()
    await blocked
    await waiting
    assert len(await store_backends(database_url)) == 1


async def test_a_write_cancelled_mid_statement_is_cancelled_on_the_server_too(
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
        blocked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await blocked
        # The statement was cancelled, not left waiting for the row: the pool's one
        # connection serves the next write at once.
        await store.create_execution(creation(new_run()))
        await locker.rollback()
    stored = await store.get_run(run.id)
    assert stored is not None
    assert stored.revision == 1
    await store.commit_execution(step(run.id, 2, lease))
    assert connection in await store_backends(database_url)


async def test_every_pooled_write_connection_the_server_dropped_is_replaced(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store(pool_size=3)
    # Three writes at once leave three idle connections in the pool.
    runs = [new_run() for _ in range(3)]
    leases = await asyncio.gather(*(store.create_execution(creation(run)) for run in runs))
    pooled = await store_backends(database_url)
    assert len(pooled) == 3
    await terminate(database_url, pooled)
    commits = [step(run.id, 2, lease) for run, lease in zip(runs, leases, strict=True)]
    await asyncio.gather(*(store.commit_execution(commit) for commit in commits))
    replaced = await store_backends(database_url)
    assert replaced
    assert not pooled & replaced


async def test_close_closes_the_pooled_connections_and_the_store_reopens(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store()
    await asyncio.gather(*(store.create_execution(creation(new_run())) for _ in range(3)))
    assert await store_backends(database_url)
    await store.close()
    assert await store_backends(database_url) == set()
    await store.create_execution(creation(new_run()))
    assert len(await store_backends(database_url)) == 1


def test_each_event_loop_has_its_own_pool(database_url: str) -> None:
    store = PostgresRunStore(database_url, pool_size=1, max_overflow=0)

    async def write_then_see() -> set[int]:
        await asyncio.gather(*(store.create_execution(creation(new_run())) for _ in range(3)))
        return await store_backends(database_url)

    first = asyncio.run(write_then_see())
    assert len(first) == 1
    # The second loop's pool opens a connection of its own; the ended loop's is closed.
    second = asyncio.run(write_then_see())
    assert len(second) == 1
    assert not first & second
    asyncio.run(store.close())
