"""The record stores of the in-memory store and of the SQLite and PostgreSQL plugins: the
contract, the plain JSON they keep, and the app's record store following its run store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from fevex.plugins import reset_plugins
from fevex.plugins.discovery import open_record_store
from fevex.runtime import InMemoryRecordStore
from fevex.testing import check_record_store

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def record_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    return str(request.getfixturevalue("postgres_url"))


async def test_the_store_passes_the_record_contract(record_url: str) -> None:
    reset_plugins()
    if record_url == "memory://":
        # One store whose close keeps its records: reopening is handing it out again.
        store = open_record_store(record_url)
        assert isinstance(store, InMemoryRecordStore)
        passed = await check_record_store(lambda: store)
    else:
        passed = await check_record_store(lambda: open_record_store(record_url))
    assert "refuses_arguments_no_store_can_keep" in passed
    assert "survives_reopening" in passed
    assert len(passed) == 9


async def test_sqlite_keeps_plain_json_in_its_one_table(tmp_path: Path) -> None:
    reset_plugins()
    path = tmp_path / "runs.db"
    store = open_record_store(f"sqlite:///{path}")
    assert await store.compare_and_swap("acme", "family-1", 0, {"active_id": "v1", "n": [1]})
    await store.close()
    with sqlite3.connect(path) as connection:
        rows = connection.execute(
            "SELECT namespace, key, revision, value FROM fevex_records"
        ).fetchall()
    assert rows == [("acme", "family-1", 1, '{"active_id":"v1","n":[1]}')]


async def test_postgres_keeps_plain_json_in_its_one_table(postgres_url: str) -> None:
    reset_plugins()
    store = open_record_store(postgres_url)
    assert await store.compare_and_swap("acme-json", "family-1", 0, {"active_id": "v1"})
    await store.close()
    conninfo = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    async with await psycopg.AsyncConnection.connect(conninfo) as connection:
        cursor = await connection.execute(
            "SELECT revision, value, value::text FROM fevex_records WHERE namespace = 'acme-json'"
        )
        rows = await cursor.fetchall()
    assert rows == [(1, {"active_id": "v1"}, '{"active_id":"v1"}')]
