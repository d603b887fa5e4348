"""One MCP session per operation, over Streamable HTTP, with the SDK's failures turned
into fevex errors.

This is the only module that imports the MCP SDK (and, through it, httpx2). Nothing is
kept between operations: each discovery and each call opens a session with the headers
resolved for it, and closes it before returning, so no catalogue, session id or
connection outlives the caller that asked. While a session runs, the log records the SDK
and the HTTP client create carry none of its header values.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, TypeVar

from pydantic import ValidationError

try:
    import httpx2
    from mcp import Client, MCPError
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import CallToolResult, Implementation, Tool
except ImportError as error:  # pragma: no cover - the distribution depends on mcp
    raise ImportError(
        "fevex-mcp needs the MCP SDK (the 'mcp' package, 2.x); install it with: "
        'pip install "fevex[mcp]"'
    ) from error

from fevex.errors import FevexError
from fevex_mcp.__about__ import __version__
from fevex_mcp.endpoint import Endpoint
from fevex_mcp.errors import (
    HTTP_ERROR,
    PROTOCOL_ERROR,
    TRANSPORT_UNSUPPORTED,
    UNREACHABLE,
    configuration_error,
    remote_excerpt,
    run_error,
)
from fevex_mcp.log_redaction import secrets_kept_out_of_logs

__all__ = ["MAX_PAGES", "call_tool", "list_tools"]

T = TypeVar("T")

# A server that keeps handing out cursors must not keep a discovery going forever.
MAX_PAGES = 100
# The SDK's own defaults: the connection's timeout (applied by the core) bounds the
# whole operation anyway; these only keep a dead socket from holding a slot longer.
_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
_CLIENT_INFO = Implementation(name="fevex-mcp", version=__version__)


async def list_tools(endpoint: Endpoint, headers: Mapping[str, str]) -> list[Tool]:
    """Every tool the server lists, following cursors up to ``MAX_PAGES`` pages."""

    async def walk(client: Client) -> tuple[list[Tool], bool]:
        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return tools, True
        return tools, False

    tools, complete = await _with_session(endpoint, headers, walk)
    if not complete:
        raise run_error(
            PROTOCOL_ERROR,
            f"The MCP server at {endpoint.display} listed its tools over more than "
            f"{MAX_PAGES} pages; fevex stopped reading.",
        )
    return tools


async def call_tool(
    endpoint: Endpoint, headers: Mapping[str, str], name: str, arguments: dict[str, Any]
) -> CallToolResult:
    async def call(client: Client) -> CallToolResult:
        # The SDK would check a result's structured content against the server's own
        # outputSchema with Python's backtracking `re` (a hostile pattern could stall the
        # run), after listing the tools again to find that schema. A remote tool's output
        # is untrusted data whatever the server promises, so that check is skipped.
        client.session.validate_tool_result = _output_schema_unchecked  # type: ignore[method-assign]
        return await client.call_tool(name, arguments)

    return await _with_session(endpoint, headers, call)


async def _output_schema_unchecked(name: str, result: CallToolResult) -> None:
    return None


async def _with_session(
    endpoint: Endpoint, headers: Mapping[str, str], operation: Callable[[Client], Awaitable[T]]
) -> T:
    # The status of each failed POST: the SDK folds HTTP errors into one JSON-RPC code,
    # and a user fixing a 401 or a wrong path needs the status itself.
    statuses: list[int] = []

    async def record(response: httpx2.Response) -> None:
        if response.status_code >= 400 and response.request.method == "POST":
            statuses.append(response.status_code)

    try:
        with secrets_kept_out_of_logs(headers.values()):
            async with httpx2.AsyncClient(
                headers=dict(headers), timeout=_TIMEOUT, event_hooks={"response": [record]}
            ) as http:
                transport = streamable_http_client(endpoint.url, http_client=http)
                async with Client(transport, cache=None, client_info=_CLIENT_INFO) as client:
                    return await operation(client)
    except Exception as error:
        raise _translate(error, statuses, endpoint, tuple(headers.values())) from None


def _leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error


def _translate(
    error: Exception, statuses: list[int], endpoint: Endpoint, secrets: tuple[str, ...]
) -> BaseException:
    """The fevex error for a failed session; an unknown failure is handed on as itself,
    for the core to report by its type name only."""
    leaves = list(_leaves(error))
    for leaf in leaves:
        if isinstance(leaf, FevexError):
            return leaf
    where = endpoint.display
    if statuses:
        status = statuses[0]
        if status == 405:
            # A legacy HTTP+SSE endpoint takes a GET and answers a POST with 405.
            return configuration_error(
                TRANSPORT_UNSUPPORTED,
                f"The MCP server at {where} refused a Streamable HTTP request (HTTP 405). "
                "fevex-mcp speaks Streamable HTTP only; legacy HTTP+SSE endpoints are not "
                "supported. Point the URL at the server's Streamable HTTP endpoint.",
            )
        hint = {
            401: " Check the provider's headers (its credentials).",
            403: " Check the provider's headers (its credentials).",
            404: " Check the URL path of the Streamable HTTP endpoint.",
        }.get(status, "")
        return run_error(
            HTTP_ERROR,
            f"The MCP server at {where} answered HTTP {status}.{hint}",
            recoverable=status == 429 or status >= 500,
            status=status,
        )
    for leaf in leaves:
        if isinstance(leaf, MCPError):
            return run_error(
                PROTOCOL_ERROR,
                f"The MCP server at {where} answered with MCP error {leaf.code}. "
                f"{remote_excerpt(leaf.message, secrets)}",
                mcp_code=leaf.code,
            )
    for leaf in leaves:
        if isinstance(leaf, ValidationError):
            # The SDK's check of a result; its text quotes what the server sent, so
            # only where and why it failed is kept, as untrusted text, and not the error.
            problems = "; ".join(
                f"{'.'.join(map(str, problem['loc']))}: {problem['msg']}"
                for problem in leaf.errors(include_input=False, include_url=False)[:3]
            )
            return run_error(
                PROTOCOL_ERROR,
                f"The MCP server at {where} sent a result that does not follow the MCP "
                f"schema. {remote_excerpt(problems, secrets)}",
            )
    for leaf in leaves:
        if isinstance(leaf, httpx2.TransportError):
            return run_error(
                UNREACHABLE,
                f"Could not talk to the MCP server at {where} ({type(leaf).__name__}).",
                recoverable=True,
            )
    first = leaves[0] if leaves else error
    return first
