"""Memories in PostgreSQL, found with full-text search: a memory store every process
sharing the database sees.

The table ``fevex_memories`` keeps each memory with a generated ``tsvector`` of its text
(the ``simple`` configuration: lower-cased words, no stemming, as the other stores match)
under a GIN index. It is created on first use, under an advisory lock so that processes
starting together do not race. A query is made of :func:`~fevex.knowledge.search_terms`
only (letters and digits), each a prefix, joined by ``|`` and ranked by ``ts_rank``: text a
model or user wrote is never read as tsquery syntax. Each operation uses its own
autocommit connection.

``fevex_memory_migrations`` records what was done to a table an older fevex wrote: its
memories of the former default namespace (``"default"``) are moved to
``DEFAULT_NAMESPACE`` once, under the same lock and in the transaction that creates the
record, so that a run that names ``"default"`` later keeps its own memories there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg

from fevex.knowledge import DEFAULT_NAMESPACE, Memory, search_terms
from fevex.runtime import FORMER_DEFAULT_NAMESPACE, check_memory_id, check_namespace
from fevex_postgres.store_url import parse_store_url

__all__ = ["PostgresMemoryStore", "open_postgres_memory_store"]

# An arbitrary constant naming this table's creation among advisory locks.
_SCHEMA_LOCK = 7_307_215_001
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS fevex_memories ("
    " id text PRIMARY KEY,"
    " namespace text NOT NULL,"
    " content text NOT NULL,"
    " metadata jsonb NOT NULL,"
    " created_at text NOT NULL,"
    " search tsvector GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED)",
    "CREATE INDEX IF NOT EXISTS fevex_memories_search ON fevex_memories USING gin (search)",
    "CREATE INDEX IF NOT EXISTS fevex_memories_namespace ON fevex_memories (namespace)",
    "CREATE TABLE IF NOT EXISTS fevex_memory_migrations ("
    " version integer PRIMARY KEY, name text NOT NULL, applied_at text NOT NULL)",
)
_DEFAULT_NAMESPACE_MOVED = (1, "memories of the former default namespace moved to ''")


class PostgresMemoryStore:
    """The memory store of a PostgreSQL database, given a libpq connection string."""

    def __init__(self, conninfo: str) -> None:
        self._conninfo = conninfo
        self._ready = False

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        connection = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
        if not self._ready:
            try:
                async with connection.transaction():
                    await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                    for statement in _SCHEMA:
                        await connection.execute(statement)
                    await _move_the_former_default_namespace(connection)
            except BaseException:
                # Failed or cancelled: nothing else holds the connection.
                await connection.close()
                raise
            self._ready = True
        return connection

    async def add(
        self, namespace: str, content: str, *, metadata: Mapping[str, Any] | None = None
    ) -> Memory:
        memory = Memory.new(namespace, content, metadata)
        async with await self._connect() as connection:
            await connection.execute(
                "INSERT INTO fevex_memories (id, namespace, content, metadata, created_at)"
                " VALUES (%s, %s, %s, %s::jsonb, %s)",
                (
                    memory.id,
                    namespace,
                    content,
                    json.dumps(dict(memory.metadata)),
                    memory.created_at,
                ),
            )
        return memory

    async def search(self, namespace: str, query: str, *, limit: int = 5) -> Sequence[Memory]:
        check_namespace(namespace)
        terms = search_terms(query)
        if not terms or limit < 1:
            return []
        # Terms hold only letters, digits and "_": quoted, they are plain lexemes.
        tsquery = " | ".join(f"'{term}':*" for term in terms)
        async with await self._connect() as connection:
            cursor = await connection.execute(
                "SELECT id, namespace, content, created_at, metadata FROM fevex_memories,"
                " to_tsquery('simple', %s) AS query"
                " WHERE namespace = %s AND search @@ query"
                " ORDER BY ts_rank(search, query) DESC, created_at DESC LIMIT %s",
                (tsquery, namespace, limit),
            )
            rows = await cursor.fetchall()
        return [Memory(row[0], row[1], row[2], row[3], row[4]) for row in rows]

    async def delete(self, namespace: str, memory_id: str) -> bool:
        check_namespace(namespace)
        check_memory_id(memory_id)
        async with await self._connect() as connection:
            cursor = await connection.execute(
                "DELETE FROM fevex_memories WHERE id = %s AND namespace = %s",
                (memory_id, namespace),
            )
            return cursor.rowcount > 0

    async def close(self) -> None:
        return None


async def _move_the_former_default_namespace(connection: psycopg.AsyncConnection[Any]) -> None:
    version, name = _DEFAULT_NAMESPACE_MOVED
    cursor = await connection.execute(
        "SELECT 1 FROM fevex_memory_migrations WHERE version = %s", (version,)
    )
    if await cursor.fetchone() is not None:
        return
    await connection.execute(
        "UPDATE fevex_memories SET namespace = %s WHERE namespace = %s",
        (DEFAULT_NAMESPACE, FORMER_DEFAULT_NAMESPACE),
    )
    await connection.execute(
        "INSERT INTO fevex_memory_migrations (version, name, applied_at) VALUES (%s, %s, %s)",
        (version, name, datetime.now(UTC).isoformat().replace("+00:00", "Z")),
    )


def open_postgres_memory_store(url: str, **options: Any) -> PostgresMemoryStore:
    """Open the memory store of a ``postgresql://`` (or ``postgresql+psycopg://``) URL."""
    engine_url = parse_store_url(url).engine_url.set(drivername="postgresql")
    return PostgresMemoryStore(engine_url.render_as_string(hide_password=False), **options)
