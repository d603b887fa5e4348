"""Wake-ups on PostgreSQL: a child's commit wakes its parent only when the commit itself is
accepted, worker processes split the due runs of one database and never take one twice,
and the claims read only the runs they could take, however many others pile up."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
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
# Far from the database's now: the clocks of this process and of the server never decide.
HOUR = 3600.0


def new_id(prefix: str) -> str:
    return f"{prefix}_{os.urandom(8).hex()}"


class Run:
    """A run of these tests, its live lease and its revision; each commit adds one event."""

    def __init__(self, run: AgentRun, lease: RunLease) -> None:
        self.id = run.id
        self.lease = lease
        self.revision = 1
        self.event_ids = [f"{run.id}-1"]

    def next_commit(self, **fields: Any) -> ExecutionCommit:
        self.revision += 1
        step = RunEvent(f"{self.id}-{self.revision}", self.id, self.revision, "x", NOW, {})
        self.event_ids.append(step.id)
        return ExecutionCommit(self.id, self.revision, NOW, self.lease, (step,), **fields)


async def start(
    store: PostgresRunStore,
    *,
    name: str = "a",
    parent: Run | None = None,
    seconds: float = 60.0,
) -> Run:
    run_id = new_id("run")
    run = AgentRun(
        run_id,
        new_id("ses"),
        name,
        "running",
        None,
        NOW,
        NOW,
        revision=1,
        parent_run_id=None if parent is None else parent.id,
    )
    started = RunEvent(f"{run_id}-1", run_id, 1, "run.started", NOW, {})
    create = ExecutionCreate(run, None, (started,), None, "worker", seconds)
    return Run(run, await store.create_execution(create))


async def pause(store: PostgresRunStore, run: Run, wake_at: float | None) -> None:
    await store.commit_execution(
        run.next_commit(changes={"status": "paused", "wake_at": wake_at}, release_lease=True)
    )


def ending(run: Run, status: str = "completed", **fields: Any) -> ExecutionCommit:
    return run.next_commit(
        changes={"status": status}, release_session=True, release_lease=True, **fields
    )


async def wake_at(store: PostgresRunStore, run: Run) -> float | None:
    stored = await store.get_run(run.id)
    assert stored is not None
    return stored.wake_at


async def database_now(url: str) -> float:
    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as db:
        cursor = await db.execute("SELECT extract(epoch FROM clock_timestamp())::float8")
        row = await cursor.fetchone()
    assert row is not None
    return float(row[0])


async def refused(code: str, commit: ExecutionCommit, store: PostgresRunStore) -> None:
    with pytest.raises(FevexRunError) as raised:
        await store.commit_execution(commit)
    assert raised.value.code == code, raised.value


async def test_a_refused_commit_of_a_child_never_wakes_its_parent(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store()
    parent = await start(store)
    await pause(store, parent, None)
    child = await start(store, parent=parent)

    # A stale revision: the child's ending is one revision ahead of what is stored.
    stale = ExecutionCommit(
        child.id, 3, NOW, child.lease, changes={"status": "completed"}, release_lease=True
    )
    await refused("RUN_CONFLICT", stale, store)
    # A lease of a generation the store never granted.
    fake = RunLease(child.lease.owner, child.lease.generation + 1, child.lease.expires_at)
    lost = ExecutionCommit(child.id, 2, NOW, fake, changes={"status": "failed"})
    await refused("LEASE_LOST", lost, store)
    # Events that do not continue the child's sequence, or reuse a stored event id.
    gap = RunEvent(new_id("evt"), child.id, 3, "x", NOW, {})
    await refused(
        "RUN_CONFLICT",
        ExecutionCommit(child.id, 2, NOW, child.lease, (gap,), changes={"status": "completed"}),
        store,
    )
    reused = RunEvent(child.event_ids[0], child.id, 2, "x", NOW, {})
    await refused(
        "RUN_CONFLICT",
        ExecutionCommit(child.id, 2, NOW, child.lease, (reused,), changes={"status": "completed"}),
        store,
    )
    assert await wake_at(store, parent) is None

    # A child whose lease lapsed lost it: its ending is refused, and the parent sleeps on.
    lapsed = await start(store, parent=parent, seconds=0.0)
    await refused("LEASE_LOST", ending(lapsed, "cancelled"), store)
    assert await wake_at(store, parent) is None
    assert await store.claim_due_run("waker", 60.0) is None

    # Taken over, the lapsed child ends under its new lease and wakes the parent then.
    lapsed.lease = await store.acquire_lease(lapsed.id, "rescuer", 60.0)
    lapsed.revision -= 1  # the refused commit wrote nothing
    before = await database_now(database_url)
    await store.commit_execution(ending(lapsed, "cancelled"))
    after = await database_now(database_url)
    woken = await wake_at(store, parent)
    assert woken is not None
    assert before <= woken <= after  # the database's clock, read in the commit
    claimed = await store.claim_due_run("waker", 60.0, names={"a"})
    assert claimed is not None
    assert claimed[0] == parent.id

    # The first child's own end finds the parent leased to the waker: still paused, so it
    # is woken again, and due once the waker's lease runs out or the waker lets go.
    await store.commit_execution(ending(child, "failed"))
    again = await wake_at(store, parent)
    assert again is not None
    assert again <= await database_now(database_url) < claimed[1].expires_at
    assert await store.claim_due_run("other", 60.0) is None
    stored_child = await store.get_run(child.id)
    assert stored_child is not None
    assert (stored_child.status, stored_child.wake_at) == ("failed", None)


async def test_a_commit_that_does_not_end_a_child_or_has_no_parent_wakes_nothing(
    open_store: OpenStore,
) -> None:
    store = open_store()
    parent = await start(store)
    await pause(store, parent, None)
    child = await start(store, parent=parent)
    await store.commit_execution(child.next_commit(changes={"output": "half way"}))
    await pause(store, child, time.time() + HOUR)
    assert await wake_at(store, parent) is None
    orphan = await start(store)
    await store.commit_execution(ending(orphan))
    assert await wake_at(store, parent) is None


CLAIMER = """
import asyncio, json, sys
from fevex_postgres import PostgresRunStore

