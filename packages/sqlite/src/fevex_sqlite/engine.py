"""The synchronous SQLAlchemy engine over pysqlite, set up so that fevex decides how each
transaction begins.

pysqlite would otherwise begin transactions itself, lazily, at the first write statement:
a transaction that reads a run's revision and lease and then writes would take the write
lock only after its checks, and another process could commit in between. So the driver's
own handling is switched off (``isolation_level=None``) and :func:`begin` emits the BEGIN
when SQLAlchemy begins a transaction, as the recipe of SQLAlchemy's SQLite documentation
("Enabling Non-Legacy SQLite Transactional Modes") does from a ``begin`` event; a plain
function instead of the event, because an engine with event listeners dispatches on every
statement. Writes begin ``IMMEDIATE``: they take the file's single write lock before their
first read, waiting up to ``busy_timeout`` for it, so their checks cannot go stale before
they commit, across threads and processes alike. Reads begin ``DEFERRED``: in WAL mode they
see one consistent snapshot and never wait for a writer.

The engine has no pool (``NullPool``): each store thread opens the one connection it uses
and closes it itself (see :mod:`fevex_sqlite.transaction_thread`). Statements are compiled
once per engine and reused from SQLAlchemy's compiled cache, and pysqlite keeps them
prepared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import URL, Connection, Engine, RootTransaction, create_engine
from sqlalchemy.pool import NullPool

__all__ = ["begin", "connect", "open_engine"]


def open_engine(path: Path, *, busy_timeout: float) -> Engine:
    """An engine on the file at ``path``; it connects only when :func:`connect` asks."""
    return create_engine(
        URL.create("sqlite+pysqlite", database=str(path)),
        poolclass=NullPool,
        # pysqlite's timeout is SQLite's busy timeout.
        connect_args={"isolation_level": None, "timeout": busy_timeout},
    )


def connect(engine: Engine) -> Connection:
    """A new connection with foreign keys enforced, which SQLite sets per connection."""
    connection = engine.connect()
    try:
        _driver(connection).execute("PRAGMA foreign_keys = ON").close()
    except BaseException:
        connection.close()
        raise
    return connection


def begin(connection: Connection, *, writes: bool) -> RootTransaction:
    """Begin a transaction: ``IMMEDIATE`` (holding the write lock) when it ``writes``.

    A failure to begin (a busy lock) is pysqlite's own ``sqlite3.OperationalError``.
    """
    transaction = connection.begin()  # SQLAlchemy's bookkeeping; it emits no BEGIN itself
    try:
        _driver(connection).execute("BEGIN IMMEDIATE" if writes else "BEGIN DEFERRED").close()
    except BaseException:
        transaction.rollback()
        raise
    return transaction


def _driver(connection: Connection) -> Any:
    return connection.connection.driver_connection
