"""The writes every run makes are one statement each (``execution_writes.py``): racing
writers still get exactly the outcomes the store rules give, and a pooled connection the
server dropped is replaced before a write uses it, without a ping per checkout."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from fevex import FevexRunError
from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCommit, ExecutionCreate, RunLease
from fevex_postgres import PostgresRunStore, execution_writes
from fevex_postgres.testing import libpq_url

pytestmark = pytest.mark.anyio

OpenStore = Callable[..., PostgresRunStore]
NOW = "2024-05-01T10:00:00Z"
RACERS = 6


def new_id(prefix: str) -> str:
    return f"{prefix}_{os.urandom(8).hex()}"


def new_run(session_id: str | None = None, run_id: str | None = None) -> AgentRun:
    return AgentRun(
        run_id or new_id("run"),
        session_id or new_id("ses"),
        "a",
        "running",
        "hi",
        NOW,
        NOW,
        revision=1,
    )


def started(run: AgentRun) -> RunEvent:
    return RunEvent(new_id("evt"), run.id, 1, "run.started", NOW, {})


def creation(run: AgentRun, session_revision: int | None = None) -> ExecutionCreate:
    return ExecutionCreate(run, session_revision, (started(run),), None, "worker-a", 60.0)


async def outcomes(attempts: list[Any]) -> list[str]:
    """``ok`` or the error code of each attempt, run all at once."""
    results = await asyncio.gather(*attempts, return_exceptions=True)
    codes = []
    for result in results:
        if isinstance(result, FevexRunError):
            codes.append(result.code)
        elif isinstance(result, BaseException):
            raise result
        else:
            codes.append("ok")
    return sorted(codes)


async def store_backends(url: str) -> set[int]:
    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as admin:
        rows = await admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'fevex' AND pid <> pg_backend_pid()"
        )
        return {pid for (pid,) in await rows.fetchall()}


async def terminate(url: str, backends: set[int]) -> None:
    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as admin:
        for pid in backends:
            # Waits (up to 10 s) until the backend is gone.
            await admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))


async def test_racing_commits_of_one_revision_store_exactly_one(open_store: OpenStore) -> None:
    store = open_store(pool_size=RACERS)
    run = new_run()
    lease = await store.create_execution(creation(run))
    commits = [
        ExecutionCommit(
            run.id,
            2,
            NOW,
            lease,
            (RunEvent(new_id("evt"), run.id, 2, "model.started", NOW, {"racer": racer}),),
            changes={"output": f"racer {racer}"},
        )
        for racer in range(RACERS)
    ]
    codes = await outcomes([store.commit_execution(commit) for commit in commits])
    assert codes == ["RUN_CONFLICT"] * (RACERS - 1) + ["ok"]
    stored = await store.get_run(run.id)
    assert stored is not None
    assert stored.revision == 2
    stored_events = await store.list_events(run.id)
    assert [event.sequence for event in stored_events] == [1, 2]
    winner = stored_events[1].payload["racer"]
    assert stored.output == f"racer {winner}"


async def test_racing_creators_of_one_new_session_reserve_it_once(
    open_store: OpenStore,
) -> None:
    store = open_store(pool_size=RACERS)
    session_id = new_id("ses")
    runs = [new_run(session_id) for _ in range(RACERS)]
    codes = await outcomes([store.create_execution(creation(run)) for run in runs])
    assert codes == ["RUN_CONFLICT"] * (RACERS - 1) + ["ok"]
    session = await store.get_session(session_id)
    assert session is not None
    assert session.revision == 1
    created = [run for run in runs if await store.get_run(run.id) is not None]
    assert [run.id for run in created] == [session.active_run_id]


async def test_racing_creators_of_one_run_id_create_it_once(open_store: OpenStore) -> None:
    store = open_store(pool_size=RACERS)
    run_id = new_id("run")
    runs = [new_run(run_id=run_id) for _ in range(RACERS)]
    codes = await outcomes([store.create_execution(creation(run)) for run in runs])
    assert codes == ["RUN_CONFLICT"] * (RACERS - 1) + ["ok"]
    stored = await store.get_run(run_id)
    assert stored is not None
    reserved = [await store.get_session(run.session_id) for run in runs]
    # Only the winner's session was written; the refused creations wrote nothing.
    assert [session.id for session in reserved if session is not None] == [stored.session_id]


async def test_writes_replace_pooled_connections_the_server_dropped(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store(pool_size=3)
    assert store.pool_options["pool_pre_ping"] is False
    run = new_run()
    lease = await store.create_execution(creation(run))
    # Several connections in the pool, all idle.
    await asyncio.gather(*(store.get_run(run.id) for _ in range(3)))
    pooled = await store_backends(database_url)
    assert pooled
    await terminate(database_url, pooled)

    # Every write and read draws a dropped connection first, and still succeeds.
    revision = 1
    for step in range(4):
        revision += 1
        event = RunEvent(new_id("evt"), run.id, revision, "model.started", NOW, {"step": step})
        await store.commit_execution(ExecutionCommit(run.id, revision, NOW, lease, (event,)))
    other = new_run()
    await store.create_execution(creation(other))
    stored = await store.get_run(run.id)
    assert stored is not None
    assert stored.revision == revision
    assert not pooled & await store_backends(database_url)


async def test_a_refused_write_leaves_its_connection_usable(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store(pool_size=1, max_overflow=0)
    run = new_run()
    lease = await store.create_execution(creation(run))
    (connection,) = await store_backends(database_url)
    stale = RunLease(lease.owner, lease.generation + 1, lease.expires_at)
    with pytest.raises(FevexRunError) as raised:
        await store.commit_execution(ExecutionCommit(run.id, 2, NOW, stale))
    assert raised.value.code == "LEASE_LOST"
    await store.commit_execution(ExecutionCommit(run.id, 2, NOW, lease, changes={"output": 1}))
    # The one pooled connection served all three writes: refusals do not drop it.
    assert await store_backends(database_url) == {connection}
    stored = await store.get_run(run.id)
    assert stored is not None
    assert (stored.revision, stored.output) == (2, 1)


async def prepared_statements(db: psycopg.AsyncConnection[Any]) -> dict[str, str]:
    rows = await db.execute("SELECT name, statement FROM pg_prepared_statements")
    return {name: statement for name, statement in await rows.fetchall()}


async def test_only_a_commit_that_changes_the_session_runs_the_statements_session_part(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store()
    run = new_run()
    lease = await store.create_execution(creation(run))
    async with await psycopg.AsyncConnection.connect(
        libpq_url(database_url), autocommit=True
    ) as db:
        step = RunEvent(new_id("evt"), run.id, 2, "model.started", NOW, {})
        plain = ExecutionCommit(run.id, 2, NOW, lease, (step,), changes={"output": "half"})
        await execution_writes.commit_execution(db, plain)
        prepared = await prepared_statements(db)
        assert set(prepared) == {"fevex_commit_run"}
        assert "fevex_runs" in prepared["fevex_commit_run"]
        assert "fevex_sessions" not in prepared["fevex_commit_run"]

        ended = RunEvent(new_id("evt"), run.id, 3, "run.completed", NOW, {})
        history = ({"role": "user", "content": "hi"}, {"role": "assistant", "content": "done"})
        last = ExecutionCommit(
            run.id,
            3,
            NOW,
            lease,
            (ended,),
            changes={"status": "completed", "output": "done"},
            history=history,
            release_session=True,
            release_lease=True,
        )
        await execution_writes.commit_execution(db, last)
        prepared = await prepared_statements(db)
        assert set(prepared) == {"fevex_commit_run", "fevex_commit_execution"}
        assert "fevex_sessions" in prepared["fevex_commit_execution"]
    stored = await store.get_run(run.id)
    assert stored is not None
    assert (stored.revision, stored.status, stored.output) == (3, "completed", "done")
    assert [event.sequence for event in await store.list_events(run.id)] == [1, 2, 3]
    session = await store.get_session(run.session_id)
    assert session is not None
    assert session.active_run_id is None
    assert [message["content"] for message in session.history] == ["hi", "done"]
