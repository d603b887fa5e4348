"""The core's run-store conformance suite against PostgresRunStore on a real server.

One test per check, each on a database of its own and with a new store handle per
``factory()`` call; then the whole suite on one database, where the checks' runs coexist.
"""

from __future__ import annotations

import pytest

from fevex.testing import RUN_STORE_CHECKS, RunStoreCheck, check_record_store, check_run_store
from fevex_postgres import PostgresRecordStore, PostgresRunStore

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("check", RUN_STORE_CHECKS, ids=lambda check: check.__name__)
async def test_run_store_contract(check: RunStoreCheck, database_url: str) -> None:
    await check(lambda: PostgresRunStore(database_url))


async def test_the_whole_suite_on_one_shared_database(database_url: str) -> None:
    report = await check_run_store(lambda: PostgresRunStore(database_url))
    assert report.passed == tuple(check.__name__ for check in RUN_STORE_CHECKS)


async def test_the_record_store_keeps_the_record_contract(database_url: str) -> None:
    passed = await check_record_store(lambda: PostgresRecordStore(database_url))
    assert len(passed) == 9
