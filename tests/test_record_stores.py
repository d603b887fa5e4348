"""The record stores of the in-memory store and of the SQLite and PostgreSQL plugins: the
contract, the plain JSON they keep, and the app's record store following its run store."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from fevex import create_fevex
from fevex.errors import FevexConfigurationError
from fevex.plugins import reset_plugins
from fevex.plugins.discovery import open_record_store
from fevex.runtime import InMemoryRecordStore, InMemoryRunStore
from fevex.testing import check_record_store
from fevex_postgres import PostgresRunStore
from fevex_sqlite import SQLiteRunStore

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


class ForwardingRunStore:
    """A run store of the app's own: every method is an in-memory store's, but it is not
    one, and it names no record store."""

    def __init__(self) -> None:
        self._store = InMemoryRunStore()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_the_app_keeps_records_where_its_run_store_url_keeps_runs(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    reset_plugins()
    namespace = f"app-{uuid.uuid4().hex[:8]}"
    given = create_fevex(run_store=store_url)
    monkeypatch.setenv("FEVEX_RUN_STORE", store_url)
    from_environment = create_fevex()
    try:
        for app, key in ((given, "given"), (from_environment, "environment")):
            assert not isinstance(app.record_store, InMemoryRecordStore)
            assert await app.record_store.compare_and_swap(namespace, key, 0, {"by": key})
        # Another handle on the same database sees both.
        other = open_record_store(store_url)
        for key in ("given", "environment"):
            record = await other.read(namespace, key)
            assert record is not None
            assert record.value == {"by": key}
        await other.close()
    finally:
        await given.close()
        await from_environment.close()


async def test_a_run_store_object_gives_its_own_record_store(store_url: str) -> None:
    reset_plugins()
    namespace = f"object-{uuid.uuid4().hex[:8]}"
    store = SQLiteRunStore(store_url) if store_url.startswith("sqlite") else None
    run_store = store or PostgresRunStore(store_url)
    async with create_fevex(run_store=run_store) as app:
        assert not isinstance(app.record_store, InMemoryRecordStore)
        assert await app.record_store.compare_and_swap(namespace, "k", 0, {"n": 1})
    reader = open_record_store(store_url)
    record = await reader.read(namespace, "k")
    await reader.close()
    assert record is not None
    assert record.value == {"n": 1}


async def test_in_memory_run_stores_get_in_memory_record_stores() -> None:
    assert isinstance(create_fevex().record_store, InMemoryRecordStore)
    assert isinstance(create_fevex(run_store=InMemoryRunStore()).record_store, InMemoryRecordStore)
    assert isinstance(create_fevex(run_store="memory://").record_store, InMemoryRecordStore)


async def test_a_run_store_that_names_no_record_store_needs_record_store() -> None:
    app = create_fevex(run_store=ForwardingRunStore())
    # The app starts and runs as before; only a record read or swap is refused.
    with pytest.raises(FevexConfigurationError) as refused:
        await app.record_store.compare_and_swap("ns", "k", 0, {"n": 1})
    assert refused.value.code == "RECORD_STORE_MISSING"
    assert "record_store=" in refused.value.message
    with pytest.raises(FevexConfigurationError) as refused:
        await app.record_store.read("ns", "k")
    assert refused.value.code == "RECORD_STORE_MISSING"

    given = InMemoryRecordStore()
    app = create_fevex(run_store=ForwardingRunStore(), record_store=given)
    assert app.record_store is given
    app = create_fevex(run_store=ForwardingRunStore(), record_store="memory://")
    assert await app.record_store.compare_and_swap("ns", "k", 0, {"n": 1})


async def test_record_store_must_be_a_record_store_or_a_url() -> None:
    with pytest.raises(FevexConfigurationError) as refused:
        create_fevex(record_store=object())  # type: ignore[arg-type]
    assert refused.value.code == "INVALID_CONFIG"
    assert "compare_and_swap" in refused.value.message
