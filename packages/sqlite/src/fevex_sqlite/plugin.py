"""The ``sqlite`` entry point of the ``fevex`` plugin group: the ``sqlite`` run-store,
memory-store and record-store schemes, and its answers to ``fevex db`` and
``--store``/``--create`` on the command line.

Discovering plugins imports this module, so it imports neither SQLAlchemy nor sqlite3: the
factory does, when a ``sqlite:///`` store is actually opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fevex.plugins import Register, hookimpl

if TYPE_CHECKING:
    from fevex.plugins import CommandRegistry
    from fevex_sqlite.memory_store import SQLiteMemoryStore
    from fevex_sqlite.record_store import SQLiteRecordStore
    from fevex_sqlite.run_store import SQLiteRunStore

__all__ = [
    "fevex_register_commands",
    "fevex_register_memory_stores",
    "fevex_register_record_stores",
    "fevex_register_run_stores",
    "open_sqlite_memory",
    "open_sqlite_records",
    "open_sqlite_store",
]


def open_sqlite_store(url: str, **options: Any) -> SQLiteRunStore:
    """Open ``sqlite:///relative/runs.db`` or ``sqlite:////absolute/runs.db`` (also as
    ``sqlite+aiosqlite``, an alias kept for URLs written for SQLAlchemy's async driver).
    ``options`` are :class:`SQLiteRunStore` keyword arguments:
    ``busy_timeout``, ``clock`` and ``create``."""
    from fevex_sqlite.run_store import SQLiteRunStore

    return SQLiteRunStore(url, **options)


@hookimpl
def fevex_register_run_stores(register: Register) -> None:
    register("sqlite", open_sqlite_store)


def open_sqlite_memory(url: str, **options: Any) -> SQLiteMemoryStore:
    """Open the memory store of ``sqlite:///memory.db`` (it may be the run store's file)."""
    from fevex_sqlite.memory_store import open_sqlite_memory_store

    return open_sqlite_memory_store(url, **options)


@hookimpl
def fevex_register_memory_stores(register: Register) -> None:
    register("sqlite", open_sqlite_memory)


def open_sqlite_records(url: str, **options: Any) -> SQLiteRecordStore:
    """Open the record store of ``sqlite:///runs.db`` (the run store's file, as a rule)."""
    from fevex_sqlite.record_store import open_sqlite_record_store

    return open_sqlite_record_store(url, **options)


@hookimpl
def fevex_register_record_stores(register: Register) -> None:
    register("sqlite", open_sqlite_records)


@hookimpl
def fevex_register_commands(cli: CommandRegistry) -> None:
    from fevex_sqlite.commands import add_store_commands

    add_store_commands(cli)
