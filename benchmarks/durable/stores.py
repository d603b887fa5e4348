"""Opening the three run stores the durable benchmarks compare, and the throwaway server.

The PostgreSQL figures run against the server ``fevex_postgres.testing.postgres_server``
starts (loopback, ``fsync=off``, ``synchronous_commit=off``), unless a URL is given; every
database a benchmark uses is migrated with the store's own ``upgrade_schema`` (what
``fevex db upgrade`` runs).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fevex.runtime import InMemoryRunStore, RunStore

STORES = ("memory", "sqlite", "postgres")


@contextlib.contextmanager
def postgres_url(given: str | None) -> Iterator[str]:
    """``given``, or the URL of a throwaway server that lives for the ``with`` block."""
    if given is not None:
        yield given
        return
    from fevex_postgres.testing import postgres_server

    with postgres_server(database="fevex_bench") as url:
        yield url


async def open_store(kind: str, directory: Path, url: str | None = None) -> RunStore:
    """A fresh store of ``kind``: memory, a SQLite file in ``directory``, or the PostgreSQL
    database at ``url`` (migrated first)."""
    if kind == "memory":
        return InMemoryRunStore()
    if kind == "sqlite":
        from fevex_sqlite import SQLiteRunStore

        return SQLiteRunStore(directory / "runs.db")
    if kind == "postgres":
        if url is None:
            raise ValueError("the postgres store needs a server URL")
        from fevex_postgres import PostgresRunStore

        store = PostgresRunStore(url)
        await store.upgrade_schema()
        return store
    raise ValueError(f"unknown store {kind!r}; choose from {', '.join(STORES)}")


def libpq_url(url: str) -> str:
    """The SQLAlchemy URL as psycopg and the PostgreSQL programs read it."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def create_database(url: str, name: str) -> str:
    """Create database ``name`` on the server of ``url`` (dropping an old one) and return
    its URL; used to give each stored-event count a store of its own."""
    import psycopg

    with psycopg.connect(libpq_url(url), autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
        connection.execute(f'CREATE DATABASE "{name}"')
    return url.rsplit("/", 1)[0] + "/" + name


def server_settings(url: str) -> dict[str, Any]:
    """The server settings that decide what a commit costs, read back from the server."""
    import psycopg

    names = ("server_version", "fsync", "synchronous_commit", "full_page_writes", "shared_buffers")
    settings: dict[str, Any] = {}
    with psycopg.connect(libpq_url(url)) as connection:
        for name in names:
            row = connection.execute(f"SHOW {name}").fetchone()
            settings[name] = None if row is None else row[0]
    return settings
