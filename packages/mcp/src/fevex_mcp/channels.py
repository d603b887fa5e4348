"""How a provider reaches its server: a Streamable HTTP session per operation, or one
long-lived stdio process. Both run an operation on a connected SDK ``Client`` and hand
it the secrets to keep out of anything the operation reports (header values for HTTP,
environment values for stdio).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from fevex.tools import ConnectionContext, ToolContext
from fevex_mcp.command import StdioCommand
from fevex_mcp.endpoint import Endpoint
from fevex_mcp.headers import HeaderIdentity, HeadersSource, resolve_headers
from fevex_mcp.oauth import KnownSecrets

if TYPE_CHECKING:
    from mcp import Client

    from fevex_mcp.oauth_flow import OAuthAuth
    from fevex_mcp.operations import Kind
    from fevex_mcp.stdio_session import StdioServer

__all__ = ["Channel", "HttpChannel", "Operation", "StdioChannel"]

T = TypeVar("T")
Caller = ConnectionContext | ToolContext
Operation = Callable[["Client", Sequence[str]], Awaitable[T]]


class Channel(Protocol):
    where: str

    async def run(self, context: Caller, operation: Operation[T]) -> T: ...

    async def listing(self, context: Caller, kind: Kind) -> list[Any]: ...

    async def aclose(self) -> None: ...


class HttpChannel:
    """A session per operation, opened with the headers resolved for its caller (and
    the provider's OAuth flow, when it has one)."""

    def __init__(
        self, endpoint: Endpoint, headers: HeadersSource, auth: OAuthAuth | None = None
    ) -> None:
        self.endpoint = endpoint
        self.where = f"at {endpoint.display}"
        self._headers = headers
        self._identity = HeaderIdentity()
        self._auth = auth

    async def run(self, context: Caller, operation: Operation[T]) -> T:
        from fevex_mcp.session import with_http_session

        headers = await resolve_headers(self._headers, context)
        self._identity.bind(headers)
        auth = self._auth
        secrets = KnownSecrets(headers.values(), None if auth is None else auth.secrets)

        async def operate(client: Client) -> T:
            return await operation(client, secrets)

        return await with_http_session(self.endpoint, headers, operate, auth)

    async def listing(self, context: Caller, kind: Kind) -> list[Any]:
        from fevex_mcp.operations import list_all

        async def fetch(client: Client, secrets: Sequence[str]) -> list[Any]:
            return await list_all(client, kind, self.where)

        return await self.run(context, fetch)

    async def aclose(self) -> None:
        return None  # nothing outlives an operation


class StdioChannel:
    """The provider's one stdio server, started on first use."""

    def __init__(self, command: StdioCommand) -> None:
        from fevex_mcp.stdio_session import StdioServer

        self.command = command
        self.server: StdioServer = StdioServer(command)
        self.where = self.server.where

    async def run(self, context: Caller, operation: Operation[T]) -> T:
        secrets = self.command.secrets

        async def operate(client: Client) -> T:
            return await operation(client, secrets)

        return await self.server.run(operate)

    async def listing(self, context: Caller, kind: Kind) -> list[Any]:
        return await self.server.listing(kind)

    async def aclose(self) -> None:
        await self.server.aclose()
