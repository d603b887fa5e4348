"""The ``fevex`` program: its parser, built from the core's commands and every plugin's,
and ``main``, which runs the command the user chose.

Arguments are checked by the parser (a bad one exits with status 2 and one line), a fevex
error is one line and status 1, and Ctrl-C is one line and status 130: never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from fevex.__about__ import __version__
from fevex.cli.db_command import add_db_command
from fevex.cli.eval_command import EVAL
from fevex.cli.info_commands import PLUGINS, VERSION
from fevex.cli.recover_command import RECOVER
from fevex.cli.serve_command import SERVE
from fevex.cli.worker_command import WORKER
from fevex.errors import FevexError
from fevex.plugins.commands import CommandRegistry
from fevex.plugins.discovery import add_plugin_commands

__all__ = ["build_parser", "main"]

# In the order ``fevex --help`` lists them, before the plugins' commands and ``db``.
CORE_COMMANDS = (PLUGINS, VERSION, RECOVER, WORKER, EVAL, SERVE)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fevex", description="The fevex agent runtime.")
    parser.add_argument("--version", action="version", version=f"fevex {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    registry = CommandRegistry(subparsers)
    for command in CORE_COMMANDS:
        registry.add(command)
    add_plugin_commands(registry)
    add_db_command(subparsers, list(registry.store_commands))
    parser.set_defaults(store_commands=registry.store_commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
        if handler is None:
            parser.print_help()
            return 2
        return handler(args)
    except FevexError as error:
        print(f"fevex: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # Ctrl-C is how a user stops a watcher: one line and the shell's status for SIGINT.
        print("fevex: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of stdout went away (`fevex plugins | head`): nothing is wrong, and
        # nothing more can be written. Python's own flush at exit would fail again, so
        # stdout is pointed at /dev/null first; the status is the shell's for SIGPIPE.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
