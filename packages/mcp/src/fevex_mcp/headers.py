"""Request headers: where they come from, what is allowed in them, and whose they are.

Headers are either a fixed mapping or a callable that receives the caller's context (a
:class:`~fevex.tools.ConnectionContext` during discovery, a :class:`~fevex.ToolContext`
during a call) and may ``await context.get_credential(name)``. Their values are secrets:
they go to the server and nowhere else, and this module never puts one in a message.

A provider serves one identity. The first header set it resolves is bound (as a digest,
never the values); a later set that differs is refused with ``MCP_IDENTITY_CHANGED``,
because a provider silently switching users would mix one user's remote state, catalogue
or permissions into another's runs.
"""

from __future__ import annotations

import hashlib
import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias

from fevex.errors import FevexError
from fevex.tools import ConnectionContext, ToolContext
from fevex_mcp.errors import (
    HEADERS_FAILED,
    HEADERS_INVALID,
    IDENTITY_CHANGED,
    configuration_error,
    run_error,
)

__all__ = ["HeaderIdentity", "Headers", "HeadersSource", "check_header_map", "resolve_headers"]

Headers: TypeAlias = Mapping[str, str]
HeadersSource: TypeAlias = (
    Headers | Callable[[ConnectionContext | ToolContext], Headers | Awaitable[Headers]] | None
)

# RFC 9110 token characters: what a header name may be made of.
_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# The transport owns these: a caller-set value would break or spoof the protocol.
RESERVED = frozenset(
    {
        "accept",
        "connection",
        "content-length",
        "content-type",
        "host",
        "last-event-id",
        "mcp-protocol-version",
        "mcp-session-id",
        "transfer-encoding",
    }
)


def header_problem(headers: object) -> str | None:
    """Why ``headers`` is not a usable header set, in words that name no value."""
    if not isinstance(headers, Mapping):
        return f"headers must be a mapping of names to strings, not {type(headers).__name__}"
    seen: set[str] = set()
    for name, value in headers.items():
        if not isinstance(name, str) or not _NAME.match(name):
            return f"header name {name!r} is not a valid HTTP header name"
        lowered = name.lower()
        if lowered in seen:
            return f"header {name!r} is given twice"
        seen.add(lowered)
        if lowered in RESERVED or lowered.startswith("mcp-param-"):
            return f"header {name!r} is set by the MCP transport itself"
        if not isinstance(value, str):
            return f"the value of header {name!r} must be a string"
        if any(char in value for char in "\r\n\x00"):
            return f"the value of header {name!r} contains a line break or NUL"
    return None


def check_header_map(headers: Mapping[str, str]) -> dict[str, str]:
    """A validated copy of a fixed header mapping, or ``MCP_HEADERS_INVALID``."""
    problem = header_problem(headers)
    if problem is not None:
        raise configuration_error(HEADERS_INVALID, f"MCP provider: {problem}.")
    return dict(headers)


async def resolve_headers(
    source: HeadersSource, context: ConnectionContext | ToolContext
) -> dict[str, str]:
    """The header set for one operation, from a mapping or the caller's callable."""
    if source is None:
        return {}
    if isinstance(source, Mapping):
        return dict(source)
    try:
        produced: Any = source(context)
        if inspect.isawaitable(produced):
            produced = await produced
    except FevexError:
        # A credential the resolver does not know, or one the connection did not
        # declare: the core's own code says it best.
        raise
    except Exception as error:
        raise run_error(
            HEADERS_FAILED,
            f"The headers callable of this MCP provider failed ({type(error).__name__}).",
        ) from None
    problem = header_problem(produced)
    if problem is not None:
        raise run_error(HEADERS_INVALID, f"The headers callable returned a bad set: {problem}.")
    return dict(produced)


def _digest(headers: Mapping[str, str]) -> str:
    canonical = sorted((name.lower(), value) for name, value in headers.items())
    material = "\n".join(f"{name}:{value}" for name, value in canonical)
    return hashlib.sha256(material.encode()).hexdigest()


class HeaderIdentity:
    """The identity (header set) one provider is bound to, held as a digest."""

    __slots__ = ("_digest",)

    def __init__(self) -> None:
        self._digest: str | None = None

    @property
    def bound(self) -> bool:
        return self._digest is not None

    def bind(self, headers: Mapping[str, str]) -> None:
        """Bind to ``headers`` on first use; refuse any other set afterwards."""
        digest = _digest(headers)
        if self._digest is None:
            self._digest = digest
        elif self._digest != digest:
            raise run_error(
                IDENTITY_CHANGED,
                "This MCP provider is bound to the headers it first resolved, and they "
                "changed (another user, or a rotated credential). Use one provider and "
                "connection per identity, and recreate them when credentials rotate.",
            )
