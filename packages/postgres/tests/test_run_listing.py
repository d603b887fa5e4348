"""``list_runs`` on PostgreSQL: the page order does not depend on the database's collation,
and pages are read from the indexes of migration 2."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCreate
from fevex.testing import RUN_STORE_CHECKS
from fevex_postgres import PostgresRunStore
from fevex_postgres.testing import libpq_url

pytestmark = pytest.mark.anyio

CREATED_AT = "2030-01-01T00:00:00.000000Z"
# Byte order (and Python's): "run_B" < "run_Z" < "run_a". English collation: a < B < Z.
IDS = ("run_B", "run_a", "run_Z")


@pytest.fixture
def english_database_url(databases: Any) -> Iterator[str]:
    """A database whose default collation is ICU's English, as many production ones are."""
    options = "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'"
    try:
        name = databases.create(options=options)
    except psycopg.Error as error:
        pytest.skip(f"the server cannot create an ICU database: {error}")
    yield databases.url(name)
    databases.drop(name)


async def test_runs_are_listed_byte_by_byte_whatever_the_collation(
    english_database_url: str,
) -> None:
    store = PostgresRunStore(english_database_url)
    try:
        await store.upgrade_schema()
        for run_id in IDS:
            session_id = f"ses-{run_id}"
            run = AgentRun(run_id, session_id, "order", "running", None, CREATED_AT, CREATED_AT)
            started = RunEvent(f"evt-{run_id}", run_id, 1, "run.started", CREATED_AT, {})
            await store.create_execution(ExecutionCreate(run, None, (started,)))
        with psycopg.connect(libpq_url(english_database_url)) as connection:
            by_collation = connection.execute(
                "SELECT id FROM fevex_runs ORDER BY id DESC"
            ).fetchall()
        want = sorted(IDS, reverse=True)
        # The database's own order differs: a store that left it to the collation would fail.
        assert [row[0] for row in by_collation] != want
        assert [run.id for run in await store.list_runs(name="order")] == want
        paged: list[str] = []
        after = None
        while page := await store.list_runs(name="order", limit=1, after=after):
            paged += [run.id for run in page]
            after = page[-1].id
        assert paged == want
    finally:
        await store.close()
    checks = {check.__name__: check for check in RUN_STORE_CHECKS}
    await checks["check_run_listing"](lambda: PostgresRunStore(english_database_url))


async def test_pages_are_read_from_an_index(database_url: str) -> None:
    # Enough rows that a sequential scan and a sort would cost more than an index.
    with psycopg.connect(libpq_url(database_url)) as connection:
        connection.execute(
            "INSERT INTO fevex_sessions (id, revision, created_at, updated_at) "
            "VALUES ('ses', 1, 't', 't')"
        )
        connection.execute(
            "INSERT INTO fevex_runs (id, session_id, agent_name, name, kind, status, revision, "
            "created_at, updated_at, root_run_id, parent_run_id, lease_owner, "
            "lease_generation, lease_expires_at) "
            "SELECT 'run_' || g, 'ses', 'a' || g % 50, 'a' || g % 50, "
            "CASE WHEN g % 10 = 0 THEN 'workflow' ELSE 'agent' END, "
            "(ARRAY['running', 'paused', 'completed', 'failed', 'cancelled'])[1 + g % 5], 1, "
            "to_char(g, 'FM0000000'), 't', 'run_' || g, "
            "CASE WHEN g % 7 = 0 THEN 'run_7' END, 'o', 1, 0 "
            "FROM generate_series(1, 20000) AS g"
        )
        connection.execute("ANALYZE fevex_runs")
        connection.commit()

    # The statements the store sends, as the driver gets them.
    sent: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        if "FROM fevex_runs" in statement and "ORDER BY" in statement:
            sent.append((statement, parameters))

    store = PostgresRunStore(database_url)
    event.listen(Engine, "before_cursor_execute", record)
    try:
        for filters, index in (
            ({}, "fevex_runs_created"),
            ({"kind": "workflow"}, "fevex_runs_kind_created"),
            ({"name": "a7"}, "fevex_runs_name_created"),
            ({"parent_run_id": "run_7"}, "fevex_runs_parent_created"),
        ):
            for after in (None, "run_10000"):
                sent.clear()
                await store.list_runs(**filters, after=after)
                ((statement, parameters),) = sent
                with psycopg.connect(libpq_url(database_url)) as connection:
                    rows = connection.execute(f"EXPLAIN {statement}", parameters).fetchall()
                plan = "\n".join(row[0] for row in rows)
                assert index in plan, (filters, after, plan)
                assert "Sort" not in plan, (filters, after, plan)
    finally:
        event.remove(Engine, "before_cursor_execute", record)
        await store.close()
