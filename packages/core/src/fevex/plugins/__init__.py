from fevex.plugins.commands import Command, CommandRegistry, StoreCommands
from fevex.plugins.discovery import (
    get_plugin_manager,
    list_plugins,
    open_run_store,
    open_tool_provider,
    open_trace_exporter,
    register_plugin,
    reset_plugins,
    resolve_model,
)
from fevex.plugins.hookspecs import Register, hookimpl, hookspec

__all__ = [
    "Command",
    "CommandRegistry",
    "Register",
    "StoreCommands",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
    "list_plugins",
    "open_run_store",
    "open_tool_provider",
    "open_trace_exporter",
    "register_plugin",
    "reset_plugins",
    "resolve_model",
]
