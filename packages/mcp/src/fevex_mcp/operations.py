"""What fevex-mcp asks of a connected server, whatever the transport: the paged lists
(tools, resources, resource templates, prompts), a tool call, a resource read and a
prompt.

Each function takes a connected SDK ``Client``; :mod:`fevex_mcp.session` (Streamable
HTTP, a session per run) and :mod:`fevex_mcp.stdio_session` (a process per run) supply
it. Importing this module imports the MCP SDK.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

try:
    from mcp import Client
    from mcp.types import CallToolResult, GetPromptResult, Implementation, ReadResourceResult
except ImportError as error:  # pragma: no cover - the distribution depends on mcp
    raise ImportError(
        "fevex-mcp needs the MCP SDK (the 'mcp' package, 2.x); install it with: "
        'pip install "fevex[mcp]"'
    ) from error

from fevex.tools import ToolContext
from fevex_mcp.__about__ import __version__
from fevex_mcp.errors import PROTOCOL_ERROR, run_error
from fevex_mcp.notifications import progress_reporter

__all__ = [
    "CLIENT_INFO",
    "MAX_PAGES",
    "Kind",
    "call_tool",
    "get_prompt",
    "list_all",
    "read_resource",
]

Kind = Literal["tools", "resources", "prompts", "resource_templates"]

# A server that keeps handing out cursors must not keep a discovery going forever.
MAX_PAGES = 100
CLIENT_INFO = Implementation(name="fevex-mcp", version=__version__)


async def list_all(client: Client, kind: Kind, where: str) -> list[Any]:
    """Every item of ``kind`` the server lists, following cursors up to ``MAX_PAGES``."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        if kind == "tools":
            tools = await client.list_tools(cursor=cursor)
            items.extend(tools.tools)
            cursor = tools.next_cursor
        elif kind == "resources":
            resources = await client.list_resources(cursor=cursor)
            items.extend(resources.resources)
            cursor = resources.next_cursor
        elif kind == "resource_templates":
            templates = await client.list_resource_templates(cursor=cursor)
            items.extend(templates.resource_templates)
            cursor = templates.next_cursor
        else:
            prompts = await client.list_prompts(cursor=cursor)
            items.extend(prompts.prompts)
            cursor = prompts.next_cursor
        if cursor is None:
            return items
    raise run_error(
        PROTOCOL_ERROR,
        f"The MCP server {where} listed its {kind} over more than {MAX_PAGES} pages; "
        "fevex stopped reading.",
    )


async def call_tool(
    client: Client,
    name: str,
    arguments: dict[str, Any],
    context: ToolContext | None = None,
    secrets: Iterable[str] = (),
) -> CallToolResult:
    """Call tool ``name``; with the fevex call's ``context``, its progress notifications
    and the log messages sent meanwhile reach the run (:mod:`fevex_mcp.notifications`)."""
    # The SDK would check a result's structured content against the server's own
    # outputSchema with Python's backtracking `re` (a hostile pattern could stall the
    # run), after listing the tools again to find that schema. A remote tool's output
    # is untrusted data whatever the server promises, so that check is skipped.
    client.session.validate_tool_result = _output_schema_unchecked  # type: ignore[method-assign]
    if context is None:
        return await client.call_tool(name, arguments)
    progress = progress_reporter(context, secrets)
    return await client.call_tool(name, arguments, progress_callback=progress)


async def read_resource(client: Client, uri: str) -> ReadResourceResult:
    return await client.read_resource(uri)


async def get_prompt(client: Client, name: str, arguments: dict[str, str]) -> GetPromptResult:
    return await client.get_prompt(name, arguments)


async def _output_schema_unchecked(name: str, result: CallToolResult) -> None:
    return None
