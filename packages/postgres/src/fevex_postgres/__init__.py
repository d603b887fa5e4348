"""fevex-postgres: a PostgreSQL run store for fevex.

The store and its helpers load on first use, so ``import fevex_postgres`` (which plugin
discovery does through ``fevex_postgres.plugin``) imports neither SQLAlchemy nor psycopg.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from fevex_postgres.__about__ import __version__

if TYPE_CHECKING:
    from fevex_postgres.migrations import LATEST_VERSION, SchemaUpgrade
    from fevex_postgres.postgres_run_store import PostgresRunStore, create_postgres_run_store
    from fevex_postgres.record_store import PostgresRecordStore
    from fevex_postgres.timeouts import SessionTimeouts

__all__ = [
    "LATEST_VERSION",
    "PostgresRecordStore",
    "PostgresRunStore",
    "SchemaUpgrade",
    "SessionTimeouts",
    "__version__",
    "create_postgres_run_store",
]

_LAZY = {
    "LATEST_VERSION": "fevex_postgres.migrations",
    "SchemaUpgrade": "fevex_postgres.migrations",
    "PostgresRunStore": "fevex_postgres.postgres_run_store",
    "PostgresRecordStore": "fevex_postgres.record_store",
    "create_postgres_run_store": "fevex_postgres.postgres_run_store",
    "SessionTimeouts": "fevex_postgres.timeouts",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fevex_postgres' has no attribute {name!r}")
    return getattr(import_module(module), name)
