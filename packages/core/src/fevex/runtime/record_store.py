"""The record contract: one JSON document per key, replaced whole by compare-and-swap.

The kits that manage data people change carefully (an agent family's versions, a
publication's official knowledge) keep one record per family or publication and change it
only with :meth:`RecordStore.compare_and_swap`: the new document is written completely,
against the revision it was decided on, or not at all. Only ``True`` is a receipt; ``False``
means another writer got there first and nothing was written.

A record's revision is ``1`` when it is first written and grows by one on every swap; a key
that has no record is at revision ``0``, so ``compare_and_swap(ns, key, 0, value)`` creates
it. The in-memory, SQLite and PostgreSQL stores refuse the same arguments with the same code
because they share :func:`check_record_key` and :func:`check_record_swap`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from fevex._ground.clock import utc_now
from fevex._ground.storable_text import is_storable
from fevex.errors import FevexRunError
from fevex.schemas.schema import ensure_json

__all__ = [
    "MAX_RECORD_CHARS",
    "InMemoryRecordStore",
    "RecordStore",
    "StoredRecord",
    "check_record_key",
    "check_record_swap",
]

# The largest record, in characters of its compact JSON: a family's versions or a
# publication's documents, never a log.
MAX_RECORD_CHARS = 4_000_000
_MAX_NAME_CHARS = 200


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A record as read: where it lives, its revision, its JSON document (a fresh copy for
    every read) and when it was last written (ISO 8601, UTC, the store's clock)."""

    namespace: str
    key: str
    revision: int
    value: dict[str, Any]
    updated_at: str


@runtime_checkable
class RecordStore(Protocol):
    """Whole-record storage with compare-and-swap, shared by every process of the app."""

    async def read(self, namespace: str, key: str) -> StoredRecord | None:
        """The record at ``key``, or ``None`` when it was never written."""
        ...

    async def compare_and_swap(
        self, namespace: str, key: str, expected_revision: int, value: Mapping[str, Any]
    ) -> bool:
        """Write ``value`` as revision ``expected_revision + 1`` if the record is still at
        ``expected_revision`` (``0``: it does not exist yet). ``True`` only when written."""
        ...

    async def close(self) -> None: ...


def check_record_key(namespace: Any, key: Any) -> tuple[str, str]:
    """A namespace (``""`` or text) and a non-empty key, each at most 200 storable
    characters; ``INVALID_ARGUMENT`` for anything else."""
    if not isinstance(namespace, str) or len(namespace) > _MAX_NAME_CHARS:
        raise _invalid("A record namespace must be text of at most 200 characters.")
    if not isinstance(key, str) or not key or len(key) > _MAX_NAME_CHARS:
        raise _invalid("A record key must be non-empty text of at most 200 characters.")
    if not is_storable(namespace) or not is_storable(key):
        raise _invalid("A record's namespace and key cannot hold NUL or lone surrogates.")
    return namespace, key


def check_record_swap(
    namespace: Any, key: Any, expected_revision: Any, value: Any
) -> tuple[str, str, int, str]:
    """The checked arguments of a swap, with the value as the compact JSON every store
    writes: a non-negative integer revision and a mapping of plain JSON whose text every
    store can keep, of at most :data:`MAX_RECORD_CHARS` characters. Checked in the order
    of the arguments, before any store is touched."""
    check_record_key(namespace, key)
    if (
        not isinstance(expected_revision, int)
        or isinstance(expected_revision, bool)
        or expected_revision < 0
    ):
        raise _invalid("A record's expected revision must be an integer of 0 or more.")
    if not isinstance(value, Mapping):
        raise _invalid("A record must be a mapping of JSON values.")
    try:
        ensure_json(dict(value))
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise _invalid(f"A record cannot be stored: {error}.") from None
    if not is_storable(text):
        raise _invalid("A record cannot hold NUL or lone surrogates.")
    if len(text) > MAX_RECORD_CHARS:
        raise _invalid(f"A record is limited to {MAX_RECORD_CHARS} characters of JSON.")
    return namespace, key, expected_revision, text


class InMemoryRecordStore:
    """Records kept in a dict as their JSON text, lost with the process."""

    def __init__(self) -> None:
        self._records: dict[tuple[str, str], tuple[int, str, str]] = {}
        self._lock = asyncio.Lock()

    async def read(self, namespace: str, key: str) -> StoredRecord | None:
        check_record_key(namespace, key)
        found = self._records.get((namespace, key))
        if found is None:
            return None
        revision, text, updated_at = found
        return StoredRecord(namespace, key, revision, json.loads(text), updated_at)

    async def compare_and_swap(
        self, namespace: str, key: str, expected_revision: int, value: Mapping[str, Any]
    ) -> bool:
        _, _, expected_revision, text = check_record_swap(namespace, key, expected_revision, value)
        async with self._lock:
            found = self._records.get((namespace, key))
            if (found[0] if found else 0) != expected_revision:
                return False
            self._records[(namespace, key)] = (expected_revision + 1, text, utc_now())
            return True

    async def close(self) -> None:
        return None


def _invalid(message: str) -> FevexRunError:
    return FevexRunError("INVALID_ARGUMENT", message)
