"""The SQLite record store's own behaviour beyond the contract (which
tests/test_record_stores.py runs): its table lives in the run store's file, and SQLite's
failures have the store's codes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from fevex.errors import FevexError
from fevex_sqlite import SQLiteRunStore
from fevex_sqlite.plugin import open_sqlite_records

pytestmark = pytest.mark.anyio


async def test_records_share_the_run_stores_file_and_schema(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    runs = SQLiteRunStore(path)
    await runs.close()
    store = runs.open_record_store()
    assert store.path == path
    assert await store.compare_and_swap("ns", "k", 0, {"n": 1})
    await store.close()
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(*) FROM fevex_records").fetchone() == (1,)


async def test_create_false_refuses_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FevexError) as refused:
        open_sqlite_records(f"sqlite:///{tmp_path / 'typo.db'}?create=false")
    assert refused.value.code == "STORE_NOT_FOUND"


@pytest.mark.parametrize("busy_timeout", [-1, float("nan"), "5", True])
async def test_an_unusable_busy_timeout_is_refused(tmp_path: Path, busy_timeout: object) -> None:
    with pytest.raises(FevexError) as refused:
        open_sqlite_records(str(tmp_path / "runs.db"), busy_timeout=busy_timeout)
    assert refused.value.code == "INVALID_CONFIG"


async def test_a_failure_of_sqlite_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = open_sqlite_records(f"sqlite:///{path}")
    assert await store.compare_and_swap("ns", "k", 0, {"secret": "do not quote"})
    with sqlite3.connect(path) as connection:
        connection.execute("DROP TABLE fevex_records")
    with pytest.raises(FevexError) as failed:
        await store.compare_and_swap("ns", "k", 1, {"secret": "do not quote"})
    assert failed.value.code == "STORE_ERROR"
    assert "do not quote" not in str(failed.value)
    with pytest.raises(FevexError) as failed:
        await store.read("ns", "k")
    assert failed.value.code == "STORE_ERROR"
    await store.close()


async def test_a_write_that_waits_too_long_for_the_lock_is_store_busy(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = open_sqlite_records(f"sqlite:///{path}?busy_timeout=0.1")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(FevexError) as failed:
            await store.compare_and_swap("ns", "k", 0, {"n": 1})
        assert failed.value.code == "STORE_BUSY"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert await store.read("ns", "k") is None
    assert await store.compare_and_swap("ns", "k", 0, {"n": 1})
    await store.close()
