"""``--store URL`` and ``--create``: which run store a command opens, and the store
plugin that answers for its URL scheme."""

from __future__ import annotations

import argparse
import os
import re

from fevex.plugins.commands import StoreCommands
from fevex.plugins.discovery import run_store_factory

__all__ = ["add_store_arguments", "check_store", "store_commands_for", "store_url"]

SCHEME = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):")


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        metavar="URL",
        help="run-store URL, set as FEVEX_RUN_STORE before the app loads; an app that sets "
        "run_store= itself must set this same URL, else the command is refused "
        "(STORE_MISMATCH, naming both stores)",
    )
    parser.add_argument(
        "--create",
        action="store_true",
        help="create the store when it does not exist (a SQLite file); without it, a "
        "URL naming a missing file is refused, so that a misspelt path is not a new store",
    )


def store_url(args: argparse.Namespace) -> str | None:
    url: str | None = args.store or os.environ.get("FEVEX_RUN_STORE")
    return url


def store_commands_for(args: argparse.Namespace, url: str) -> StoreCommands | None:
    """What the store plugin of ``url``'s scheme answers, looked up like run-store schemes:
    whole, then the part before ``+``."""
    commands: dict[str, StoreCommands] = getattr(args, "store_commands", {})
    match = SCHEME.match(url)
    if match is None:
        return None
    scheme = match["scheme"].lower()
    return commands.get(scheme) or commands.get(scheme.partition("+")[0])


def check_store(args: argparse.Namespace) -> None:
    """Before a command opens the store: refuse a URL no loaded plugin serves (rather than
    let the app's import fail on it), and let the plugin of its scheme refuse a store that
    does not exist (a misspelt SQLite path) unless ``--create``."""
    url = store_url(args)
    if not url:
        return
    run_store_factory(url)
    commands = store_commands_for(args, url)
    if commands is not None and commands.check is not None:
        commands.check(url, args.create)
