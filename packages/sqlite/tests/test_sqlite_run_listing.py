"""``list_runs`` on SQLite reads each page from an index in the page's order: one range
scan, never a sort of every matching run."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCreate
from fevex_sqlite import SQLiteRunStore

pytestmark = pytest.mark.anyio

NOW = "2030-01-01T00:00:00.000000Z"


@pytest.mark.parametrize(
    ("filters", "index"),
    [
        ({}, "fevex_runs_by_created"),
        ({"status": "paused"}, "fevex_runs_by_status"),
        ({"kind": "workflow"}, "fevex_runs_by_kind"),
        ({"name": "a"}, "fevex_runs_by_name"),
        ({"session_id": "ses-1"}, "fevex_runs_by_session"),
        ({"parent_run_id": "run-1"}, "fevex_runs_by_parent"),
    ],
    ids=lambda value: value if isinstance(value, str) else ",".join(value) or "none",
)
async def test_a_page_is_one_range_scan_of_an_index(
    store: SQLiteRunStore, database: Path, filters: dict[str, str], index: str
) -> None:
    run = AgentRun("run-1", "ses-1", "a", "running", None, NOW, NOW, revision=1)
    started = RunEvent("evt-1", run.id, 1, "run.started", NOW, {})
    await store.create_execution(ExecutionCreate(run, None, (started,)))
    sent: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        if "FROM fevex_runs" in statement and "ORDER BY created_at" in statement:
            sent.append((statement, parameters))

    event.listen(Engine, "before_cursor_execute", record)
    try:
        for after in (None, run.id):
            sent.clear()
            await store.list_runs(**filters, after=after)
            ((statement, parameters),) = sent
            with closing(sqlite3.connect(database)) as raw:
                plan = raw.execute(f"EXPLAIN QUERY PLAN {statement}", parameters).fetchall()
            details = " / ".join(str(row[3]) for row in plan)
            assert f"USING INDEX {index}" in details, details
            assert "TEMP B-TREE" not in details, details
            if after is not None:
                assert "(created_at,id)<(?,?)" in details, details
    finally:
        event.remove(Engine, "before_cursor_execute", record)
