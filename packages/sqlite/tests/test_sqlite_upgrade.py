"""Files of schema versions 1, 2 and 3 upgrade in place when a store opens them (or when
``fevex db upgrade`` runs), and their runs go on.

``fixtures/v1_runs.db`` was written by fevex and fevex-sqlite as of commit 4eb9cf4 (schema
version 1, checkpoint version 1) by ``make_v1_fixture.py``, whose docstring says how: a run
paused for the approval of a ``refund`` call, and a run orphaned while its keyed
``lookup`` call was in flight (its worker killed with SIGKILL, its lease expired). The
tests upgrade a copy and continue both runs with the same app on the current code.

A file of version 2 (or 3) is that fixture brought to version 2 (or 3) by the migrations up
to it alone, the statements the release of that schema version applied when it opened a
file of version 1. Version 3 is the last with unprefixed tables (``runs``, ``sessions``,
``events``); migration 4 renames them ``fevex_*``.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from types import ModuleType

import pytest

from fevex import RunCancelledError
from fevex.cli import main
from fevex.runtime import ExecutionCommit
from fevex_sqlite import SQLiteRunStore
from fevex_sqlite.schema import LATEST_VERSION, MIGRATIONS, prepare_database, schema_version

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "fixtures" / "v1_runs.db"


def support_app_module() -> ModuleType:
    """The app that wrote the fixture (``make_v1_fixture.py``), on the current code."""
    spec = importlib.util.spec_from_file_location("make_v1_fixture", HERE / "make_v1_fixture.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def v1_file(tmp_path: Path) -> Path:
    copy = tmp_path / "runs.db"
    shutil.copyfile(FIXTURE, copy)
    return copy


@pytest.fixture
def v2_file(v1_file: Path) -> Path:
    assert prepare_database(v1_file, busy_timeout=1.0, migrations=MIGRATIONS[:2]) == 2
    return v1_file


@pytest.fixture
def v3_file(v1_file: Path) -> Path:
    assert prepare_database(v1_file, busy_timeout=1.0, migrations=MIGRATIONS[:3]) == 3
    return v1_file


@pytest.fixture(params=["v1_file", "v3_file"])
def old_file(request: pytest.FixtureRequest) -> Path:
    """A file of version 1, and one of version 3 (the last with unprefixed tables)."""
    file: Path = request.getfixturevalue(request.param)
    return file


def raw_rows(database: Path, query: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(database)) as raw:
        return raw.execute(query).fetchall()


async def test_opening_a_version_1_file_upgrades_it_in_place(v1_file: Path) -> None:
    assert schema_version(v1_file) == 1
    # Checkpoints as the previous release wrote them (the current code writes version 2).
    checkpoints = "SELECT json_extract(checkpoint, '$.version') FROM runs"
    assert raw_rows(v1_file, checkpoints) == [(1,), (1,)]
    store = SQLiteRunStore(v1_file)
    try:
        assert store.schema_version == LATEST_VERSION == 6
        runs = await store.list_runs()
        assert sorted((run.status, run.input) for run in runs) == [
            ("paused", "Refund 30 to account 42."),
            ("running", "Look up account 42."),
        ]
        for run in runs:
            # What a run stored before these fields existed holds after the upgrade.
            assert (run.kind, run.name, run.agent_name) == ("agent", "support", "support")
            assert (run.version, run.parent_run_id, run.context) == (None, None, None)
            assert run.root_run_id == run.id
            assert run.cancel_requested is False
            assert run.wake_at is None
            assert await store.get_run(run.id) == run
        for status in ("paused", "running"):
            (listed,) = await store.list_runs(status=status, name="support", kind="agent")
            assert listed.status == status
            assert await store.list_runs(session_id=listed.session_id) == [listed]
        assert await store.list_runs(parent_run_id=runs[0].id) == []
    finally:
        await store.close()
    assert raw_rows(v1_file, "SELECT version FROM fevex_schema_migrations") == [
        (1,),
        (2,),
        (3,),
        (4,),
        (5,),
        (6,),
    ]
    assert raw_rows(
        v1_file, "SELECT count(*) FROM fevex_runs WHERE name = agent_name AND root_run_id = id"
    ) == [(2,)]
    assert raw_rows(v1_file, "PRAGMA integrity_check") == [("ok",)]


async def test_the_paused_run_resumes_and_the_orphaned_run_recovers(old_file: Path) -> None:
    calls: list[str] = []
    app = support_app_module().build_app(SQLiteRunStore(old_file), calls=calls)
    try:
        store = app.run_store
        (paused,) = await store.list_runs(status="paused")
        (orphaned,) = await store.list_runs(status="running")
        approval = paused.pause["approvals"][0]
        assert (approval["tool_name"], approval["input"]) == (
            "refund",
            {"account": 42, "amount": 30},
        )
        resumed = await app.resume_run(
            paused.id,
            {
                "type": "approval",
                "approval_id": approval["id"],
                "decision": "approve",
                "actor": {"id": "reviewer-1"},
            },
        )
        assert resumed.output == f"Done: {json.dumps({'refunded': 30})}"

        recovered = await app.recover_run(orphaned.id, actor={"id": "operator-1"})
        assert recovered.output == f"Done: {json.dumps({'account': 42, 'status': 'active'})}"
        # The in-flight keyed call is retried with the key the killed worker used.
        assert calls == [f"fevex:{orphaned.id}:call-lookup"]

        for run_id, opening in ((paused.id, "run.resumed"), (orphaned.id, "run.recovered")):
            types = [event.type for event in await app.list_events(run_id)]
            assert types.count(opening) == 1
            assert types[-1] == "run.completed"
            assert (await app.get_run(run_id)).status == "completed"
        assert {run.id for run in await store.list_runs(status="completed")} == {
            paused.id,
            orphaned.id,
        }
    finally:
        await app.close()


async def test_a_run_stored_by_version_1_can_be_asked_to_cancel(v1_file: Path) -> None:
    calls: list[str] = []
    app = support_app_module().build_app(SQLiteRunStore(v1_file), calls=calls)
    try:
        (orphaned,) = await app.run_store.list_runs(status="running")
        requested = await app.run_store.request_cancel(orphaned.id)
        assert (requested.status, requested.cancel_requested) == ("running", True)
        with pytest.raises(RunCancelledError):
            await app.recover_run(orphaned.id, actor={"id": "operator-1"})
        run = await app.get_run(orphaned.id)
        assert (run.status, run.cancel_requested) == ("cancelled", True)
        assert calls == []  # cancelled, not continued: the in-flight call was not retried
    finally:
        await app.close()


async def test_a_version_2_file_upgrades_and_its_paused_run_can_be_woken(v2_file: Path) -> None:
    assert schema_version(v2_file) == 2
    calls: list[str] = []
    app = support_app_module().build_app(SQLiteRunStore(v2_file), calls=calls)
    try:
        store = app.run_store
        assert isinstance(store, SQLiteRunStore)
        assert store.schema_version == 6
        (paused,) = await store.list_runs(status="paused")
        (orphaned,) = await store.list_runs(status="running")
        assert (paused.wake_at, orphaned.wake_at) == (None, None)
        # Nothing stored before wake-ups existed is due, and the orphan is still claimable
        # by its name.
        assert await store.claim_due_run("waker", 30.0) is None
        assert await store.expired_run_ids(names={"support"}) == [orphaned.id]

        lease = await store.acquire_lease(paused.id, "timer", 30.0, status="paused")
        wake_at = time.time()
        await store.commit_execution(
            ExecutionCommit(
                paused.id,
                paused.revision + 1,
                paused.updated_at,
                lease,
                changes={"wake_at": wake_at},
                release_lease=True,
            )
        )
        assert (await app.get_run(paused.id)).wake_at == wake_at
        claimed = await store.claim_due_run("waker", 30.0, names={"support"})
        assert claimed is not None
        assert claimed[0] == paused.id
        assert (claimed[1].owner, claimed[1].generation) == ("waker", lease.generation + 1)
        woken = await app.get_run(paused.id)
        assert (woken.status, woken.wake_at) == ("paused", claimed[1].expires_at)
        assert await store.claim_due_run("waker", 30.0) is None

        # The waker finds nothing to do yet (the approval is still pending) and lets go
        # without a timer; the run then resumes as any paused run of the previous release.
        await store.commit_execution(
            ExecutionCommit(
                paused.id,
                woken.revision + 1,
                woken.updated_at,
                claimed[1],
                changes={"status": "paused", "wake_at": None},
                release_lease=True,
            )
        )
        approval = woken.pause["approvals"][0]
        resumed = await app.resume_run(
            paused.id,
            {
                "type": "approval",
                "approval_id": approval["id"],
                "decision": "approve",
                "actor": {"id": "reviewer-1"},
            },
        )
        assert resumed.output == f"Done: {json.dumps({'refunded': 30})}"
        assert (await app.get_run(paused.id)).wake_at is None
    finally:
        await app.close()
    assert raw_rows(v2_file, "SELECT version FROM fevex_schema_migrations") == [
        (1,),
        (2,),
        (3,),
        (4,),
        (5,),
        (6,),
    ]
    assert raw_rows(v2_file, "PRAGMA integrity_check") == [("ok",)]


def user_tables(database: Path) -> set[str]:
    found = raw_rows(database, "SELECT name FROM sqlite_master WHERE type IN ('table', 'index')")
    return {str(name) for (name,) in found if not str(name).startswith("sqlite_")}


async def test_fevex_db_upgrade_renames_a_version_3_file_in_place(
    v3_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{v3_file}"
    before = raw_rows(v3_file, "SELECT id, status, revision, checkpoint FROM runs ORDER BY id")
    events = raw_rows(v3_file, "SELECT id, run_id, sequence, payload FROM events ORDER BY id")
    sessions = raw_rows(v3_file, "SELECT id, history, revision FROM sessions ORDER BY id")
    assert len(before) == 2
    assert events
    assert main(["db", "status", "--store", url]) == 1
    assert "schema version 3, this code needs 6 (needs: fevex db upgrade)" in (
        capsys.readouterr().out
    )

    assert main(["db", "upgrade", "--store", url]) == 0
    assert "from schema version 3 to 6 (applied 4, 5, 6)" in capsys.readouterr().out
    assert {name for name in user_tables(v3_file) if not name.startswith("fevex_")} == set()
    assert raw_rows(v3_file, "SELECT count(*) FROM fevex_records") == [(0,)]
    after = "SELECT id, status, revision, checkpoint FROM fevex_runs ORDER BY id"
    assert raw_rows(v3_file, after) == before
    assert (
        raw_rows(v3_file, "SELECT id, run_id, sequence, payload FROM fevex_events ORDER BY id")
        == events
    )
    # Each history moved whole into its session's first turn row (none for an empty one).
    moved = (
        "SELECT id, COALESCE((SELECT messages FROM fevex_session_turns AS turns "
        "WHERE turns.session_id = sessions.id AND position = 0), '[]'), revision "
        "FROM fevex_sessions AS sessions ORDER BY id"
    )
    assert raw_rows(v3_file, moved) == sessions
    # The foreign keys follow the renamed tables.
    assert raw_rows(v3_file, "PRAGMA foreign_key_check") == []
    references = {
        (table, str(row[2]))
        for table in ("fevex_runs", "fevex_sessions", "fevex_events")
        for row in raw_rows(v3_file, f"PRAGMA foreign_key_list({table})")
    }
    assert references == {
        ("fevex_runs", "fevex_sessions"),
        ("fevex_sessions", "fevex_runs"),
        ("fevex_events", "fevex_runs"),
    }
    assert raw_rows(v3_file, "PRAGMA integrity_check") == [("ok",)]

    assert main(["db", "upgrade", "--store", url]) == 0
    assert "is up to date (schema version 6)" in capsys.readouterr().out
    assert main(["db", "status", "--store", url]) == 0
