"""``fevex plugins`` and ``fevex version``: what this installation is."""

from __future__ import annotations

import argparse
import json

from fevex.__about__ import __version__
from fevex.plugins.commands import Command
from fevex.plugins.discovery import list_plugins

__all__ = []


def _plugins(args: argparse.Namespace) -> int:
    print(json.dumps(list_plugins(), indent=2))
    return 0


def _version(args: argparse.Namespace) -> int:
    print(__version__)
    return 0


PLUGINS = Command(
    name="plugins", help="List loaded plugins and what they registered, as JSON.", handler=_plugins
)
VERSION = Command(name="version", help="Print the fevex version.", handler=_version)
