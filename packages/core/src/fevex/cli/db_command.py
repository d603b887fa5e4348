"""``fevex db status|upgrade``: a run store's schema, managed by the store plugin of its
URL's scheme. The command is present without any store plugin too, so that it can say
which plugin is missing."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from fevex._ground.names import did_you_mean
from fevex.cli.store_option import SCHEME, store_commands_for, store_url
from fevex.errors import FevexConfigurationError
from fevex.plugins.commands import StoreCommands
from fevex.plugins.discovery import run_store_factory

__all__ = ["add_db_command"]


def add_db_command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], schemes: Sequence[str]
) -> None:
    """Add ``fevex db``, naming the ``schemes`` the loaded store plugins serve."""
    described = ", ".join(sorted(schemes)) or "none (fevex-sqlite and fevex-postgres add theirs)"
    parser = subparsers.add_parser(
        "db",
        help="Manage the schema of a run store (status, upgrade).",
        description=f"Manage the schema of a run store; installed plugins serve: {described}.",
    )
    actions = parser.add_subparsers(dest="db_action", metavar="{status,upgrade}", required=True)
    upgrade = actions.add_parser(
        "upgrade",
        help="Apply the schema migrations the store lacks (idempotent).",
        description="Apply the schema migrations the store lacks, in one transaction. "
        "Safe to run again and from several processes at once.",
    )
    status = actions.add_parser(
        "status",
        help="Print the store's schema version and the version this code needs.",
        description="Print the store's schema version and the version this code needs; "
        "exit status 0 when they match, 1 otherwise.",
    )
    for action in (upgrade, status):
        action.add_argument(
            "--store",
            metavar="URL",
            help=f"the store's URL (default: $FEVEX_RUN_STORE); schemes: {described}. "
            "A PostgreSQL password may come from PGPASSWORD or ~/.pgpass instead of the URL",
        )
        action.set_defaults(handler=_db, create=False)
    upgrade.add_argument(
        "--create", action="store_true", help="create the store if it does not exist (SQLite)"
    )


def _db(args: argparse.Namespace) -> int:
    url = store_url(args)
    if not url:
        raise FevexConfigurationError(
            "INVALID_CONFIG", "Name the store with --store URL or FEVEX_RUN_STORE."
        )
    commands = store_commands_for(args, url)
    if commands is None:
        raise _unmanaged_scheme(url, args.store_commands)
    if args.db_action == "status":
        return commands.status(url)
    return commands.upgrade(url, args.create)


def _unmanaged_scheme(url: str, known: dict[str, StoreCommands]) -> FevexConfigurationError:
    """Why no loaded plugin manages ``url``'s schema: the error to raise, or, with no store
    plugin loaded at all, the ``MISSING_PLUGIN`` error its scheme raises here."""
    if not known:
        # No store plugin is loaded at all (fevex-sqlite left uninstalled): the URL's
        # is MISSING_PLUGIN, with the install that brings it.
        run_store_factory(url)
    match = SCHEME.match(url)
    scheme = match["scheme"] if match else url
    managed = (
        f"the schemes {', '.join(sorted(known))}"
        if known
        else "no scheme: no loaded plugin manages a store's schema (fevex-sqlite and "
        "fevex-postgres do)"
    )
    return FevexConfigurationError(
        "INVALID_ARGUMENT",
        f"fevex db manages stores of {managed}, not {scheme!r}."
        f"{did_you_mean(scheme.lower(), known)} (An in-memory store has no schema; "
        "another store's plugin must be installed to manage its schema.)",
        details={"scheme": scheme},
    )
