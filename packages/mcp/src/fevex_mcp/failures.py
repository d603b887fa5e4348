"""An SDK failure as the fevex error a user can act on: one table for every transport.

A :class:`~fevex.errors.FevexError` raised inside an operation is passed on as itself;
an HTTP status (Streamable HTTP), an MCP error, a result that breaks the MCP schema and
a transport failure each get their code; anything else is handed on as itself, for the
core to report by its type name only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import httpx2
from mcp import MCPError
from pydantic import ValidationError

from fevex.errors import FevexError
from fevex_mcp.errors import (
    HTTP_ERROR,
    PROTOCOL_ERROR,
    TRANSPORT_UNSUPPORTED,
    UNREACHABLE,
    configuration_error,
    remote_excerpt,
    run_error,
)

__all__ = ["leaves", "translate"]


def leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from leaves(inner)
    else:
        yield error


def translate(
    error: BaseException, where: str, secrets: Sequence[str], statuses: Sequence[int] = ()
) -> BaseException:
    """The fevex error for a failed session; an unknown failure is handed on as itself,
    for the core to report by its type name only."""
    found = list(leaves(error))
    for leaf in found:
        if isinstance(leaf, FevexError):
            return leaf
    if statuses:
        status = statuses[0]
        if status == 405:
            # A legacy HTTP+SSE endpoint takes a GET and answers a POST with 405.
            return configuration_error(
                TRANSPORT_UNSUPPORTED,
                f"The MCP server {where} refused a Streamable HTTP request (HTTP 405). "
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
            f"The MCP server {where} answered HTTP {status}.{hint}",
            recoverable=status == 429 or status >= 500,
            status=status,
        )
    for leaf in found:
        if isinstance(leaf, MCPError):
            return run_error(
                PROTOCOL_ERROR,
                f"The MCP server {where} answered with MCP error {leaf.code}. "
                f"{remote_excerpt(leaf.message, secrets)}",
                mcp_code=leaf.code,
            )
    for leaf in found:
        if isinstance(leaf, ValidationError):
            # The SDK's check of a result; its text quotes what the server sent, so
            # only where and why it failed is kept, as untrusted text, and not the error.
            problems = "; ".join(
                f"{'.'.join(map(str, problem['loc']))}: {problem['msg']}"
                for problem in leaf.errors(include_input=False, include_url=False)[:3]
            )
            return run_error(
                PROTOCOL_ERROR,
                f"The MCP server {where} sent a result that does not follow the MCP "
                f"schema. {remote_excerpt(problems, secrets)}",
            )
    for leaf in found:
        if isinstance(leaf, httpx2.TransportError):
            return run_error(
                UNREACHABLE,
                f"Could not talk to the MCP server {where} ({type(leaf).__name__}).",
                recoverable=True,
            )
    first = found[0] if found else error
    return first
