"""Hook specifications of the ``fevex`` plugin project.

Every hook but ``fevex_register_commands`` receives a ``register(name, factory)``
callback. Factories are called only when a user asks for what they registered, so they
import their SDK lazily and plugin discovery never imports a provider SDK. The commands
hook receives the typed :class:`~fevex.plugins.CommandRegistry` of the ``fevex`` command.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

from fevex.plugins.commands import CommandRegistry

__all__ = ["Register", "hookimpl", "hookspec"]

hookspec = pluggy.HookspecMarker("fevex")
hookimpl = pluggy.HookimplMarker("fevex")

Register = Callable[[str, Callable[..., Any]], None]


@hookspec
def fevex_register_models(register: Register) -> None:
    """Called once when plugins load. Register model providers:
    ``register("acme", create_acme_model)`` where ``create_acme_model(model_name: str,
    **options)`` returns a :class:`~fevex.models.ModelGateway`; ``"acme:large"`` then names
    a model. Returns nothing."""


@hookspec
def fevex_register_run_stores(register: Register) -> None:
    """Called once when plugins load. Register run-store URL schemes:
    ``register("acme", open_acme_store)`` where ``open_acme_store(url: str, **options)``
    returns a :class:`~fevex.runtime.RunStore` for ``acme://...`` URLs. Returns nothing."""


@hookspec
def fevex_register_memory_stores(register: Register) -> None:
    """Called once when plugins load. Register memory-store URL schemes:
    ``register("acme", open_acme_memory)`` where ``open_acme_memory(url: str, **options)``
    returns a :class:`~fevex.knowledge.MemoryStore` for ``acme://...`` URLs, as
    ``FEVEX_MEMORY_STORE`` or ``create_fevex(memory_store=...)`` name them. Returns nothing."""


@hookspec
def fevex_register_record_stores(register: Register) -> None:
    """Called once when plugins load. Register record-store URL schemes:
    ``register("acme", open_acme_records)`` where ``open_acme_records(url: str, **options)``
    returns a :class:`~fevex.runtime.RecordStore` for ``acme://...`` URLs. The app opens
    its record store from its run store's URL (``FEVEX_RUN_STORE`` included), so a run-store
    plugin registers its schemes here too. Returns nothing."""


@hookspec
def fevex_register_tool_providers(register: Register) -> None:
    """Called once when plugins load. Register tool providers:
    ``register("acme", create_acme_provider)`` where ``create_acme_provider(**options)``
    returns a :class:`~fevex.tools.ToolProvider`; ``open_tool_provider("acme", ...)`` calls
    it. Returns nothing."""


@hookspec
def fevex_register_trace_exporters(register: Register) -> None:
    """Called once when plugins load. Register trace-exporter factories by name, as
    ``FEVEX_TRACE_EXPORTERS`` refers to them. Returns nothing."""


@hookspec
def fevex_register_commands(cli: CommandRegistry) -> None:
    """Called when the ``fevex`` command starts. Add subcommands to ``cli`` (a
    :class:`fevex.plugins.CommandRegistry`) with ``cli.add(Command(name, help, handler,
    arguments))``, where ``handler(args) -> int`` runs the command; a store plugin answers
    ``fevex db`` for its URL schemes with ``cli.add_store_commands(schemes, status=...,
    upgrade=..., check=...)``. Returns nothing."""
