"""Reading a run whole and taking it over, one statement each (``run_snapshots.py``): a
takeover that meets a row another worker's transaction holds is a conflict that takes
nothing, and runs read back exactly, whatever the database's encoding."""

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
from fevex_postgres import PostgresRunStore
from fevex_postgres.testing import libpq_url

pytestmark = pytest.mark.anyio

OpenStore = Callable[..., PostgresRunStore]
NOW = "2024-05-01T10:00:00Z"


async def paused_run(store: PostgresRunStore, input: object = "hi") -> tuple[AgentRun, RunLease]:
    run_id = f"run_{os.urandom(8).hex()}"
    session_id = f"ses_{os.urandom(8).hex()}"
    run = AgentRun(run_id, session_id, "a", "running", input, NOW, NOW, revision=1)
    started = RunEvent(f"evt_{os.urandom(8).hex()}", run_id, 1, "run.started", NOW, {})
    checkpoint = {"step": "ünïcode"}
    lease = await store.create_execution(
        ExecutionCreate(run, None, (started,), checkpoint, "worker-a", 60.0)
    )
    pause = {"reason": "event", "event": "go"}
    changes = {"status": "paused", "pause": pause, "wake_at": 1_700_000_000.123456}
    await store.commit_execution(
        ExecutionCommit(run_id, 2, NOW, lease, changes=changes, release_lease=True)
    )
    return run, lease


async def test_a_takeover_of_a_row_another_transaction_holds_is_a_conflict_taking_nothing(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store(lock_timeout=0.3)
    run, lease = await paused_run(store)
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as holder:
        await holder.execute("SELECT 1 FROM fevex_runs WHERE id = %s FOR UPDATE", (run.id,))
        with pytest.raises(FevexRunError) as raised:
            await asyncio.wait_for(store.take_over_run(run.id, "b", 60.0, status="paused"), 10)
        assert raised.value.code == "RUN_CONFLICT", raised.value
        assert raised.value.recoverable
        assert "locked" in raised.value.message
        await holder.rollback()
    taken = await store.take_over_run(run.id, "b", 60.0, status="paused")
    assert taken.lease.generation == lease.generation + 1


async def test_runs_read_back_exactly_in_a_database_that_is_not_utf8(
    databases: Any,
) -> None:
    name = databases.create(
        options="ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
    )
    store = PostgresRunStore(databases.url(name))
    try:
        await store.upgrade_schema()
        run, _ = await paused_run(store, {"text": "déjà vu", "n": 0.1})
        stored = await store.get_run(run.id)
        assert stored is not None
        assert stored.input == {"text": "déjà vu", "n": 0.1}
        assert stored.wake_at == 1_700_000_000.123456
        taken = await store.take_over_run(run.id, "b", 60.0, status="paused")
        assert taken.run == stored
        assert taken.checkpoint == {"step": "ünïcode"}
    finally:
        await store.close()
        databases.drop(name)
