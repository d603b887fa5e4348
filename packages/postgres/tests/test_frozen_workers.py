"""A worker frozen inside a transaction cannot block the others: the server-side timeouts every
session of the store carries bound how long a row stays locked and how long anyone waits
for it, and ``expired_run_ids`` reports what ``claim_expired_run`` must skip meanwhile.

The frozen worker is real: a process renewing its lease (``renew_lease``) that stops itself
(``SIGSTOP``) right after the renewal locked its run row, inside the transaction. (A commit
cannot freeze there: it is one statement, which the server finishes, or cancels after
``statement_timeout``, whatever its client does.) Short
timeouts keep the test quick; ``asyncio.wait_for`` turns a hang into a failure.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from fevex import FevexConfigurationError, FevexRunError, create_fevex, define_agent
from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCommit, ExecutionCreate, RunLease
from fevex.testing import FakeModel
from fevex_postgres import PostgresRunStore
from fevex_postgres.testing import libpq_url

pytestmark = pytest.mark.anyio

OpenStore = Callable[..., PostgresRunStore]
NOW = "2024-05-01T10:00:00Z"
# The frozen worker's sessions: the server ends one idle inside a transaction after 4 s.
WORKER_TIMEOUTS = "statement_timeout=3&lock_timeout=1&idle_in_transaction_session_timeout=4"
# The recovering side gives up on a lock after half a second.
RECOVERY_TIMEOUTS = {
    "statement_timeout": 2.0,
    "lock_timeout": 0.5,
    "idle_in_transaction_session_timeout": 2.0,
}

FROZEN_WORKER = """
import asyncio, os, signal, sys
from sqlalchemy import event
from sqlalchemy.engine import Engine
from fevex.runtime import RunLease
from fevex_postgres import PostgresRunStore

@event.listens_for(Engine, "after_cursor_execute")
def freeze(connection, cursor, statement, parameters, context, executemany):
    # The renewal has just locked its run row: stop here, inside the transaction.
    if "FOR UPDATE" in statement:
        print("locked", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)

async def main(url, run_id, owner, generation, expires_at):
    store = PostgresRunStore(url)
    lease = RunLease(owner, int(generation), float(expires_at))
    await store.renew_lease(run_id, lease, 30.0)

