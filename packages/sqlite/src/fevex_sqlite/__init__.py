"""fevex-sqlite: a durable fevex run store on a local SQLite file.

The names that need SQLAlchemy load on first access, so that importing this package (as
plugin discovery does, through ``fevex_sqlite.plugin``) stays free of it.
"""

from typing import TYPE_CHECKING, Any

from fevex_sqlite.__about__ import __version__
from fevex_sqlite.plugin import open_sqlite_store

if TYPE_CHECKING:
    from fevex_sqlite.run_store import SQLiteRunStore, create_sqlite_run_store

__all__ = ["SQLiteRunStore", "__version__", "create_sqlite_run_store", "open_sqlite_store"]

_LAZY = {"SQLiteRunStore", "create_sqlite_run_store"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from fevex_sqlite import run_store

        return getattr(run_store, name)
    raise AttributeError(f"module 'fevex_sqlite' has no attribute {name!r}")
