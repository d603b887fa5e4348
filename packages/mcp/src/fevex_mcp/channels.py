"""How a provider reaches its server: a Streamable HTTP session per run, or one
long-lived stdio process. Both run an operation on a connected SDK ``Client`` and hand
it the secrets to keep out of anything the operation reports (header values for HTTP,
environment values for stdio), and let go of a run's session when the core releases it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
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
    from fevex_mcp.session import HttpSession
    from fevex_mcp.stdio_session import StdioServer

__all__ = ["Channel", "HttpChannel", "Operation", "StdioChannel"]

T = TypeVar("T")
Caller = ConnectionContext | ToolContext
Operation = Callable[["Client", Sequence[str]], Awaitable[T]]
# Sessions of runs never released (a provider called by hand) stay bounded.
MAX_HELD = 64


class Channel(Protocol):
    where: str

    async def run(self, context: Caller, operation: Operation[T]) -> T: ...

    async def listing(self, context: Caller, kind: Kind) -> list[Any]: ...

    async def release_run(self, run_id: str) -> None: ...

    async def aclose(self) -> None: ...


class HttpChannel:
    """One session per run, opened with the headers resolved for its first operation (and
    the provider's OAuth flow, when it has one) and held until the core releases the run
    (:meth:`release_run`) or the provider closes.

    An operation outside a connection (a prompt read where the app is composed, whose
    context names no connection) has a session of its own, closed before it returns:
    nothing would ever release one held for it. A session the server expired is opened
    again once per operation; at most ``MAX_HELD`` are held, the oldest closed first.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        headers: HeadersSource,
        auth: OAuthAuth | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.where = f"at {endpoint.display}"
        self._headers = headers
        self._identity = HeaderIdentity()
        self._auth = auth
        # The SDK Client's keywords for what the provider offers (client_features.py).
        self._options = dict(options or {})
        self._held: dict[str, HttpSession] = {}

    async def run(self, context: Caller, operation: Operation[T]) -> T:
        from fevex_mcp.session import HttpSession, SessionExpired

        headers = await resolve_headers(self._headers, context)
        self._identity.bind(headers)
        auth = self._auth
        secrets = KnownSecrets(headers.values(), None if auth is None else auth.secrets)

        async def operate(client: Client) -> T:
            return await operation(client, secrets)

        if isinstance(context, ConnectionContext) and not context.connection:
            once = HttpSession.open(self.endpoint, headers, auth, self._options)
            try:
                return await once.run(operate)
            except SessionExpired as expired:
                failure = expired.error
            finally:
                await once.close()
            # Raised outside the handler: no failure of the session is its context.
            raise failure
        run_id = context.run_id
        held = self._session(run_id, headers)
        try:
            return await held.run(operate)
        except SessionExpired:
            await self._drop(run_id, held)
        # A 404 says the server did not process the request: it goes once more, on a
        # new session.
        again = self._session(run_id, headers)
        try:
            return await again.run(operate)
        except SessionExpired as expired:
            await self._drop(run_id, again)
            failure = expired.error
        raise failure

    async def listing(self, context: Caller, kind: Kind) -> list[Any]:
        from fevex_mcp.operations import list_all

        async def fetch(client: Client, secrets: Sequence[str]) -> list[Any]:
            return await list_all(client, kind, self.where)

        return await self.run(context, fetch)

    async def release_run(self, run_id: str) -> None:
        session = self._held.pop(run_id, None)
        if session is not None:
            await session.close()

    async def aclose(self) -> None:
        held, self._held = self._held, {}
        for session in held.values():
            await session.close()

    def _session(self, run_id: str, headers: Mapping[str, str]) -> HttpSession:
        from fevex_mcp.session import HttpSession

        session = self._held.get(run_id)
        if session is not None and session.usable and session.loop is asyncio.get_running_loop():
            return session
        if session is not None:
            self._held.pop(run_id).close_soon()
        while len(self._held) >= MAX_HELD:
            oldest = next(iter(self._held))
            self._held.pop(oldest).close_soon()
        session = self._held[run_id] = HttpSession.open(
            self.endpoint, headers, self._auth, self._options
        )
        return session

    async def _drop(self, run_id: str, session: HttpSession) -> None:
        if self._held.get(run_id) is session:
            del self._held[run_id]
        await session.close()


class StdioChannel:
    """The provider's one stdio server, started on first use."""

    def __init__(self, command: StdioCommand, options: Mapping[str, Any] | None = None) -> None:
        from fevex_mcp.stdio_session import StdioServer

        self.command = command
        self.server: StdioServer = StdioServer(command, options)
        self.where = self.server.where

    async def run(self, context: Caller, operation: Operation[T]) -> T:
        secrets = self.command.secrets

        async def operate(client: Client) -> T:
            return await operation(client, secrets)

        return await self.server.run(operate)

    async def listing(self, context: Caller, kind: Kind) -> list[Any]:
        return await self.server.listing(kind)

    async def release_run(self, run_id: str) -> None:
        return None  # the process and its one session serve every run

    async def aclose(self) -> None:
        await self.server.aclose()