async def main(url, owner, names):
    store = PostgresRunStore(url, pool_size=2)
    claimed = []
    try:
        await store.check_schema()
        print("ready", flush=True)
        sys.stdin.readline()  # every claimer starts at once
        while (claim := await store.claim_due_run(owner, 60.0, names=names)) is not None:
            run_id, lease = claim
            claimed.append([run_id, lease.owner, lease.generation, lease.expires_at])
    finally:
        await store.close()
    print(json.dumps(claimed))

asyncio.run(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3])))
"""


async def test_claimer_processes_take_each_due_run_exactly_once(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store()
    past = time.time() - HOUR
    due = []
    for n in range(40):
        run = await start(store, name="ab"[n % 2])
        await pause(store, run, past + n)
        due.append(run)
    # Not due: later, never, running, leased to a resumer, of another name.
    later = await start(store)
    await pause(store, later, time.time() + HOUR)
    never = await start(store)
    await pause(store, never, None)
    running = await start(store)
    await store.commit_execution(running.next_commit(changes={"wake_at": past}, release_lease=True))
    held = await start(store)
    await pause(store, held, past)
    await store.acquire_lease(held.id, "resumer", 60.0, status="paused")
    untouched = {run.id: await store.get_run(run.id) for run in (later, never, running, held)}

    # Half the claimers ask for the names of the due runs, half for any name.
    names = [["a", "b"], None] * 3
    claimers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CLAIMER,
            database_url,
            f"waker-{n}",
            json.dumps(names[n]),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for n in range(len(names))
    ]
    for claimer in claimers:
        assert claimer.stdout is not None
        ready = await asyncio.wait_for(claimer.stdout.readline(), 60)
        assert ready == b"ready\n", await claimer.communicate()
    outputs = await asyncio.gather(*(claimer.communicate(b"go\n") for claimer in claimers))
    assert [claimer.returncode for claimer in claimers] == [0] * len(claimers), outputs

    claims = [claim for out, _ in outputs for claim in json.loads(out.decode())]
    assert sorted(run_id for run_id, _, _, _ in claims) == sorted(run.id for run in due)
    for run_id, owner, generation, expires_at in claims:
        stored = await store.get_run(run_id)
        assert stored is not None
        # The next generation, still paused, due again when the claimer's lease runs out.
        assert (generation, stored.status, stored.wake_at) == (2, "paused", expires_at)
        with pytest.raises(FevexRunError) as raised:
            await store.acquire_lease(run_id, "late", 60.0, status="paused")
        assert raised.value.code == "RUN_CONFLICT", owner
    for run_id, before in untouched.items():
        assert await store.get_run(run_id) == before


async def test_claims_read_only_the_runs_they_could_take(
    open_store: OpenStore, database_url: str
) -> None:
    # Piles no claim of these names may read: orphans and due runs of a name no worker
    # has any more, and finished runs of the names claimed.
    with psycopg.connect(libpq_url(database_url), autocommit=True) as db:
        db.execute(
            "INSERT INTO fevex_sessions (id, revision, created_at, updated_at) "
            "VALUES ('ses_pile', 1, 't', 't')"
        )
        db.execute(
            """
            INSERT INTO fevex_runs (id, session_id, agent_name, name, kind, status, revision,
                created_at, updated_at, last_sequence, lease_owner, lease_generation,
                lease_expires_at, root_run_id, wake_at)
            SELECT 'run_pile_' || g, 'ses_pile', n, n, 'agent', s, 1, 't', 't', 0, 'gone', 1,
                   0, 'run_pile_' || g, CASE WHEN s = 'paused' THEN g END
            FROM generate_series(1, 30000) AS g,
                 LATERAL (SELECT CASE WHEN g % 3 = 0 THEN 'a' ELSE 'removed' END AS n,
                                 CASE g % 3 WHEN 0 THEN 'completed' WHEN 1 THEN 'running'
                                            ELSE 'paused' END AS s) AS pile
            """
        )
        db.execute("ANALYZE fevex_runs")

    def counters() -> tuple[int, int, int]:
        """Of the runs table: its sequential scans, its index scans and the index entries
        they read."""
        with psycopg.connect(libpq_url(database_url), autocommit=True) as db:
            row = db.execute(
                "SELECT t.seq_scan, sum(i.idx_scan), sum(i.idx_tup_read) "
                "FROM pg_stat_user_tables AS t JOIN pg_stat_user_indexes AS i USING (relid) "
                "WHERE t.relname = 'fevex_runs' GROUP BY t.seq_scan"
            ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1]), int(row[2])

    before = counters()
    # One connection, and more calls than psycopg and the server take to settle on a
    # prepared statement's generic plan.
    store = open_store(pool_size=1, max_overflow=0)
    calls = 0
    for _ in range(12):
        for names in ({"a"}, {"a", "b"}):
            assert await store.claim_expired_run("w", 60.0, names=names) is None
            assert await store.claim_due_run("w", 60.0, names=names) is None
            assert await store.expired_run_ids(names=names) == []
            calls += 3
    await store.close()
    # The server publishes a session's counters when the session ends, a moment after
    # its client left: every call scanned an index at least once.
    after = counters()
    for _ in range(100):
        if after[1] - before[1] >= calls:
            break
        await asyncio.sleep(0.1)
        after = counters()
    assert after[1] - before[1] >= calls, (before, after)
    assert after[0] == before[0]  # no sequential scan
    # Each call read empty ranges of an index: a filter over the 20,000 runs of the
    # removed name, or over the 10,000 finished ones, would read thousands of entries.
    assert after[2] - before[2] < calls, (before, after)
