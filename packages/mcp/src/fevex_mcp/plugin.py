"""The ``mcp`` entry point of the ``fevex`` plugin group.

Discovering plugins imports this module, so it imports no MCP SDK and no HTTP client:
``create_mcp_tool_provider`` does, when a provider is actually created.
"""

from __future__ import annotations

from fevex.plugins import Register, hookimpl
from fevex_mcp.provider import create_mcp_tool_provider

__all__ = ["fevex_register_tool_providers"]


@hookimpl
def fevex_register_tool_providers(register: Register) -> None:
    register("mcp", create_mcp_tool_provider)
