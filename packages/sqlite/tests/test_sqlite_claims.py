"""Claims on SQLite: due runs by the store's clock, parents woken in their child's commit,
and every claim read from a partial index rather than from every run of a status or name."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from fevex import FevexRunError
from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCommit, ExecutionCreate, RunLease
from fevex_sqlite import SQLiteRunStore

pytestmark = pytest.mark.anyio

NOW = "2030-01-01T00:00:00.000000Z"


class Run:
    """A run of these tests and its live lease; each commit adds one event."""

    def __init__(self, run: AgentRun, lease: RunLease) -> None:
        self.id = run.id
        self.lease = lease
        self.revision = 1

    def next_commit(self, **fields: Any) -> ExecutionCommit:
        self.revision += 1
        step = RunEvent(f"{self.id}-{self.revision}", self.id, self.revision, "x", NOW, {})
        return ExecutionCommit(self.id, self.revision, NOW, self.lease, (step,), **fields)


async def start(
    store: SQLiteRunStore, run_id: str, *, name: str = "a", parent: Run | None = None
) -> Run:
    run = AgentRun(
        run_id,
        f"ses-{run_id}",
        name,
        "running",
        None,
        NOW,
        NOW,
        revision=1,
        parent_run_id=None if parent is None else parent.id,
    )
    started = RunEvent(f"{run_id}-1", run_id, 1, "run.started", NOW, {})
    lease = await store.create_execution(ExecutionCreate(run, None, (started,), None, "w", 30.0))
    return Run(run, lease)


async def pause(store: SQLiteRunStore, run: Run, wake_at: float | None) -> None:
    await store.commit_execution(
        run.next_commit(changes={"status": "paused", "wake_at": wake_at}, release_lease=True)
    )


async def end(store: SQLiteRunStore, run: Run, status: str = "completed") -> None:
    await store.commit_execution(
        run.next_commit(changes={"status": status}, release_session=True, release_lease=True)
    )


async def wake_at(store: SQLiteRunStore, run: Run) -> float | None:
    stored = await store.get_run(run.id)
    assert stored is not None
    return stored.wake_at


async def test_a_run_is_due_at_its_wake_at_by_the_stores_clock(
    store: SQLiteRunStore, clock: Any, database: Path
) -> None:
    later = await start(store, "run-later")
    sooner = await start(store, "run-sooner")
    await pause(store, later, clock.now + 10)
    await pause(store, sooner, clock.now + 5)
    assert await wake_at(store, sooner) == clock.now + 5
    assert await store.claim_due_run("waker", 30.0) is None
    clock.advance(5.0)  # wake_at == now: due
    claimed = await store.claim_due_run("waker", 30.0)
    assert claimed == ("run-sooner", RunLease("waker", 2, clock.now + 30.0))
    # Due again when the claimer's lease runs out, unless it commits first.
    assert await wake_at(store, sooner) == clock.now + 30.0
    assert await store.claim_due_run("waker", 30.0) is None
    clock.advance(5.0)
    assert await store.claim_due_run("waker", 30.0, names={"b"}) is None
    assert await store.claim_due_run("waker", 30.0, names={"a", "b"}) == (
        "run-later",
        RunLease("waker", 2, clock.now + 30.0),
    )
    clock.advance(25.0)  # the first claimer's lease expires, and with it the wake-up
    assert await store.claim_due_run("rescuer", 30.0) == (
        "run-sooner",
        RunLease("rescuer", 3, clock.now + 30.0),
    )
    with closing(sqlite3.connect(database)) as raw:
        stored = raw.execute("SELECT id, status, wake_at FROM fevex_runs ORDER BY id").fetchall()
    assert stored == [
        ("run-later", "paused", clock.now + 5.0),
        ("run-sooner", "paused", clock.now + 30.0),
    ]


async def test_a_child_wakes_its_parent_in_its_own_commit(
    store: SQLiteRunStore, clock: Any
) -> None:
    parent = await start(store, "run-parent")
    await pause(store, parent, None)
    child = await start(store, "run-child", parent=parent)
    clock.advance(7.0)
    # A commit refused for its lease writes nothing, the parent's wake-up included.
    stale = RunLease("w", child.lease.generation + 1, 0.0)
    ending = ExecutionCommit(child.id, 2, NOW, stale, changes={"status": "completed"})
    with pytest.raises(FevexRunError) as raised:
        await store.commit_execution(ending)
    assert raised.value.code == "LEASE_LOST"
    assert await wake_at(store, parent) is None
    await end(store, child, "cancelled")
    assert await wake_at(store, parent) == clock.now  # the store's clock, not the wall's
    claimed = await store.claim_due_run("waker", 30.0, names={"a"})
    assert claimed is not None
    assert claimed[0] == parent.id


async def test_claims_read_one_range_of_a_partial_index(
    store: SQLiteRunStore, database: Path
) -> None:
    sent: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        if statement.startswith("SELECT id"):
            sent.append((statement, parameters))

    due = ("fevex_runs_paused_by_wake",)
    expired = ("fevex_runs_running_by_lease", "fevex_runs_running_by_name")
    claims: list[tuple[Callable[[], Awaitable[object]], tuple[str, ...]]] = [
        (lambda: store.claim_due_run("w", 30.0), due),
        (lambda: store.claim_due_run("w", 30.0, names={"a"}), due),
        (lambda: store.claim_due_run("w", 30.0, names={"a", "b"}), due),
        (lambda: store.claim_expired_run("w", 30.0), expired),
        (lambda: store.claim_expired_run("w", 30.0, names={"a"}), expired),
        (lambda: store.claim_expired_run("w", 30.0, names={"a", "b"}), expired),
        (lambda: store.expired_run_ids(), expired),
        (lambda: store.expired_run_ids(names={"a"}), expired),
        (lambda: store.expired_run_ids(names={"a", "b"}), expired),
    ]
    event.listen(Engine, "before_cursor_execute", record)
    try:
        for claim, indexes in claims:
            sent.clear()
            await claim()
            ((statement, parameters),) = sent
            with closing(sqlite3.connect(database)) as raw:
                plan = raw.execute(f"EXPLAIN QUERY PLAN {statement}", parameters).fetchall()
            details = " / ".join(str(row[3]) for row in plan)
            # Never fevex_runs_by_status or fevex_runs_by_name: every run of a status, or of a name.
            assert any(f"INDEX {index} (status=?" in details for index in indexes), details
            assert "<?)" in details, details  # a range: due or expired rows only
            if "ORDER BY rowid" not in statement:
                assert "TEMP B-TREE" not in details, details  # read in order, not sorted
    finally:
        event.remove(Engine, "before_cursor_execute", record)
