"""What a plugin's ``fevex_register_commands(cli)`` hook receives: the command registry of
the ``fevex`` command line, and the typed descriptions it takes.

A subcommand is a :class:`Command` (name, help, how to add its arguments, and the handler
that runs it); a store plugin answers ``fevex db`` and the ``--store`` check for its URL
schemes with :meth:`CommandRegistry.add_store_commands`. The ``fevex`` program makes the
registry around its own parser and runs the handler of the command the user chose.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Only annotations name argparse: loading plugins does not import it.
    import argparse

__all__ = ["Command", "CommandRegistry", "StoreCommands"]


@dataclass(frozen=True, slots=True)
class Command:
    """A subcommand ``fevex NAME``: ``help`` is its one-line help (and its description);
    ``arguments(parser)``, when given, adds its options to its
    :class:`argparse.ArgumentParser`; ``handler(args)`` runs it and returns the exit status.
    A :class:`~fevex.FevexError` the handler raises is printed as one line, with status 1."""

    name: str
    help: str
    handler: Callable[[argparse.Namespace], int]
    arguments: Callable[[argparse.ArgumentParser], None] | None = None


@dataclass(frozen=True, slots=True)
class StoreCommands:
    """What a store plugin answers for URLs of its schemes on the command line.

    ``status(url)`` prints the store's schema version and returns the exit status (0 when
    it is current); ``upgrade(url, create)`` applies the migrations the store lacks, creating
    it first only when ``create``; ``check(url, create)``, when given, raises a
    :class:`~fevex.FevexError` for a store that does not exist before a command opens it
    (``create`` is ``--create``)."""

    status: Callable[[str], int]
    upgrade: Callable[[str, bool], int]
    check: Callable[[str, bool], None] | None = None


class CommandRegistry:
    """What ``fevex_register_commands(cli)`` receives: ``cli.add(Command(...))`` adds a
    subcommand, ``cli.add_store_commands(...)`` answers ``fevex db`` for store URLs.

    ``plugin_name`` is the plugin whose hook is adding (set before each hook runs), and
    ``added`` lists ``(plugin_name, command)`` in the order they came, for ``fevex plugins``
    to show who added what."""

    def __init__(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        self._subparsers = subparsers
        self.plugin_name = "fevex"
        self.store_commands: dict[str, StoreCommands] = {}
        self.added: list[tuple[str, str]] = []

    def add(self, command: Command) -> None:
        """Add ``fevex NAME`` as ``command`` describes it."""
        parser = self.add_command(command.name, help=command.help)
        if command.arguments is not None:
            command.arguments(parser)
        parser.set_defaults(handler=command.handler)

    def add_command(self, name: str, *, help: str) -> argparse.ArgumentParser:
        """Add ``fevex NAME`` and return its parser, to be configured by hand: set its
        ``handler`` default with ``parser.set_defaults(handler=function)``, where
        ``function(args) -> int`` runs it. :meth:`add` does this from a :class:`Command`."""
        parser = self._subparsers.add_parser(name, help=help, description=help)
        self.added.append((self.plugin_name, name))
        return parser

    def add_store_commands(
        self,
        schemes: Sequence[str],
        *,
        status: Callable[[str], int],
        upgrade: Callable[[str, bool], int],
        check: Callable[[str, bool], None] | None = None,
    ) -> None:
        """Answer ``fevex db status|upgrade --store URL`` for URLs of ``schemes`` (looked up
        like run-store schemes: whole, then the part before ``+``), and check such a URL
        before ``recover`` or ``worker`` opens it; see :class:`StoreCommands`."""
        for scheme in schemes:
            self.store_commands[scheme.lower()] = StoreCommands(status, upgrade, check)
        self.added.append((self.plugin_name, "db"))
