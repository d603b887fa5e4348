"""The ``fevex`` command. Plugins add subcommands through ``fevex_register_commands`` (see
:class:`fevex.plugins.CommandRegistry`), and store plugins answer ``fevex db`` and
``--store`` checks for their own URL schemes."""

from fevex._internal.hosting.app_reference import load_reference
from fevex._internal.hosting.worker_lanes import work_lanes
from fevex.cli.program import build_parser as build_parser
from fevex.cli.program import main
from fevex.plugins.commands import CommandRegistry, StoreCommands

__all__ = ["CommandRegistry", "StoreCommands", "load_reference", "main", "work_lanes"]
