"""How a provider reaches its server: a Streamable HTTP session per run, or a stdio
process per run. Both run an operation on a connected SDK ``Client`` and hand
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

    def tools_changed(self, run_id: str) -> bool: ...

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
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.client_options = dict(client_options or {})
        self.where = f"at {endpoint.display}"
        self._headers = headers
        self._identity = HeaderIdentity()
        self._auth = auth
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
            once = HttpSession.open(self.endpoint, headers, auth, self.client_options)
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

    def tools_changed(self, run_id: str) -> bool:
        session = self._held.get(run_id)
        return session is not None and session.lists.take_change("tools")

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
            self.endpoint, headers, self._auth, self.client_options
        )
        return session

    async def _drop(self, run_id: str, session: HttpSession) -> None:
        if self._held.get(run_id) is session:
            del self._held[run_id]
        await session.close()


class StdioChannel:
    """One server process per run: a stdio process carries exactly one MCP session, so a
    run's discovery and calls share a process that no other run sees. It starts on the
    run's first operation and stops (with its process group) when the core releases the
    run or the provider closes; an operation outside a connection has a process of its
    own, stopped before it returns. At most ``MAX_HELD`` are held, the oldest stopped
    first."""

    def __init__(
        self, command: StdioCommand, client_options: Mapping[str, Any] | None = None
    ) -> None:
        self.command = command
        self.where = f"{command.display!r} (stdio)"
        self._client_options = client_options
        self._held: dict[str, StdioServer] = {}

    async def run(self, context: Caller, operation: Operation[T]) -> T:
        secrets = self.command.secrets

        async def operate(client: Client) -> T:
            return await operation(client, secrets)

        return await self._use(context, lambda server: server.run(operate))

    async def listing(self, context: Caller, kind: Kind) -> list[Any]:
        return await self._use(context, lambda server: server.listing(kind))

    async def release_run(self, run_id: str) -> None:
        server = self._held.pop(run_id, None)
        if server is not None:
            await server.aclose()

    def tools_changed(self, run_id: str) -> bool:
        server = self._held.get(run_id)
        return server is not None and server.tools_changed()

    async def aclose(self) -> None:
        held, self._held = self._held, {}
        for server in held.values():
            await server.aclose()

    async def _use(self, context: Caller, use: Callable[[StdioServer], Awaitable[T]]) -> T:
        from fevex_mcp.stdio_session import StdioServer

        if isinstance(context, ConnectionContext) and not context.connection:
            once = StdioServer(self.command, self._client_options)
            try:
                return await use(once)
            finally:
                await once.aclose()
        server = self._held.get(context.run_id)
        if server is None:
            while len(self._held) >= MAX_HELD:
                await self._held.pop(next(iter(self._held))).aclose()
            server = self._held[context.run_id] = StdioServer(self.command, self._client_options)
        return await use(server)
