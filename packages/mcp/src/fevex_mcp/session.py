"""An MCP session over Streamable HTTP, held open in a task of its own, with the SDK's
failures turned into fevex errors.

The SDK's session and transport run in anyio task groups, whose cancel scopes must be
left by the task that entered them; so each session lives in an owner task, and
operations from any task (a run's discovery, each of its tool calls) send their requests
over it. :mod:`fevex_mcp.channels` decides how long one lives (one per connection per
run). Closing it ends the session at the server (``DELETE`` with its session id).

A server that no longer knows the session answers ``404`` to a request carrying its id;
the operation then fails with :class:`SessionExpired`, so the channel can open a new
session and send it again (a 404 says the server did not process the request). While a
session runs, the log records the SDK and the HTTP client create carry none of its
secrets: its header values, and the credentials and tokens of the provider's OAuth flow
(those it obtains during the session too).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import httpx2
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types.jsonrpc import CONNECTION_CLOSED

from fevex.errors import FevexError
from fevex_mcp.endpoint import Endpoint
from fevex_mcp.errors import HTTP_ERROR, UNREACHABLE, run_error
from fevex_mcp.failures import leaves, translate
from fevex_mcp.log_redaction import secrets_kept_out_of_logs
from fevex_mcp.oauth import ANSWERED, KnownSecrets
from fevex_mcp.operations import CLIENT_INFO

if TYPE_CHECKING:
    from fevex_mcp.oauth_flow import OAuthAuth

__all__ = ["HttpSession", "SessionExpired", "http_client"]

T = TypeVar("T")

# The SDK's own defaults: the connection's timeout (applied by the core) bounds each
# operation anyway; these only keep a dead socket from holding a slot longer.
_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
_SESSION_ID = "mcp-session-id"


def http_client(
    headers: Mapping[str, str],
    on_response: Callable[[httpx2.Response], Awaitable[None]],
    auth: OAuthAuth | None = None,
) -> httpx2.AsyncClient:
    """The HTTP client of one session: the provider's headers on every request,
    ``on_response`` shown every response, and ``auth`` (the provider's OAuth flow, when
    it has one) answering the server's challenges."""
    return httpx2.AsyncClient(
        headers=dict(headers),
        timeout=_TIMEOUT,
        event_hooks={"response": [on_response]},
        auth=auth,
    )


class SessionExpired(Exception):
    """The server answered 404 to a request on the session's id: it ended the session.
    ``error`` is what the operation fails with when no new session is tried."""

    def __init__(self, error: FevexError) -> None:
        super().__init__(error.message)
        self.error = error


