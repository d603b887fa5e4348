"""The record contract on PostgreSQL: one row of ``fevex_records`` per namespace and key.

The table comes with the run store's schema (migration 4, :mod:`fevex_postgres.migrations`):
``fevex db upgrade`` creates it, and until then every operation is ``SCHEMA_OUTDATED``.
A value is the compact JSON text :func:`~fevex.runtime.check_record_swap` made of it, kept
as it is in a ``json`` column (checked by the server, never rewritten); reads give the
driver's ``json.loads`` of it, a new object every time.

A swap is one statement in autocommit mode, so one transaction: a record's first write is
an ``INSERT ... ON CONFLICT DO NOTHING``, a later one an ``UPDATE ... WHERE revision =
expected``, both ``RETURNING`` what they wrote. Two processes swapping against one revision
queue on the row (or on the key's unique index), and the second, re-reading the row the
first committed, matches nothing; a row comes back only from a statement that committed,
so ``True`` is a receipt. ``updated_at`` is the database's clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg

from fevex.runtime import StoredRecord, check_record_key, check_record_swap
from fevex_postgres.migrations import (
    LATEST_VERSION,
    schema_outdated,
    schema_too_new,
    schema_version_of,
)
from fevex_postgres.store_setup import set_up_store

__all__ = ["PostgresRecordStore", "open_postgres_record_store"]

_NOW = """to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')"""
_READ = "SELECT revision, value, updated_at FROM fevex_records WHERE namespace = %s AND key = %s"
_CREATE = (
    "INSERT INTO fevex_records (namespace, key, revision, value, updated_at)"
    f" VALUES (%s, %s, 1, %s::json, {_NOW}) ON CONFLICT DO NOTHING RETURNING revision"
)
_REPLACE = (
    f"UPDATE fevex_records SET revision = revision + 1, value = %s::json, updated_at = {_NOW}"
    " WHERE namespace = %s AND key = %s AND revision = %s RETURNING revision"
)


class PostgresRecordStore:
    """A :class:`~fevex.runtime.RecordStore` on a PostgreSQL database that many processes
    share, usually the run store's.

    ``url`` and ``options`` are the run store's (:class:`~fevex_postgres.PostgresRunStore`):
    pool sizes and server-side timeouts. Opening connects to nothing. A failure of the
    server is a :class:`~fevex.FevexRunError` with the run store's codes (``STORE_ERROR``,
    ``STORE_UNAVAILABLE``, ``STORE_TIMEOUT``, ...), whose message never quotes the record.
    """

    def __init__(self, url: str, **options: Any) -> None:
        setup = set_up_store("PostgresRecordStore", url, options)
        self.url = setup.display_url
        self._pools = setup.pools
        self._schema_ready = False

    def __repr__(self) -> str:
        return f"PostgresRecordStore({self.url!r})"

    async def read(self, namespace: str, key: str) -> StoredRecord | None:
        check_record_key(namespace, key)
        await self._check_schema()
        async with self._pools.driver("read_record") as db:
            row = await (await db.execute(_READ, (namespace, key))).fetchone()
        if row is None:
            return None
        return StoredRecord(namespace, key, int(row[0]), row[1], str(row[2]))

    async def compare_and_swap(
        self, namespace: str, key: str, expected_revision: int, value: Mapping[str, Any]
    ) -> bool:
        namespace, key, expected, text = check_record_swap(namespace, key, expected_revision, value)
        await self._check_schema()
        async with self._pools.driver("compare_and_swap") as db:
            cursor: psycopg.AsyncCursor[Any]
            if expected == 0:
                cursor = await db.execute(_CREATE, (namespace, key, text))
            else:
                cursor = await db.execute(_REPLACE, (text, namespace, key, expected))
            written = await cursor.fetchone()
        return written is not None

    async def _check_schema(self) -> None:
        if self._schema_ready:
            return
        async with self._pools.driver("schema_version") as db:
            version = await schema_version_of(db)
        if version < LATEST_VERSION:
            raise schema_outdated(self.url, version)
        if version > LATEST_VERSION:
            raise schema_too_new(self.url, version)
        self._schema_ready = True

    async def close(self) -> None:
        await self._pools.close()


def open_postgres_record_store(url: str, **options: Any) -> PostgresRecordStore:
    """Open the record store of a ``postgresql://`` (or ``postgresql+psycopg://``) URL."""
    return PostgresRecordStore(url, **options)
