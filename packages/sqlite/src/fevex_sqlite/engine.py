"""The SQLAlchemy async engine over aiosqlite, set up so that fevex decides how each
transaction begins.

pysqlite (under aiosqlite) would otherwise begin transactions itself, lazily, at the first
write statement: a transaction that reads a run's revision and lease and then writes would
take the write lock only after its checks, and another process could commit in between.
So the driver's own handling is switched off (``isolation_level = None``) and SQLAlchemy's
``begin`` event emits the BEGIN, the recipe of SQLAlchemy's SQLite documentation
("Enabling Non-Legacy SQLite Transactional Modes"). Writes begin ``IMMEDIATE``: they take
the file's single write lock before their first read, waiting up to ``busy_timeout`` for
it, so their checks cannot go stale before they commit, across threads and processes
alike. Reads begin ``DEFERRED``: in WAL mode they see one consistent snapshot and never
wait for a writer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import URL, Connection, event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

__all__ = ["open_engines"]

_WRITE_OPTION = "fevex_sqlite_write"


def open_engines(path: Path, *, busy_timeout: float) -> tuple[AsyncEngine, AsyncEngine]:
    """Engines for reading and for writing; both share one pool of connections."""
    engine = create_async_engine(URL.create("sqlite+aiosqlite", database=str(path)))
    busy_ms = round(busy_timeout * 1000)

    @event.listens_for(engine.sync_engine, "connect")
    def configure(dbapi_connection: Any, connection_record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def begin(connection: Connection) -> None:
        writes = connection.get_execution_options().get(_WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN DEFERRED")

    return engine, engine.execution_options(**{_WRITE_OPTION: True})
