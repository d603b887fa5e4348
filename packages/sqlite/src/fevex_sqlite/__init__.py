"""fevex-sqlite: a durable fevex run store (and record store) on a local SQLite file.

The names that need SQLAlchemy load on first access, so that importing this package (as
plugin discovery does, through ``fevex_sqlite.plugin``) stays free of it.
"""

from typing import TYPE_CHECKING, Any

from fevex_sqlite.__about__ import __version__
from fevex_sqlite.plugin import open_sqlite_store

if TYPE_CHECKING:
    from fevex_sqlite.record_store import SQLiteRecordStore
    from fevex_sqlite.run_store import SQLiteRunStore, create_sqlite_run_store

__all__ = [
    "SQLiteRecordStore",
    "SQLiteRunStore",
    "__version__",
    "create_sqlite_run_store",
    "open_sqlite_store",
]

_LAZY = {"SQLiteRunStore", "create_sqlite_run_store"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from fevex_sqlite import run_store

        return getattr(run_store, name)
    if name == "SQLiteRecordStore":
        from fevex_sqlite import record_store

        return record_store.SQLiteRecordStore
    raise AttributeError(f"module 'fevex_sqlite' has no attribute {name!r}")
