"""The core's run-store conformance suite on a real SQLite file.

Each call of the factory opens a new store on the same file, as another process would.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fevex.testing import (
    RUN_STORE_CHECKS,
    ManualClock,
    RunStoreCheck,
    check_record_store,
    check_run_store,
)
from fevex_sqlite import SQLiteRecordStore, SQLiteRunStore

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("check", RUN_STORE_CHECKS, ids=lambda check: check.__name__)
async def test_the_store_keeps_the_run_store_contract(check: RunStoreCheck, database: Path) -> None:
    await check(lambda: SQLiteRunStore(database))


async def test_the_whole_suite_passes_on_the_stores_injected_clock(database: Path) -> None:
    # Leases expire by the clock the store is given, not by the wall clock.
    clock = ManualClock()
    report = await check_run_store(lambda: SQLiteRunStore(database, clock=clock), clock=clock)
    assert report.passed == tuple(check.__name__ for check in RUN_STORE_CHECKS)


async def test_the_record_store_keeps_the_record_contract(database: Path) -> None:
    passed = await check_record_store(lambda: SQLiteRecordStore(database))
    assert len(passed) == 9
