"""Opening a store whose schema is current takes no write lock: a process creates its app
and reads while another connection holds a write transaction on the same SQLite file or
PostgreSQL database (real files, a real server, a second OS process)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager

from fevex import create_fevex

# A second process: creates its app on the store URL it is given and lists its runs.
READER = """
import asyncio, json, sys
from fevex import create_fevex, define_agent
from fevex.testing import FakeModel


async def main():
    async with create_fevex(
        models={"default": FakeModel({"output": "hi"})},
        agents=[define_agent(name="support", instructions="Help.")],
        run_store=sys.argv[1],
    ) as app:
        print(json.dumps({"runs": len(await app.list_runs())}))


asyncio.run(main())
"""


@contextmanager
def write_transaction(store_url: str) -> Iterator[None]:
    """Another connection holding a write transaction on the store: SQLite's write lock
    (``BEGIN IMMEDIATE`` and a write), or PostgreSQL locks that let readers in and keep
    every writer out."""
    if store_url.startswith("sqlite"):
        with closing(sqlite3.connect(store_url.removeprefix("sqlite:///"))) as writer:
            writer.isolation_level = None
            writer.execute("BEGIN IMMEDIATE")
            writer.execute("UPDATE fevex_schema_migrations SET name = name")
            try:
                yield
            finally:
                writer.execute("ROLLBACK")
        return
    import psycopg

    dsn = store_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn) as writer:
        writer.execute(
            "LOCK TABLE fevex_schema_version, fevex_runs, fevex_sessions, fevex_events "
            "IN EXCLUSIVE MODE"
        )
        try:
            yield
        finally:
            writer.rollback()


def test_an_app_opens_and_reads_while_another_connection_holds_a_write_transaction(
    store_url: str,
) -> None:
    # The store at the current schema (the PostgreSQL database came migrated).
    with create_fevex(run_store=store_url):
        pass
    # A short busy timeout: a SQLite opener that waits for the lock fails fast.
    url = f"{store_url}?busy_timeout=0.5" if store_url.startswith("sqlite") else store_url
    with write_transaction(store_url):
        reader = subprocess.run(
            [sys.executable, "-c", READER, url],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert reader.returncode == 0, reader.stderr
    assert json.loads(reader.stdout) == {"runs": 0}
