"""The ``fevex`` entry point: registers the ``postgresql`` run-store, memory-store and
record-store schemes and the ``fevex db`` command.

Importing this module imports neither SQLAlchemy nor psycopg: plugin discovery stays
cheap, and the driver loads when a store is opened or a ``db`` command runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fevex.plugins import hookimpl

if TYPE_CHECKING:
    from fevex.plugins import CommandRegistry, Register
    from fevex_postgres.memory_store import PostgresMemoryStore
    from fevex_postgres.postgres_run_store import PostgresRunStore
    from fevex_postgres.record_store import PostgresRecordStore

__all__ = [
    "fevex_register_commands",
    "fevex_register_memory_stores",
    "fevex_register_record_stores",
    "fevex_register_run_stores",
    "open_postgres_memory",
    "open_postgres_records",
    "open_postgres_store",
]


def open_postgres_store(url: str, **options: Any) -> PostgresRunStore:
    """Open a :class:`~fevex_postgres.PostgresRunStore` for a ``postgresql://`` URL."""
    from fevex_postgres.postgres_run_store import create_postgres_run_store

    return create_postgres_run_store(url, **options)


@hookimpl
def fevex_register_run_stores(register: Register) -> None:
    # The core looks a URL's scheme up whole, then by the part before "+", so
    # "postgresql" also serves postgresql+psycopg:// URLs.
    register("postgresql", open_postgres_store)
    register("postgres", open_postgres_store)


def open_postgres_memory(url: str, **options: Any) -> PostgresMemoryStore:
    """Open the :class:`~fevex_postgres.memory_store.PostgresMemoryStore` of a URL."""
    from fevex_postgres.memory_store import open_postgres_memory_store

    return open_postgres_memory_store(url, **options)


@hookimpl
def fevex_register_memory_stores(register: Register) -> None:
    register("postgresql", open_postgres_memory)
    register("postgres", open_postgres_memory)


def open_postgres_records(url: str, **options: Any) -> PostgresRecordStore:
    """Open the :class:`~fevex_postgres.record_store.PostgresRecordStore` of a URL."""
    from fevex_postgres.record_store import open_postgres_record_store

    return open_postgres_record_store(url, **options)


@hookimpl
def fevex_register_record_stores(register: Register) -> None:
    register("postgresql", open_postgres_records)
    register("postgres", open_postgres_records)


@hookimpl
def fevex_register_commands(cli: CommandRegistry) -> None:
    from fevex_postgres.commands import add_db_command

    add_db_command(cli)
