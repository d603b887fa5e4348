"""The run store and the record store an app is created with, from what ``create_fevex``
was given and from ``FEVEX_RUN_STORE``.

The record store follows the run store, so that one setting puts runs and records in one
database: a run store URL (given, or ``FEVEX_RUN_STORE``) opens the record store its scheme's
plugin registers on the same URL; an in-memory run store, given or by default, gets an
in-memory record store; a run store object with ``open_record_store()`` (the SQLite and
PostgreSQL plugins' stores) gives its own. Any other run store names no record store: the
app then gets one that refuses every read and swap with ``RECORD_STORE_MISSING`` (only a kit
that keeps records uses it, so an app without one starts as before), and
``create_fevex(record_store=...)`` says which to use. Records are never silently kept in
memory beside a durable run store, where another process could not see them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from fevex.errors import FevexConfigurationError
from fevex.runtime.in_memory_run_store import InMemoryRunStore
from fevex.runtime.record_store import InMemoryRecordStore, RecordStore, StoredRecord
from fevex.runtime.run_store import RunStore, missing_store_methods

__all__ = ["open_app_record_store", "open_app_run_store", "run_store_url"]

_RECORD_METHODS = ("read", "compare_and_swap", "close")


def open_app_run_store(run_store: RunStore | str | None) -> RunStore:
    """The store ``run_store`` is or names (``FEVEX_RUN_STORE`` when ``None``, else an
    in-memory store), refused unless it implements the whole run-store contract."""
    if run_store is None and not os.environ.get("FEVEX_RUN_STORE"):
        store: RunStore = InMemoryRunStore()
    elif run_store is None or isinstance(run_store, str):
        # Imported here: plugin discovery (pluggy, entry points) is paid only when used.
        from fevex.plugins.discovery import open_run_store

        store = open_run_store(run_store or os.environ["FEVEX_RUN_STORE"])
    else:
        store = run_store
    missing = missing_store_methods(store)
    if len(missing) == len(missing_store_methods(None)):
        raise FevexConfigurationError(
            "INVALID_CONFIG", f"run_store must be a RunStore or a store URL, not {run_store!r}."
        )
    if missing:
        # Refused now, by name: a store that lacks a method must never fail mid-run.
        raise FevexConfigurationError(
            "INVALID_CONFIG",
            f"The run store {type(store).__name__} lacks {', '.join(missing)} of the run-store "
            "contract; upgrade the store's plugin or implement them.",
        )
    return store


def run_store_url(run_store: RunStore | str | None) -> str | None:
    """The URL the app's run store is opened from: ``run_store`` when it is one, else
    ``FEVEX_RUN_STORE`` when ``run_store`` is ``None``; ``None`` for a store object, or for
    the in-memory store of an app given nothing."""
    if run_store is None:
        return os.environ.get("FEVEX_RUN_STORE") or None
    return run_store if isinstance(run_store, str) else None


def open_app_record_store(
    record_store: RecordStore | str | None, run_store: RunStore | str | None, opened: RunStore
) -> RecordStore:
    """The app's record store: ``record_store`` (a store or a URL) when given, else the one
    that follows the run store (``run_store`` as given, ``opened`` as opened)."""
    if isinstance(record_store, str):
        from fevex.plugins.discovery import open_record_store

        return open_record_store(record_store)
    if record_store is not None:
        missing = [
            name for name in _RECORD_METHODS if not callable(getattr(record_store, name, None))
        ]
        if missing:
            raise FevexConfigurationError(
                "INVALID_CONFIG",
                f"record_store must be a RecordStore or a store URL; "
                f"{type(record_store).__name__} lacks {', '.join(missing)}.",
            )
        return record_store
    url = run_store_url(run_store)
    if url is not None:
        return _record_store_of_url(url)
    if isinstance(opened, InMemoryRunStore):
        return InMemoryRecordStore()
    opener = getattr(opened, "open_record_store", None)
    if callable(opener):
        store: RecordStore = opener()
        return store
    return MissingRecordStore(f"the run store {type(opened).__name__} names no record store")


def _record_store_of_url(url: str) -> RecordStore:
    from fevex.plugins.discovery import record_store_factory

    try:
        factory = record_store_factory(url)
    except FevexConfigurationError as error:
        if error.code != "MISSING_PLUGIN":
            raise
        # The URL is not repeated: it may carry a password.
        scheme = url.partition(":")[0]
        return MissingRecordStore(f"no plugin registers a record store for {scheme!r} URLs")
    store: RecordStore = factory(url)
    return store


class MissingRecordStore:
    """The record store of an app whose run store names none: every read and swap is
    ``RECORD_STORE_MISSING``, saying why and what to pass."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"MissingRecordStore({self.reason!r})"

    async def read(self, namespace: str, key: str) -> StoredRecord | None:
        raise self._missing()

    async def compare_and_swap(
        self, namespace: str, key: str, expected_revision: int, value: Mapping[str, Any]
    ) -> bool:
        raise self._missing()

    async def close(self) -> None:
        return None

    def _missing(self) -> FevexConfigurationError:
        return FevexConfigurationError(
            "RECORD_STORE_MISSING",
            f"This app has no record store: {self.reason}. Pass "
            "create_fevex(record_store=...) a RecordStore or a store URL "
            "('sqlite:///records.db', 'postgresql://...', 'memory://').",
            category="store",
        )
