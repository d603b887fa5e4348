"""Two OS processes sharing one SQLite file: no corruption, no lost update, no double claim."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCommit, ExecutionCreate
from fevex_sqlite import SQLiteRunStore
from fevex_sqlite.schema import LATEST_VERSION

pytestmark = pytest.mark.anyio

WORKER = Path(__file__).with_name("sqlite_worker.py")
V1_FILE = Path(__file__).with_name("fixtures") / "v1_runs.db"
NOW = "2030-01-01T00:00:00Z"


def run_workers(database: Path, mode: str, arguments: list[str]) -> list[dict[str, Any]]:
    """Start one worker per argument, release them together, return what each printed."""
    start = database.parent / "start"
    names = [f"w{index}" for index in range(len(arguments))]
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), mode, str(database), str(start), name, argument],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, argument in zip(names, arguments, strict=True)
    ]
    try:
        deadline = time.monotonic() + 60
        while not all(Path(f"{start}.{name}.ready").exists() for name in names):
            assert all(worker.poll() is None for worker in workers), "a worker died while opening"
            assert time.monotonic() < deadline, "the workers did not open the store in time"
            time.sleep(0.01)
        start.touch()
        results = []
        for worker in workers:
            stdout, stderr = worker.communicate(timeout=120)
            assert worker.returncode == 0, stderr
            results.append(json.loads(stdout.strip().splitlines()[-1]))
        return results
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.communicate()


def integrity(database: Path) -> str:
    with closing(sqlite3.connect(database)) as raw:
        return str(raw.execute("PRAGMA integrity_check").fetchone()[0])


async def test_two_processes_create_and_commit_runs_at_once(database: Path) -> None:
    results = run_workers(database, "create", ["25", "25"])
    created = [run_id for result in results for run_id in result["created"]]
    assert len(created) == len(set(created)) == 50
    assert integrity(database) == "ok"
    store = SQLiteRunStore(database)
    try:
        for run_id in created:
            run = await store.get_run(run_id)
            assert run is not None
            assert (run.status, run.revision) == ("completed", 5)
            assert [e.sequence for e in await store.list_events(run_id)] == [1, 2, 3, 4, 5]
            session = await store.get_session(run.session_id)
            assert session is not None
            assert (session.active_run_id, len(session.history)) == (None, 1)
    finally:
        await store.close()


async def test_compare_and_set_loses_no_update_across_processes(database: Path) -> None:
    store = SQLiteRunStore(database)
    try:
        run = AgentRun("run-shared", "ses-shared", "a", "running", None, NOW, NOW, revision=1)
        started = RunEvent("run-shared-1", run.id, 1, "run.started", NOW, {})
        lease = await store.create_execution(
            ExecutionCreate(run, None, (started,), None, "shared", 600.0)
        )
        argument = f"{run.id}:{lease.owner}:{lease.generation}:40"
        results = run_workers(database, "bump", [argument, argument])
        assert [result["landed"] for result in results] == [40, 40]
        stored = await store.get_run(run.id)
        assert stored is not None
        # Every landed commit is there exactly once: 1 + 40 + 40 revisions and events.
        assert stored.revision == 81
        events = await store.list_events(run.id)
        assert [e.sequence for e in events] == list(range(1, 82))
        writers = [e.payload.get("by") for e in events[1:]]
        assert (writers.count("w0"), writers.count("w1")) == (40, 40)
        # The lease survived the contention: its holder can still write.
        await store.commit_execution(
            ExecutionCommit(run.id, 82, NOW, lease, (RunEvent("end", run.id, 82, "x", NOW, {}),))
        )
    finally:
        await store.close()
    assert integrity(database) == "ok"


async def test_each_expired_run_is_claimed_by_one_process(database: Path) -> None:
    store = SQLiteRunStore(database)
    try:
        expired = []
        for i in range(40):
            run = AgentRun(f"run-{i}", f"ses-{i}", "a", "running", None, NOW, NOW, revision=1)
            started = RunEvent(f"run-{i}-1", run.id, 1, "run.started", NOW, {})
            # A lease of no time at all has expired by the time anyone claims it.
            await store.create_execution(ExecutionCreate(run, None, (started,), None, "gone", 0.0))
            expired.append(run.id)
        live = AgentRun("run-live", "ses-live", "a", "running", None, NOW, NOW, revision=1)
        await store.create_execution(
            ExecutionCreate(live, None, (RunEvent("live-1", live.id, 1, "x", NOW, {}),), None)
        )
        results = run_workers(database, "claim", ["", "", ""])
        claims = [run_id for result in results for run_id in result["claimed"]]
        assert sorted(claims) == sorted(expired)  # every one, and each once
        assert await store.claim_expired_run("late", 60.0) is None
    finally:
        await store.close()
    claimed_by = {
        run_id: f"w{index}" for index, result in enumerate(results) for run_id in result["claimed"]
    }
    with closing(sqlite3.connect(database)) as raw:
        leases = raw.execute("SELECT id, lease_owner, lease_generation FROM fevex_runs").fetchall()
    assert {run_id: (owner, generation) for run_id, owner, generation in leases} == {
        **{run_id: (claimed_by[run_id], 2) for run_id in expired},
        "run-live": ("local", 1),
    }


async def test_each_due_run_is_claimed_by_one_process(database: Path) -> None:
    store = SQLiteRunStore(database)
    try:
        due = []
        for i in range(40):
            run = AgentRun(f"run-{i}", f"ses-{i}", "a", "running", None, NOW, NOW, revision=1)
            started = RunEvent(f"run-{i}-1", run.id, 1, "run.started", NOW, {})
            lease = await store.create_execution(ExecutionCreate(run, None, (started,)))
            # Due since a second ago by the clock every process shares, earliest first.
            wake_at = time.time() - 1.0 - i / 1000
            await store.commit_execution(
                ExecutionCommit(
                    run.id, 2, NOW, lease, changes={"status": "paused", "wake_at": wake_at},
                    release_lease=True,
                )
            )  # fmt: skip
            due.append(run.id)
        results = run_workers(database, "wake", ["", "", ""])
        claims = [run_id for result in results for run_id in result["claimed"]]
        assert sorted(claims) == sorted(due)  # every one, and each once
        assert await store.claim_due_run("late", 60.0) is None
        for run_id in due:
            run = await store.get_run(run_id)
            assert run is not None
            # Due again only once its claimer's lease (60 s) has run out.
            assert run.status == "paused"
            assert run.wake_at is not None
            assert run.wake_at > time.time() + 50
    finally:
        await store.close()
    assert integrity(database) == "ok"


async def test_two_processes_opening_a_new_file_migrate_it_once(database: Path) -> None:
    run_workers(database, "claim", ["", "", ""])
    with closing(sqlite3.connect(database)) as raw:
        versions = raw.execute("SELECT version FROM fevex_schema_migrations").fetchall()
    assert versions == [(version,) for version in range(1, LATEST_VERSION + 1)]


async def test_two_processes_opening_an_old_file_migrate_it_once(database: Path) -> None:
    database.parent.mkdir(parents=True)
    shutil.copyfile(V1_FILE, database)
    run_workers(database, "claim", ["", "", ""])
    with closing(sqlite3.connect(database)) as raw:
        versions = raw.execute("SELECT version FROM fevex_schema_migrations").fetchall()
    assert versions == [(version,) for version in range(1, LATEST_VERSION + 1)]
    assert integrity(database) == "ok"
