"""Explicit migrations: a store never migrates, refuses an outdated schema with the command
that fixes it, and ``fevex db upgrade`` is idempotent from the CLI and from processes."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from fevex import FevexConfigurationError
from fevex.cli import main
from fevex.plugins import reset_plugins
from fevex_postgres import LATEST_VERSION, PostgresRunStore, migrations
from fevex_postgres.testing import libpq_url

# The advisory lock key upgrades take turns on (migrations._UPGRADE_LOCK_KEY).
UPGRADE_LOCK_KEY = 0x6665766578_0001


@pytest.fixture(autouse=True)
def fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("FEVEX_PLUGINS", "FEVEX_DISABLE_PLUGIN_AUTOLOAD", "FEVEX_RUN_STORE"):
        monkeypatch.delenv(name, raising=False)
    reset_plugins()
    yield
    reset_plugins()


def tables(url: str) -> set[str]:
    with psycopg.connect(libpq_url(url)) as connection:
        rows = connection.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'fevex%'"
        ).fetchall()
    return {row[0] for row in rows}


def fevex_command() -> list[str]:
    script = Path(sys.executable).with_name("fevex")
    if script.exists():
        return [str(script)]
    found = shutil.which("fevex")
    return [found] if found else [sys.executable, "-m", "fevex.cli"]


@pytest.mark.anyio
async def test_a_store_on_an_unmigrated_database_names_the_upgrade_command(
    empty_database_url: str,
) -> None:
    url = make_url(empty_database_url).set(password="hunter2").render_as_string(hide_password=False)
    store = PostgresRunStore(url)
    try:
        for operation in (store.get_run("run_x"), store.list_events("run_x"), store.check_schema()):
            with pytest.raises(FevexConfigurationError) as raised:
                await operation
            assert raised.value.code == "SCHEMA_OUTDATED"
            assert f"fevex db upgrade --store {empty_database_url}" in raised.value.message
            assert "hunter2" not in str(raised.value)
    finally:
        await store.close()
    assert tables(empty_database_url) == set(), "opening a store must not migrate"


@pytest.mark.anyio
async def test_a_schema_newer_than_the_code_is_refused(database_url: str) -> None:
    with psycopg.connect(libpq_url(database_url)) as connection:
        connection.execute(
            "INSERT INTO fevex_schema_version (version, description) VALUES (%s, 'future')",
            (LATEST_VERSION + 1,),
        )
    store = PostgresRunStore(database_url)
    try:
        with pytest.raises(FevexConfigurationError) as raised:
            await store.get_run("run_x")
        assert raised.value.code == "SCHEMA_TOO_NEW"
        with pytest.raises(FevexConfigurationError):
            await store.upgrade_schema()
    finally:
        await store.close()


def test_fevex_db_upgrade_migrates_once(
    empty_database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "status", "--store", empty_database_url]) == 1
    assert "schema version 0" in capsys.readouterr().out

    assert main(["db", "upgrade", "--store", empty_database_url]) == 0
    assert f"from schema version 0 to {LATEST_VERSION}" in capsys.readouterr().out
    assert tables(empty_database_url) == {
        "fevex_schema_version",
        "fevex_sessions",
        "fevex_runs",
        "fevex_events",
        "fevex_records",
    }

    assert main(["db", "upgrade", "--store", empty_database_url]) == 0
    assert "is up to date" in capsys.readouterr().out
    assert main(["db", "status", "--store", empty_database_url]) == 0
    with psycopg.connect(libpq_url(empty_database_url)) as connection:
        versions = connection.execute("SELECT version FROM fevex_schema_version").fetchall()
    assert versions == [(version,) for version in range(1, LATEST_VERSION + 1)]


def test_fevex_db_upgrade_reads_fevex_run_store(
    empty_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FEVEX_RUN_STORE", empty_database_url)
    assert main(["db", "upgrade"]) == 0
    assert "fevex_runs" in tables(empty_database_url)


def test_the_fevex_command_upgrades_from_concurrent_processes(empty_database_url: str) -> None:
    command = [*fevex_command(), "db", "upgrade", "--store", empty_database_url]
    processes = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert [process.returncode for process in processes] == [0] * 4, outputs
    upgraded = [out for out, _ in outputs if "Upgraded" in out]
    assert len(upgraded) == 1, outputs
    again = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stderr
    assert "is up to date" in again.stdout


@pytest.mark.anyio
async def test_after_the_upgrade_a_store_works(empty_database_url: str) -> None:
    assert await asyncio.to_thread(main, ["db", "upgrade", "--store", empty_database_url]) == 0
    store = PostgresRunStore(empty_database_url)
    try:
        await store.check_schema()
        assert await store.schema_version() == LATEST_VERSION
        assert await store.get_run("run_x") is None
    finally:
        await store.close()


@pytest.mark.anyio
async def test_an_upgrade_is_not_bound_by_the_workers_timeouts(
    empty_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A later migration that outlasts statement_timeout, run while another upgrader holds
    # the upgrade lock for longer than lock_timeout: both timeouts are the workers', and an
    # upgrade (an operator's step) waits and runs to its end.
    slow = migrations.Migration(LATEST_VERSION + 1, "slow", ("SELECT pg_sleep(0.6)",))
    monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, slow))
    monkeypatch.setattr(migrations, "LATEST_VERSION", slow.version)
    store = PostgresRunStore(empty_database_url, statement_timeout=0.4, lock_timeout=0.2)
    try:
        async with await psycopg.AsyncConnection.connect(libpq_url(empty_database_url)) as other:
            await other.execute("SELECT pg_advisory_xact_lock(%s)", (UPGRADE_LOCK_KEY,))
            upgrade = asyncio.create_task(store.upgrade_schema())
            await asyncio.sleep(0.5)
            assert not upgrade.done()
            await other.rollback()
        done = await asyncio.wait_for(upgrade, 30)
        assert done.version == slow.version
    finally:
        await store.close()
