"""The PostgreSQL record store's own behaviour beyond the contract (which
tests/test_record_stores.py runs): the schema it needs, and the codes of the server's
failures."""

from __future__ import annotations

import psycopg
import pytest

from fevex.errors import FevexError
from fevex_postgres import PostgresRunStore
from fevex_postgres.plugin import open_postgres_records
from fevex_postgres.testing import libpq_url

pytestmark = pytest.mark.anyio


async def test_records_need_the_migrated_schema(empty_database_url: str) -> None:
    store = open_postgres_records(empty_database_url)
    with pytest.raises(FevexError) as refused:
        await store.compare_and_swap("ns", "k", 0, {"n": 1})
    assert refused.value.code == "SCHEMA_OUTDATED"
    assert "fevex db upgrade" in refused.value.message
    runs = PostgresRunStore(empty_database_url)
    await runs.upgrade_schema()
    await runs.close()
    assert await store.compare_and_swap("ns", "k", 0, {"n": 1}) is True
    await store.close()


async def test_a_failure_of_the_server_is_a_store_error(database_url: str) -> None:
    store = open_postgres_records(database_url)
    assert await store.compare_and_swap("ns", "k", 0, {"secret": "do not quote"})
    with psycopg.connect(libpq_url(database_url), autocommit=True) as admin:
        admin.execute("DROP TABLE fevex_records")
    with pytest.raises(FevexError) as failed:
        await store.compare_and_swap("ns", "k", 1, {"secret": "do not quote"})
    assert failed.value.code == "STORE_ERROR"
    assert "do not quote" not in str(failed.value)
    assert "compare_and_swap" in str(failed.value)
    with pytest.raises(FevexError) as failed:
        await store.read("ns", "k")
    assert failed.value.code == "STORE_ERROR"
    await store.close()


async def test_an_unreachable_server_is_store_unavailable() -> None:
    store = open_postgres_records("postgresql+psycopg://fevex@127.0.0.1:1/none?connect_timeout=2")
    with pytest.raises(FevexError) as failed:
        await store.read("ns", "k")
    assert failed.value.code == "STORE_UNAVAILABLE"
    await store.close()
