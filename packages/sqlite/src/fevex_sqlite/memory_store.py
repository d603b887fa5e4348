"""Memories in a SQLite file, found with FTS5: a memory store every process sharing the
file sees.

One FTS5 table holds each memory's text (indexed) and its id, namespace, metadata and time
(stored, not indexed); it lives beside the run store's tables when both use one file and
is created on first use. A query is made of :func:`~fevex.knowledge.search_terms` only,
each quoted as an FTS5 string and used as a prefix, joined by ``OR`` and ranked by bm25:
text a model or user wrote is never read as FTS5 syntax. Each operation opens its own
connection in a worker thread, so that the store holds nothing between calls.

``fevex_memory_migrations`` records what was done to a table an older fevex wrote: its
memories of the former default namespace (``"default"``) are moved to
``DEFAULT_NAMESPACE`` once, in the transaction that creates the record, so that a run that
names ``"default"`` later keeps its own memories there.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fevex.errors import FevexConfigurationError
from fevex.knowledge import DEFAULT_NAMESPACE, Memory, search_terms
from fevex.runtime import FORMER_DEFAULT_NAMESPACE, check_memory_id, check_namespace
from fevex_sqlite.location import parse_location

__all__ = ["SQLiteMemoryStore", "open_sqlite_memory_store"]

_SCHEMA = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS fevex_memories USING fts5("
    "content, memory_id UNINDEXED, namespace UNINDEXED, metadata UNINDEXED, "
    "created_at UNINDEXED, tokenize = 'unicode61 remove_diacritics 2')"
)
_MIGRATIONS = (
    "CREATE TABLE IF NOT EXISTS fevex_memory_migrations ("
    "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
)
_DEFAULT_NAMESPACE_MOVED = (1, "memories of the former default namespace moved to ''")


class SQLiteMemoryStore:
    """The memory store of a SQLite file (created with its folder when missing)."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 5.0) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection.execute("PRAGMA journal_mode=WAL")
            # IMMEDIATE: processes opening an old file together migrate it exactly once.
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.execute(_SCHEMA)
                connection.execute(_MIGRATIONS)
                _move_the_former_default_namespace(connection)
            except BaseException:
                connection.execute("ROLLBACK")
                connection.close()
                raise
            connection.execute("COMMIT")
            self._ready = True
        return connection

    async def add(
        self, namespace: str, content: str, *, metadata: Mapping[str, Any] | None = None
    ) -> Memory:
        memory = Memory.new(namespace, content, metadata)
        await asyncio.to_thread(self._insert, memory)
        return memory

    def _insert(self, memory: Memory) -> None:
        with _closing(self._connect()) as connection:
            connection.execute(
                "INSERT INTO fevex_memories (content, memory_id, namespace, metadata, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    memory.content,
                    memory.id,
                    memory.namespace,
                    json.dumps(dict(memory.metadata)),
                    memory.created_at,
                ),
            )

    async def search(self, namespace: str, query: str, *, limit: int = 5) -> Sequence[Memory]:
        check_namespace(namespace)
        terms = search_terms(query)
        if not terms or limit < 1:
            return []
        match = " OR ".join(f'"{term}"*' for term in terms)
        return await asyncio.to_thread(self._search, namespace, match, limit)

    def _search(self, namespace: str, match: str, limit: int) -> list[Memory]:
        with _closing(self._connect()) as connection:
            rows = connection.execute(
                "SELECT memory_id, namespace, content, created_at, metadata FROM fevex_memories"
                " WHERE fevex_memories MATCH ? AND namespace = ? ORDER BY bm25(fevex_memories)"
                " LIMIT ?",
                (match, namespace, limit),
            ).fetchall()
        return [Memory(row[0], row[1], row[2], row[3], json.loads(row[4])) for row in rows]

    async def delete(self, namespace: str, memory_id: str) -> bool:
        check_namespace(namespace)
        check_memory_id(memory_id)
        return await asyncio.to_thread(self._delete, namespace, memory_id)

    def _delete(self, namespace: str, memory_id: str) -> bool:
        with _closing(self._connect()) as connection:
            cursor = connection.execute(
                "DELETE FROM fevex_memories WHERE memory_id = ? AND namespace = ?",
                (memory_id, namespace),
            )
            return cursor.rowcount > 0

    async def close(self) -> None:
        return None


def _move_the_former_default_namespace(connection: sqlite3.Connection) -> None:
    version, name = _DEFAULT_NAMESPACE_MOVED
    done = connection.execute(
        "SELECT 1 FROM fevex_memory_migrations WHERE version = ?", (version,)
    ).fetchone()
    if done is not None:
        return
    connection.execute(
        "UPDATE fevex_memories SET namespace = ? WHERE namespace = ?",
        (DEFAULT_NAMESPACE, FORMER_DEFAULT_NAMESPACE),
    )
    connection.execute(
        "INSERT INTO fevex_memory_migrations (version, name, applied_at) VALUES (?, ?, ?)",
        (version, name, datetime.now(UTC).isoformat().replace("+00:00", "Z")),
    )


class _closing:
    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    def __enter__(self) -> sqlite3.Connection:
        return self.connection

    def __exit__(self, *exc: object) -> None:
        self.connection.close()


def open_sqlite_memory_store(url: str, **options: Any) -> SQLiteMemoryStore:
    """Open ``sqlite:///relative/memory.db`` or ``sqlite:////absolute/memory.db``; the file
    may be the run store's."""
    location = parse_location(url)
    if location.create is False and not location.path.exists():
        raise FevexConfigurationError(
            "INVALID_CONFIG", f"There is no SQLite file at {location.path} (create=false)."
        )
    if location.busy_timeout is not None:
        options.setdefault("busy_timeout", location.busy_timeout)
    return SQLiteMemoryStore(location.path, **options)