class HttpSession:
    """One MCP session at ``endpoint``, opened with ``headers`` (and ``auth``, the
    provider's OAuth flow); :meth:`open` starts it."""

    def __init__(
        self,
        endpoint: Endpoint,
        headers: Mapping[str, str],
        auth: OAuthAuth | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.where = f"at {endpoint.display}"
        self._headers = dict(headers)
        self._auth = auth
        # The SDK Client's keywords for what the provider offers (client_features.py).
        self._options = dict(options or {})
        # Read at each use: the tokens the flow obtains during the session are in it.
        self.secrets = KnownSecrets(self._headers.values(), None if auth is None else auth.secrets)
        # Each failed POST. The SDK folds HTTP errors into one JSON-RPC code, and a user
        # fixing a 401 or a wrong path needs the status itself. Kept whole: the OAuth
        # flow marks a challenge it answered after the response hook has seen it.
        self._failures: list[httpx2.Response] = []
        self._client: Client | None = None
        self._error: BaseException | None = None
        self._scope = anyio.CancelScope()
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._finished = asyncio.Event()
        self._broken = False
        self.loop = asyncio.get_running_loop()
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def open(
        cls,
        endpoint: Endpoint,
        headers: Mapping[str, str],
        auth: OAuthAuth | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> HttpSession:
        """A session whose handshake starts now, in its owner task."""
        session = cls(endpoint, headers, auth, options)
        session._task = session.loop.create_task(session._hold())
        return session

    @property
    def usable(self) -> bool:
        """Whether a later operation may still use this session: it is open or opening,
        and no transport failure has shown it dead."""
        return not (self._broken or self._closing.is_set() or self._finished.is_set())

    async def run(self, operation: Callable[[Client], Awaitable[T]]) -> T:
        """Run ``operation`` on the session once its handshake is done."""
        await self._ready.wait()
        client = self._client
        if client is None:
            self._broken = True
            raise self._translated(self._error, self._failures)
        seen = len(self._failures)
        try:
            with secrets_kept_out_of_logs(self.secrets):
                return await operation(client)
        except Exception as error:
            failures = _unanswered(self._failures[seen:])
            expired = any(
                sent.status_code == 404 and _SESSION_ID in sent.request.headers for sent in failures
            )
            closed = _connection_closed(error)
            translated = None if expired else self._translated(error, failures)
        # Raised outside the handler, so that the SDK's failure (which may quote what
        # the server sent) does not travel with it as its context.
        if translated is None:
            self._broken = True
            raise SessionExpired(
                run_error(
                    HTTP_ERROR,
                    f"The MCP server {self.where} ended the MCP session fevex was "
                    "using (HTTP 404 on its session id).",
                    recoverable=True,
                    status=404,
                )
            )
        if closed or _transport_closed(translated):
            # The SDK reports a dead transport as a closed connection; why it died (a
            # refused connection, a reset, the OAuth flow's failure) is what the owner
            # task caught.
            with anyio.move_on_after(1.0):
                await asyncio.shield(self._finished.wait())
            if self._error is not None:
                translated = self._translated(self._error, failures)
        if _transport_closed(translated) or (
            isinstance(translated, FevexError) and translated.code in (HTTP_ERROR, UNREACHABLE)
        ):
            self._broken = True
        raise translated

    async def close(self) -> None:
        """End the session (at the server too, once its handshake is done) and wait for
        its owner task to finish; from another event loop, only ask it to end."""
        if asyncio.get_running_loop() is not self.loop:
            self.close_soon()
            return
        self._stop()
        if self._task is not None:
            await asyncio.shield(self._finished.wait())

    def close_soon(self) -> None:
        """End the session from any thread or event loop, without waiting."""
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._stop)

    def _stop(self) -> None:
        self._closing.set()
        if self._client is None:
            # Still in its handshake: nothing at the server to end yet.
            self._scope.cancel()

    async def _hold(self) -> None:
        try:
            with self._scope, secrets_kept_out_of_logs(self.secrets):
                async with http_client(self._headers, self._record, self._auth) as http:
                    transport = streamable_http_client(self.endpoint.url, http_client=http)
                    async with Client(
                        transport, cache=None, client_info=CLIENT_INFO, **self._options
                    ) as client:
                        self._client = client
                        self._ready.set()
                        await self._closing.wait()
        except Exception as error:
            self._error = error
        finally:
            self._finished.set()
            self._ready.set()

    async def _record(self, response: httpx2.Response) -> None:
        if response.status_code >= 400 and response.request.method == "POST":
            self._failures.append(response)

    def _translated(
        self, error: BaseException | None, failures: list[httpx2.Response]
    ) -> BaseException:
        if error is None:
            return run_error(
                UNREACHABLE,
                f"The MCP session {self.where} was closed before its handshake ended.",
                recoverable=True,
            )
        statuses = [sent.status_code for sent in _unanswered(failures)]
        return translate(error, self.where, self.secrets, statuses)


def _unanswered(failures: list[httpx2.Response]) -> list[httpx2.Response]:
    """The failed responses but the challenges the OAuth flow answered: those are no
    failure of the session."""
    return [sent for sent in failures if not sent.extensions.get(ANSWERED)]


def _connection_closed(error: BaseException) -> bool:
    return any(
        isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED for leaf in leaves(error)
    )


def _transport_closed(error: BaseException) -> bool:
    return isinstance(error, FevexError) and error.details.get("mcp_code") == CONNECTION_CLOSED