asyncio.run(main(*sys.argv[1:]))
"""


async def create(store: PostgresRunStore, seconds: float) -> tuple[AgentRun, RunLease]:
    run_id = f"run_{os.urandom(8).hex()}"
    run = AgentRun(run_id, f"ses_{os.urandom(8).hex()}", "a", "running", "hi", NOW, NOW, revision=1)
    started = RunEvent(f"evt_{os.urandom(8).hex()}", run_id, 1, "run.started", NOW, {})
    lease = await store.create_execution(
        ExecutionCreate(run, None, (started,), None, "worker-a", seconds)
    )
    return run, lease


async def listed_once_expired(store: PostgresRunStore, run_id: str) -> list[str]:
    for _ in range(100):
        listed = list(await asyncio.wait_for(store.expired_run_ids(), 5))
        if run_id in listed:
            return listed
        await asyncio.sleep(0.1)
    raise AssertionError(f"run {run_id} was never listed as expired")


async def claimed_once_freed(store: PostgresRunStore, within: float) -> tuple[str, RunLease] | None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        claim = await asyncio.wait_for(store.claim_expired_run("recovery", 60.0), 5)
        if claim is not None:
            return claim
        await asyncio.sleep(0.2)
    return None


async def test_a_worker_frozen_inside_a_renewal_holds_its_row_for_a_bounded_time(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store(**RECOVERY_TIMEOUTS)
    run, lease = await create(store, seconds=0.5)
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        FROZEN_WORKER,
        f"{database_url}?{WORKER_TIMEOUTS}",
        run.id,
        lease.owner,
        str(lease.generation),
        repr(lease.expires_at),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert worker.stdout is not None
        locked = await asyncio.wait_for(worker.stdout.readline(), 60)
        assert locked == b"locked\n", await worker.communicate()

        # (c) The frozen worker's lease has expired and its row is locked: the claim passes
        # the run over (SKIP LOCKED), and expired_run_ids, a plain read, still lists it.
        listed = await listed_once_expired(store, run.id)
        assert await asyncio.wait_for(store.claim_expired_run("recovery", 60.0), 5) is None
        assert run.id in listed

        # (a) acquire_lease waits for the row no longer than lock_timeout, then reports the
        # conflict: somebody holds the run.
        started = time.monotonic()
        with pytest.raises(FevexRunError) as raised:
            await asyncio.wait_for(store.acquire_lease(run.id, "recovery", 60.0), 10)
        waited = time.monotonic() - started
        assert raised.value.code == "RUN_CONFLICT", raised.value
        assert raised.value.recoverable
        assert "locked" in raised.value.message
        assert 0.4 < waited < 8.0, waited

        # (b) The server ends the frozen session once it sat idle in its transaction for
        # idle_in_transaction_session_timeout, rolling it back: the run can be claimed.
        claim = await claimed_once_freed(store, within=20.0)
        assert claim is not None, "the frozen worker's row stayed locked"
        assert claim[0] == run.id
        assert claim[1].generation == lease.generation + 1
        stored = await store.get_run(run.id)
        assert stored is not None
        assert stored.revision == 1  # the frozen renewal wrote nothing
    finally:
        if worker.returncode is None:
            worker.kill()  # SIGKILL ends a stopped process too
        await worker.wait()


async def test_recover_run_honours_its_timeout_while_a_frozen_worker_holds_the_row(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store(lock_timeout=30.0, statement_timeout=60.0)
    run, lease = await create(store, seconds=0.2)
    app = create_fevex(
        models={"default": FakeModel({"output": "never asked"})},
        agents=[define_agent(name="a", instructions="Answer.")],
        run_store=store,
    )
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as frozen:
        await frozen.execute("SELECT 1 FROM fevex_runs WHERE id = %s FOR UPDATE", (run.id,))
        await asyncio.sleep(0.3)  # the lease has expired; the row is still locked
        with pytest.raises(FevexRunError) as raised:
            await asyncio.wait_for(app.recover_run(run.id, actor={"id": "x"}, timeout=1), 20)
        # Not RUN_CONFLICT after the 30 s lock wait: the takeover's own deadline ended it.
        assert raised.value.code == "RUN_TIMEOUT", raised.value
        await frozen.rollback()
    stored = await store.get_run(run.id)
    assert stored is not None
    assert (stored.status, stored.revision) == ("running", 1)
    # The cancelled wait left the store usable: the run can be taken over now.
    assert (await store.acquire_lease(run.id, "recovery", 60.0)).generation == lease.generation + 1


async def test_a_sweep_reports_the_run_a_frozen_worker_still_locks(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store()
    run, _ = await create(store, seconds=0.2)
    app = create_fevex(
        models={"default": FakeModel()},
        agents=[define_agent(name="a", instructions="Answer.")],
        run_store=store,
    )
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as frozen:
        await frozen.execute("SELECT 1 FROM fevex_runs WHERE id = %s FOR UPDATE", (run.id,))
        await asyncio.sleep(0.3)  # the lease has expired; the row is still locked
        sweep = await asyncio.wait_for(app.recover_expired_runs(actor={"id": "sweeper"}), 20)
        await frozen.rollback()
    assert sweep.recovered == sweep.skipped == ()
    assert run.id in sweep.unclaimed


async def test_a_lock_wait_past_lock_timeout_is_store_busy_and_writes_nothing(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store(lock_timeout=0.3)
    run, lease = await create(store, seconds=60.0)
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as holder:
        await holder.execute("SELECT 1 FROM fevex_runs WHERE id = %s FOR UPDATE", (run.id,))
        commit = ExecutionCommit(run.id, 2, NOW, lease, changes={"output": "value-9c2e"})
        with pytest.raises(FevexRunError) as raised:
            await asyncio.wait_for(store.commit_execution(commit), 10)
        assert raised.value.code == "STORE_BUSY", raised.value
        assert raised.value.recoverable
        assert "value-9c2e" not in str(raised.value)
        await holder.rollback()
    assert (await store.get_run(run.id)) == run
    await store.commit_execution(commit)


async def test_a_statement_past_statement_timeout_is_store_timeout(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store(statement_timeout=0.5, lock_timeout=0.2)
    run, lease = await create(store, seconds=60.0)
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as admin:
        await admin.execute(
            "CREATE FUNCTION slow_update() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep(5); RETURN NEW; END $$"
        )
        await admin.execute(
            "CREATE TRIGGER slow BEFORE UPDATE ON fevex_runs "
            "FOR EACH ROW EXECUTE FUNCTION slow_update()"
        )
        await admin.commit()
        started = time.monotonic()
        with pytest.raises(FevexRunError) as raised:
            await asyncio.wait_for(store.renew_lease(run.id, lease, 600.0), 10)
        assert time.monotonic() - started < 8.0
        assert raised.value.code == "STORE_TIMEOUT", raised.value
        assert raised.value.details == {"operation": "renew_lease"}
        assert "UPDATE" not in str(raised.value).upper()
        # The statement was cancelled and its transaction rolled back: the lease is as it was.
        cursor = await admin.execute(
            "SELECT lease_expires_at FROM fevex_runs WHERE id = %s", (run.id,)
        )
        assert await cursor.fetchone() == (lease.expires_at,)


async def test_every_session_carries_the_timeouts_and_the_urls_own_options(
    open_store: OpenStore, database_url: str
) -> None:
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as admin:
        await admin.execute(
            "CREATE TABLE seen_settings (statement text, lock text, idle text, work_mem text)"
        )
        await admin.execute(
            "CREATE FUNCTION record_settings() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "INSERT INTO seen_settings VALUES (current_setting('statement_timeout'), "
            "current_setting('lock_timeout'), "
            "current_setting('idle_in_transaction_session_timeout'), "
            "current_setting('work_mem')); RETURN NEW; END $$"
        )
        await admin.execute(
            "CREATE TRIGGER record BEFORE INSERT ON fevex_runs "
            "FOR EACH ROW EXECUTE FUNCTION record_settings()"
        )
        await admin.commit()
        default = open_store()
        configured = open_store(
            f"{database_url}?statement_timeout=7&lock_timeout=2.5&options=-c%20work_mem%3D5MB",
            idle_in_transaction_session_timeout=9,
            lock_timeout=3,
        )
        for store in (default, configured):
            await create(store, seconds=60.0)
        cursor = await admin.execute("SELECT * FROM seen_settings")
        seen = await cursor.fetchall()
    assert seen[0][:3] == ("10s", "5s", "10s")
    assert seen[1] == ("7s", "3s", "9s", "5MB")
    assert configured.timeouts.lock_timeout == 3.0
    assert configured.timeouts.longest == 9.0


@pytest.mark.parametrize(
    ("query", "options"),
    [
        ("", {"lock_timeout": 0}),
        ("", {"statement_timeout": -1.0}),
        ("", {"idle_in_transaction_session_timeout": float("nan")}),
        ("", {"lock_timeout": True}),
        ("", {"lock_timeout": "5"}),
        ("?lock_timeout=soon", {}),
        ("?idle_in_transaction_session_timeout=inf", {}),
        ("?statement_timeout=4", {}),  # below the default lock_timeout of 5 s
        ("", {"statement_timeout": 2.0, "lock_timeout": 2.0}),
    ],
)
def test_unusable_timeouts_are_configuration_errors(query: str, options: dict[str, Any]) -> None:
    with pytest.raises(FevexConfigurationError) as raised:
        PostgresRunStore(f"postgresql://user@localhost/db{query}", **options)
    assert raised.value.code == "INVALID_CONFIG"
