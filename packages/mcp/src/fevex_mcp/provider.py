"""``create_mcp_tool_provider``: an MCP server's tools as a fevex tool provider.

What this module decides is what the provider accepts: an ``http(s)`` URL of a
Streamable HTTP endpoint, headers, and nothing fevex-mcp does not support (stdio
commands, legacy HTTP+SSE, resources, prompts), each refused with its own code when the
provider is created. It imports the MCP SDK only inside the factory and the operations,
so that plugin discovery stays free of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fevex.tools import ConnectionContext, RemoteTool, ToolContext
from fevex_mcp.endpoint import STDIO_HINT, parse_endpoint
from fevex_mcp.errors import (
    ARGUMENTS_INVALID,
    FEATURE_UNSUPPORTED,
    HEADERS_INVALID,
    TRANSPORT_UNSUPPORTED,
    configuration_error,
    run_error,
)
from fevex_mcp.headers import HeaderIdentity, HeadersSource, check_header_map, resolve_headers

__all__ = ["MCPToolProvider", "create_mcp_tool_provider"]

SUPPORTED_TRANSPORT = "streamable-http"
SUPPORTED_FEATURES = frozenset({"tools"})


class MCPToolProvider:
    """The tools of one MCP server, for one identity.

    Each ``list_tools`` and ``call_tool`` opens its own session with the headers
    resolved for that caller and closes it before returning; the provider keeps no
    catalogue. It keeps one thing: the digest of the first header set it resolved, so
    that a different set (another user, a rotated credential) is refused with
    ``MCP_IDENTITY_CHANGED`` instead of being served from the same provider.
    """

    def __init__(self, url: str, headers: HeadersSource = None) -> None:
        self._endpoint = parse_endpoint(url)
        if isinstance(headers, Mapping):
            headers = check_header_map(headers)
        elif headers is not None and not callable(headers):
            raise configuration_error(
                HEADERS_INVALID,
                "MCP provider: headers must be a mapping, or a callable that receives the "
                f"caller's context and returns one (got {type(headers).__name__}).",
            )
        self._headers = headers
        self._identity = HeaderIdentity()

    @property
    def url(self) -> str:
        """The server's URL, without any query string (which may carry a token)."""
        return self._endpoint.display

    async def list_tools(self, context: ConnectionContext) -> Sequence[RemoteTool]:
        """Discover the server's tools as it describes them. fevex treats every field as
        untrusted: it bounds and labels descriptions, pins schemas and ignores hints."""
        from fevex_mcp import session

        headers = await self._bound_headers(context)
        tools = await session.list_tools(self._endpoint, headers)
        return [
            RemoteTool(
                name=tool.name,
                description=tool.description or "",
                input_schema=tool.input_schema,
                annotations=(
                    tool.annotations.model_dump(by_alias=True, exclude_none=True, mode="json")
                    if tool.annotations is not None
                    else {}
                ),
            )
            for tool in tools
        ]

    async def call_tool(self, name: str, input: Any, context: ToolContext) -> Any:
        """Call ``name`` with ``input`` and return the result's JSON value."""
        from fevex_mcp import session
        from fevex_mcp.results import result_value

        if not isinstance(input, Mapping):
            raise run_error(
                ARGUMENTS_INVALID,
                f"Tool {context.tool_name}: MCP tools take a JSON object as input, not "
                f"{type(input).__name__}.",
                tool_name=context.tool_name,
            )
        headers = await self._bound_headers(context)
        result = await session.call_tool(self._endpoint, headers, name, dict(input))
        return result_value(result, context.tool_name, headers.values())

    async def _bound_headers(self, context: ConnectionContext | ToolContext) -> dict[str, str]:
        headers = await resolve_headers(self._headers, context)
        self._identity.bind(headers)
        return headers

    def __repr__(self) -> str:
        return f"MCPToolProvider(url={self.url!r})"


def create_mcp_tool_provider(
    url: str,
    *,
    headers: HeadersSource = None,
    transport: str = SUPPORTED_TRANSPORT,
    features: Iterable[str] = ("tools",),
) -> MCPToolProvider:
    """A tool provider for the MCP server at ``url`` (a Streamable HTTP endpoint).

    ``headers`` is a mapping, or a callable (sync or async) that receives the caller's
    context, a :class:`~fevex.tools.ConnectionContext` during discovery or a
    :class:`~fevex.ToolContext` during a call, and returns the headers for that
    operation, typically ``{"Authorization": f"Bearer {await
    context.get_credential('docs-token')}"}``. The provider binds to the first set it
    resolves; use one provider per identity.

    ``transport`` and ``features`` exist to refuse, clearly, what this version does not
    do: only ``"streamable-http"`` and ``("tools",)`` are accepted (``MCP_TRANSPORT_
    UNSUPPORTED`` for stdio or legacy SSE, ``MCP_FEATURE_UNSUPPORTED`` for resources
    or prompts).
    """
    _require_sdk()
    if transport != SUPPORTED_TRANSPORT:
        if transport == "stdio":
            raise configuration_error(TRANSPORT_UNSUPPORTED, STDIO_HINT)
        raise configuration_error(
            TRANSPORT_UNSUPPORTED,
            f"MCP transport {transport!r} is not supported: fevex-mcp speaks Streamable "
            "HTTP only (legacy HTTP+SSE and stdio are out of scope).",
        )
    if isinstance(features, str):
        features = (features,)
    unsupported = sorted(set(features) - SUPPORTED_FEATURES)
    if unsupported:
        raise configuration_error(
            FEATURE_UNSUPPORTED,
            f"MCP features {unsupported} are not supported: fevex-mcp exposes a server's "
            "tools only (resources and prompts are out of scope).",
        )
    return MCPToolProvider(url, headers)


def _require_sdk() -> None:
    """Import the SDK now, so a missing one fails where the provider is defined."""
    from fevex_mcp import session  # noqa: F401
