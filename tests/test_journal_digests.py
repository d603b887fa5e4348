"""The journal's digests stay what older code stored, so runs it paused still continue.

``journal_digests/`` holds digests and paused runs (SQLite and PostgreSQL) written by the code
before the journal, the cassettes, the connections and the MCP pins shared one digest
function (``journal_digests/make_fixtures.py`` says how). Today's code must compute the same
digests and carry the stored runs to their end without ``STEP_MISMATCH``.
"""

from __future__ import annotations

import importlib.util
import json
import secrets
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from fevex._ground.canonical_json import canonical_json, json_digest
from fevex._internal.engine.journal import input_digest

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent / "journal_digests"
DIGESTS = json.loads((HERE / "digests.json").read_text(encoding="utf-8"))


def _journal_app() -> Any:
    spec = importlib.util.spec_from_file_location("journal_app", HERE / "journal_app.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("journal_app", module)
    spec.loader.exec_module(module)
    return module


journal_app = _journal_app()


@pytest.mark.parametrize("row", DIGESTS, ids=[str(i) for i in range(len(DIGESTS))])
def test_the_digests_of_older_code_are_computed_again(row: dict[str, Any]) -> None:
    assert input_digest(row["input"]) == row["journal"]
    # A cassette digests a model input as canonical_json wrote and read it back (``-0.0``
    # as ``0.0``): that value is the one its stored digests are of.
    assert json_digest(json.loads(canonical_json(row["input"]))) == row["labelled"]


def test_the_fixture_covers_the_shapes_a_digest_must_keep_apart() -> None:
    values = [row["input"] for row in DIGESTS]
    text = json.dumps(values, ensure_ascii=False)
    assert any(isinstance(v, int) and not isinstance(v, bool) and v >= 2**64 for v in values)
    assert any(isinstance(v, float) for v in values)
    assert {"b": 1, "a": 2} in values
    assert "😀" in text
    assert "中" in text
    # Key order makes no digest of its own; -0.0 and 0.0 do.
    assert len({row["journal"] for row in DIGESTS}) == len(DIGESTS) - 1


async def _continue(url: str, run_id: str) -> None:
    app = journal_app.build_app(url)
    try:
        run = await app.get_run(run_id)
        assert (run.kind, run.name, run.status) == ("workflow", journal_app.WORKFLOW, "paused")
        result = await app.send_event(run_id, journal_app.EVENT, {"note": "naïve"})
        assert result.output == journal_app.EXPECTED_OUTPUT
        events = [event.type for event in await app.list_events(run_id)]
        assert events[-1] == "run.completed"
        assert "workflow.step.failed" not in events
        assert (await app.get_run(run_id)).status == "completed"
    finally:
        await app.close()


async def test_a_run_paused_by_older_code_continues_on_sqlite(tmp_path: Path) -> None:
    database = tmp_path / "runs.db"
    shutil.copyfile(HERE / "paused_run.sqlite", database)
    run_id = _stored_run_id(database)
    await _continue(f"sqlite:///{database}", run_id)


async def test_a_run_paused_by_older_code_continues_on_postgres(postgres_url: str) -> None:
    import psycopg

    dump = json.loads((HERE / "paused_run.postgres.json").read_text(encoding="utf-8"))
    text = json.dumps(dump["tables"], ensure_ascii=False)
    # The shared database may hold this run already (another test session): fresh ids.
    ids = {row["id"] for rows in dump["tables"].values() for row in rows}
    for old in sorted(ids, key=len, reverse=True):
        text = text.replace(old, f"{old.split('_', 1)[0]}_{secrets.token_hex(12)}")
    tables = json.loads(text)
    run_id = next(row["id"] for row in tables["fevex_runs"] if row["parent_run_id"] is None)
    dsn = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn) as connection:
        for table in ("fevex_sessions", "fevex_runs", "fevex_events"):
            for row in tables[table]:
                connection.execute(
                    f"INSERT INTO {table} SELECT * FROM jsonb_populate_record("
                    f"NULL::{table}, %s::jsonb)",
                    (json.dumps(row),),
                )
    await _continue(postgres_url, run_id)


def _stored_run_id(database: Path) -> str:
    import sqlite3

    with sqlite3.connect(database) as connection:
        rows = connection.execute("SELECT id FROM fevex_runs WHERE status = 'paused'").fetchall()
    assert len(rows) == 1
    return str(rows[0][0])
