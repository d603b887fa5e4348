"""``fevex db`` for PostgreSQL run stores: explicit schema migrations.

The core's ``fevex db`` command hands a ``postgresql://`` (or ``postgres://``) URL to this
module: ``fevex db upgrade --store URL`` applies the migrations the database lacks and
``fevex db status --store URL`` reports its version; ``--store`` defaults to
``FEVEX_RUN_STORE``. ``--create`` does not apply: the database itself must exist, and
``upgrade`` creates the tables. Nothing heavy is imported until a command runs.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fevex.plugins import CommandRegistry
    from fevex_postgres.migrations import SchemaUpgrade

__all__ = ["add_db_command"]


def add_db_command(cli: CommandRegistry) -> None:
    cli.add_store_commands(("postgresql", "postgres"), status=_status, upgrade=_upgrade)


def _upgrade(url: str, create: bool) -> int:
    from fevex_postgres.postgres_run_store import PostgresRunStore

    store = PostgresRunStore(url)

    async def upgrade() -> SchemaUpgrade:
        try:
            return await store.upgrade_schema()
        finally:
            await store.close()

    done = asyncio.run(upgrade())
    if done.applied:
        applied = ", ".join(str(version) for version in done.applied)
        print(
            f"Upgraded {store.url} from schema version {done.previous_version} to "
            f"{done.version} (applied {applied})."
        )
    else:
        print(f"{store.url} is up to date (schema version {done.version}).")
    return 0


def _status(url: str) -> int:
    from fevex_postgres.migrations import LATEST_VERSION
    from fevex_postgres.postgres_run_store import PostgresRunStore

    store = PostgresRunStore(url)

    async def read() -> int:
        try:
            return await store.schema_version()
        finally:
            await store.close()

    version = asyncio.run(read())
    state = "up to date" if version == LATEST_VERSION else "needs: fevex db upgrade"
    if version > LATEST_VERSION:
        state = "newer than this fevex-postgres"
    print(f"{store.url}: schema version {version}, this code needs {LATEST_VERSION} ({state}).")
    return 0 if version == LATEST_VERSION else 1
