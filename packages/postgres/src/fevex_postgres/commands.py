"""``fevex db``: explicit schema migrations for PostgreSQL run stores.

``fevex db upgrade --store URL`` applies the migrations the database lacks and
``fevex db status --store URL`` reports its version; ``--store`` defaults to
``FEVEX_RUN_STORE``. Nothing heavy is imported until a command runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import TYPE_CHECKING

from fevex.errors import FevexConfigurationError

if TYPE_CHECKING:
    from fevex.cli import CommandRegistry
    from fevex_postgres.migrations import SchemaUpgrade

__all__ = ["add_db_command"]


def add_db_command(cli: CommandRegistry) -> None:
    parser = cli.add_command("db", help="Manage the schema of a PostgreSQL run store.")
    actions = parser.add_subparsers(dest="db_action", metavar="ACTION", required=True)
    upgrade = actions.add_parser(
        "upgrade",
        help="Apply the schema migrations the database lacks (idempotent).",
        description="Apply the schema migrations the database lacks, in one transaction. "
        "Safe to run again and from several processes at once.",
    )
    status = actions.add_parser(
        "status",
        help="Print the database's schema version and the version this code needs.",
        description="Print the database's schema version and the version this code needs.",
    )
    for action in (upgrade, status):
        action.add_argument(
            "--store",
            metavar="URL",
            help="postgresql+psycopg://user@host:5432/database (default: $FEVEX_RUN_STORE); "
            "a password may come from PGPASSWORD or ~/.pgpass instead of the URL",
        )
    upgrade.set_defaults(handler=_upgrade)
    status.set_defaults(handler=_status)


def _store_url(args: argparse.Namespace) -> str:
    url: str | None = args.store or os.environ.get("FEVEX_RUN_STORE")
    if not url:
        raise FevexConfigurationError(
            "INVALID_CONFIG", "Name the database with --store URL or FEVEX_RUN_STORE."
        )
    return url


def _upgrade(args: argparse.Namespace) -> int:
    from fevex_postgres.postgres_run_store import PostgresRunStore

    store = PostgresRunStore(_store_url(args))

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


def _status(args: argparse.Namespace) -> int:
    from fevex_postgres.migrations import LATEST_VERSION
    from fevex_postgres.postgres_run_store import PostgresRunStore

    store = PostgresRunStore(_store_url(args))

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
