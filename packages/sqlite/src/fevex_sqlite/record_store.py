"""The record contract on a SQLite file: one row of ``fevex_records`` per namespace and key.

The table comes with the run store's schema (migration 5, :mod:`fevex_sqlite.schema`), so a
file serves runs and records alike and opening either store migrates it. A record's value
is the compact JSON text :func:`~fevex.runtime.check_record_swap` made of it, on the
caller's thread, before the store is touched; reads give ``json.loads`` of it, a new
object every time.

A swap is one transaction begun ``IMMEDIATE`` on the store's thread
(:mod:`fevex_sqlite.transaction_thread`): it holds the file's write lock from the read of
the revision to the commit, so two processes swapping against one revision cannot both
pass the check, and ``True`` is returned only once the commit has returned.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, text

from fevex.errors import FevexConfigurationError
from fevex.runtime import StoredRecord, check_record_key, check_record_swap
from fevex_sqlite.location import DEFAULT_BUSY_TIMEOUT, parse_location
from fevex_sqlite.schema import prepare_database
from fevex_sqlite.transaction_thread import TransactionThread

__all__ = ["SQLiteRecordStore", "open_sqlite_record_store"]

_READ = text(
    "SELECT revision, value, updated_at FROM fevex_records WHERE namespace = :ns AND key = :key"
)
_REVISION = text("SELECT revision FROM fevex_records WHERE namespace = :ns AND key = :key")
_INSERT = text(
    "INSERT INTO fevex_records (namespace, key, revision, value, updated_at)"
    " VALUES (:ns, :key, 1, :value, :now)"
)
_UPDATE = text(
    "UPDATE fevex_records SET revision = :revision + 1, value = :value, updated_at = :now"
    " WHERE namespace = :ns AND key = :key AND revision = :revision"
)


class SQLiteRecordStore:
    """A :class:`~fevex.runtime.RecordStore` on a SQLite file that several processes of one
    machine may share, usually the run store's.

    ``path`` is a file path or a ``sqlite:///`` URL, read as the run store reads it
    (``?busy_timeout=`` and ``?create=false`` included); the file and its schema are created
    or migrated on open. A failure of SQLite is a :class:`~fevex.FevexRunError`
    (``STORE_BUSY``, ``STORE_FULL``, ``STORE_READ_ONLY`` or ``STORE_ERROR``) whose message
    never quotes the SQL or the record.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float | None = None,
        create: bool | None = None,
    ) -> None:
        location = parse_location(path)
        if create is None:
            create = True if location.create is None else location.create
        if busy_timeout is None:
            busy_timeout = location.busy_timeout
        if busy_timeout is None:
            busy_timeout = DEFAULT_BUSY_TIMEOUT
        if (
            isinstance(busy_timeout, bool)
            or not isinstance(busy_timeout, int | float)
            or not (math.isfinite(busy_timeout) and busy_timeout >= 0)
        ):
            raise FevexConfigurationError(
                "INVALID_CONFIG",
                f"busy_timeout must be a non-negative number of seconds, not {busy_timeout!r}.",
                category="store",
            )
        self.path = location.path
        self.busy_timeout = float(busy_timeout)
        prepare_database(self.path, busy_timeout=self.busy_timeout, create=create)
        self._transactions = TransactionThread(self.path, busy_timeout=self.busy_timeout)

    def __repr__(self) -> str:
        return f"SQLiteRecordStore({str(self.path)!r})"

    async def read(self, namespace: str, key: str) -> StoredRecord | None:
        check_record_key(namespace, key)
        found = await self._transactions.read("read_record", _read, namespace, key)
        if found is None:
            return None
        revision, value, updated_at = found
        return StoredRecord(namespace, key, revision, json.loads(value), updated_at)

    async def compare_and_swap(
        self, namespace: str, key: str, expected_revision: int, value: Mapping[str, Any]
    ) -> bool:
        checked = check_record_swap(namespace, key, expected_revision, value)
        return await self._transactions.write("compare_and_swap", _swap, *checked)

    async def close(self) -> None:
        await self._transactions.close()


def _read(connection: Connection, namespace: str, key: str) -> tuple[int, str, str] | None:
    row = connection.execute(_READ, {"ns": namespace, "key": key}).first()
    return None if row is None else (int(row[0]), str(row[1]), str(row[2]))


def _swap(
    connection: Connection, namespace: str, key: str, expected_revision: int, value: str
) -> bool:
    # Inside BEGIN IMMEDIATE: no other writer can move the revision read here.
    stored = connection.execute(_REVISION, {"ns": namespace, "key": key}).scalar()
    if (stored or 0) != expected_revision:
        return False
    row = {"ns": namespace, "key": key, "value": value, "now": _now()}
    if stored is None:
        connection.execute(_INSERT, row)
    else:
        connection.execute(_UPDATE, {**row, "revision": expected_revision})
    return True


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def open_sqlite_record_store(url: str, **options: Any) -> SQLiteRecordStore:
    """Open the record store of ``sqlite:///records.db`` (usually the run store's file)."""
    return SQLiteRecordStore(url, **options)
