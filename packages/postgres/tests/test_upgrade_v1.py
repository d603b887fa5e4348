"""A database of schema version 1, or of version 2, upgrades in place with ``fevex db
upgrade``, and its runs go on.

``fixtures/v1_runs.sql`` is a plain-SQL ``pg_dump`` of a database written by fevex and
fevex-postgres as of commit 4eb9cf4 (schema version 1, checkpoint version 1), made by
``make_v1_fixture.py``, whose docstring says how: a run paused for the approval of a
``refund`` call, and a run orphaned while its keyed ``lookup`` call was in flight (its
worker killed with SIGKILL, its lease expired). The tests restore it into an empty
database, upgrade it and continue both runs with the same app on the current code. A
database of version 2 is that dump upgraded by the migrations of the release that brought
version 2 (1 and 2 only).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import psycopg
import pytest

from fevex import FevexConfigurationError, RunCancelledError
from fevex.cli import main
from fevex.plugins import reset_plugins
from fevex.runtime import ExecutionCommit
from fevex_postgres import LATEST_VERSION, PostgresRunStore, migrations
from fevex_postgres.testing import libpq_url

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "fixtures" / "v1_runs.sql"


@pytest.fixture(autouse=True)
def fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("FEVEX_PLUGINS", "FEVEX_DISABLE_PLUGIN_AUTOLOAD", "FEVEX_RUN_STORE"):
        monkeypatch.delenv(name, raising=False)
    reset_plugins()
    yield
    reset_plugins()


def support_app_module() -> ModuleType:
    """The app that wrote the fixture (``make_v1_fixture.py``), on the current code."""
    spec = importlib.util.spec_from_file_location("make_v1_fixture", HERE / "make_v1_fixture.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def v1_database_url(empty_database_url: str) -> str:
    """An empty database holding what the version 1 dump restores."""
    # psql meta-commands (\restrict, \unrestrict) are the only lines that are not SQL.
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    script = "\n".join(line for line in lines if not line.startswith("\\"))
    with psycopg.connect(libpq_url(empty_database_url), autocommit=True) as connection:
        connection.execute(script.encode())
    return empty_database_url


@pytest.fixture
def v2_database_url(v1_database_url: str) -> str:
    """The version 1 dump upgraded to version 2, as the release before wake-ups did."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:2])
        patch.setattr(migrations, "LATEST_VERSION", 2)
        assert main(["db", "upgrade", "--store", v1_database_url]) == 0
    return v1_database_url


async def upgrade(url: str) -> None:
    assert await asyncio.to_thread(main, ["db", "upgrade", "--store", url]) == 0


async def test_fevex_db_upgrade_migrates_a_version_1_database(
    v1_database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with psycopg.connect(libpq_url(v1_database_url)) as connection:
        # Checkpoints as the previous release wrote them (the current code writes version 2).
        checkpoints = connection.execute("SELECT checkpoint->'version' FROM fevex_runs")
        assert checkpoints.fetchall() == [(1,), (1,)]
    store = PostgresRunStore(v1_database_url)
    try:
        assert await store.schema_version() == 1
        # Workers refuse the old schema until an operator upgrades it.
        with pytest.raises(FevexConfigurationError) as raised:
            await store.list_runs()
        assert raised.value.code == "SCHEMA_OUTDATED"
        await upgrade(v1_database_url)
        assert f"from schema version 1 to {LATEST_VERSION}" in capsys.readouterr().out
        assert LATEST_VERSION == 5
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
    with psycopg.connect(libpq_url(v1_database_url)) as connection:
        versions = connection.execute("SELECT version FROM fevex_schema_version ORDER BY 1")
        assert versions.fetchall() == [(1,), (2,), (3,), (4,), (5,)]
        columns = connection.execute(
            "SELECT column_name, is_nullable FROM information_schema.columns "
            "WHERE table_name = 'fevex_runs' AND column_name IN "
            "('name', 'version', 'parent_run_id', 'root_run_id', 'context', 'cancel_requested', "
            "'wake_at', 'followed_until') "
            "ORDER BY 1"
        ).fetchall()
        assert columns == [
            ("cancel_requested", "NO"),
            ("context", "YES"),
            ("followed_until", "YES"),
            ("name", "NO"),
            ("parent_run_id", "YES"),
            ("root_run_id", "NO"),
            ("version", "YES"),
            ("wake_at", "YES"),
        ]
    await upgrade(v1_database_url)
    assert "is up to date" in capsys.readouterr().out


async def test_the_paused_run_resumes_and_the_orphaned_run_recovers(v1_database_url: str) -> None:
    await upgrade(v1_database_url)
    calls: list[str] = []
    app = support_app_module().build_app(PostgresRunStore(v1_database_url), calls=calls)
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


async def test_a_run_stored_by_version_1_can_be_asked_to_cancel(v1_database_url: str) -> None:
    await upgrade(v1_database_url)
    calls: list[str] = []
    app = support_app_module().build_app(PostgresRunStore(v1_database_url), calls=calls)
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


async def test_a_version_2_database_upgrades_and_its_paused_run_can_be_woken(
    v2_database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = PostgresRunStore(v2_database_url)
    try:
        assert await store.schema_version() == 2
        with pytest.raises(FevexConfigurationError) as raised:
            await store.list_runs()
        assert raised.value.code == "SCHEMA_OUTDATED"
    finally:
        await store.close()
    capsys.readouterr()
    await upgrade(v2_database_url)
    assert "from schema version 2 to 5" in capsys.readouterr().out

    calls: list[str] = []
    app = support_app_module().build_app(PostgresRunStore(v2_database_url), calls=calls)
    try:
        store = app.run_store
        (paused,) = await store.list_runs(status="paused")
        (orphaned,) = await store.list_runs(status="running")
        assert (paused.wake_at, orphaned.wake_at) == (None, None)
        # Nothing stored before wake-ups existed is due, and the orphan is claimable by its
        # name (migration 2 gave it its agent's).
        assert await store.claim_due_run("waker", 30.0) is None
        assert await store.expired_run_ids(names={"support"}) == [orphaned.id]
        assert await store.expired_run_ids(names={"billing"}) == []

        # A timer set on the paused run: due at once by the database's clock.
        lease = await store.acquire_lease(paused.id, "timer", 30.0, status="paused")
        wake_at = time.time() - 60.0
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
        assert await store.claim_due_run("waker", 30.0, names={"billing"}) is None
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
    with psycopg.connect(libpq_url(v2_database_url)) as connection:
        versions = connection.execute("SELECT version FROM fevex_schema_version ORDER BY 1")
        assert versions.fetchall() == [(1,), (2,), (3,), (4,), (5,)]
