"""Writes the stored runs and digests that the journal-digest tests hold today's code to.

Notes on the fixtures in this folder:

- ``digests.json``: JSON values of many shapes, each with the digest the step journal keeps
  for it (``journal``: bare hexadecimal) and the digest a cassette keeps (``labelled``:
  ``sha256:`` and the same hexadecimal), as the code computed them before the journal, the
  cassettes, the connections and the MCP pins shared one digest function.
- ``paused_run.sqlite``: a SQLite run store holding one run of ``journal_app.journalled``,
  paused waiting for its event after five journalled steps.
- ``paused_run.postgres.json``: the same run on PostgreSQL, as the rows of each table
  (``row_to_json``), which the test inserts back with fresh ids.

They were written once, on branch ``schema`` before its refactoring, with
``python tests/journal_digests/make_fixtures.py`` from the repository root (PostgreSQL: a
throwaway server from ``fevex_postgres.testing.postgres_server``). Never write them again
with later code: they are what a stored run of an older fevex looks like, and the tests
prove that later code still continues it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from journal_app import EVENT, RUN_INPUT, WORKFLOW, build_app  # noqa: E402

from fevex import RunPausedError  # noqa: E402

DIGEST_INPUTS: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**53 + 1,
    2**64,
    -(2**70),
    10**40,
    0.1,
    -0.0,
    0.0,
    1.0,
    1e-7,
    1e16,
    1e300,
    2.5e-308,
    3.141592653589793,
    "",
    "plain",
    "naïve café",
    "☃ 𝄞 中文 😀",
    "\u2028\u2029\x7f",
    '"quoted" \\ back\tslash\n',
    "\x01\x1f",
    [],
    {},
    [1, "two", 3.0, None, True],
    {"b": 1, "a": 2},
    {"a": 2, "b": 1},
    {"é": 1, "e": 2, "E": 3, "ß": 4, "中": 5, "😀": 6},
    {"z": {"y": [1, {"b": 2, "a": 1}], "x": {}}, "a": None},
    {"tool": "keep_values", "input": {"values": {"ключ": 1.5, "b": [2**64], "a": ""}}},
    {"function": "keep", "args": [[0.1, 1e-7, 1e300, -0.0, 3.0, 2.5e-308, 2**70]]},
    [[[[[[["deep"]]]]]]],
]


def write_digests() -> None:
    from fevex._ground.canonical_json import json_digest
    from fevex._internal.engine.journal import input_digest

    rows = [
        {"input": value, "journal": input_digest(value), "labelled": json_digest(value)}
        for value in DIGEST_INPUTS
    ]
    text = json.dumps(rows, ensure_ascii=False, indent=1)
    assert json.loads(text) == rows
    (HERE / "digests.json").write_text(text + "\n", encoding="utf-8")


async def pause(url: str) -> str:
    app = build_app(url)
    try:
        await app.run_workflow(WORKFLOW, RUN_INPUT)
    except RunPausedError as paused:
        run = await app.get_run(paused.run_id)
        assert run.status == "paused"
        assert run.pause is not None
        assert run.pause["event"] == EVENT
        return paused.run_id
    finally:
        await app.close()
    raise AssertionError("the workflow did not pause")


def write_sqlite() -> None:
    folder = Path(tempfile.mkdtemp())
    database = folder / "runs.db"
    asyncio.run(pause(f"sqlite:///{database}"))
    # One self-contained file: whatever the write-ahead log still holds goes into it.
    with sqlite3.connect(database) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.execute("PRAGMA journal_mode=DELETE")
    shutil.copyfile(database, HERE / "paused_run.sqlite")
    shutil.rmtree(folder)


def write_postgres() -> None:
    import subprocess

    import psycopg

    from fevex_postgres.testing import postgres_server

    with postgres_server(database="digests") as url:
        subprocess.run(
            [sys.executable, "-m", "fevex.cli", "db", "upgrade", "--store", url], check=True
        )
        run_id = asyncio.run(pause(url))
        dsn = url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(dsn) as connection:
            tables: dict[str, list[Any]] = {}
            for table, where in (
                (
                    "fevex_sessions",
                    "id IN (SELECT session_id FROM fevex_runs WHERE root_run_id = %s)",
                ),
                ("fevex_runs", "root_run_id = %s"),
                ("fevex_events", "run_id IN (SELECT id FROM fevex_runs WHERE root_run_id = %s)"),
            ):
                rows = connection.execute(
                    f"SELECT row_to_json(t)::text FROM {table} t WHERE {where} ORDER BY 1",
                    (run_id,),
                ).fetchall()
                tables[table] = [json.loads(row[0]) for row in rows]
    dump = {"run_id": run_id, "tables": tables}
    text = json.dumps(dump, ensure_ascii=False, indent=1)
    (HERE / "paused_run.postgres.json").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    write_digests()
    write_sqlite()
    write_postgres()
