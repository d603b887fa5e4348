"""The ``openapi`` entry point of the ``fevex`` plugin group.

Discovering plugins imports this module; it registers the factory and imports no HTTP
client: httpx2 is imported by the first operation call.
"""

from __future__ import annotations

from fevex.plugins import Register, hookimpl
from fevex_openapi.provider import create_openapi_tool_provider

__all__ = ["fevex_register_tool_providers"]


@hookimpl
def fevex_register_tool_providers(register: Register) -> None:
    register("openapi", create_openapi_tool_provider)
