"""One MCP session per operation, over Streamable HTTP, with the SDK's failures turned
into fevex errors.

Nothing is kept between operations: each discovery and each call opens a session with
the headers resolved for it, and closes it before returning, so no catalogue, session id
or connection outlives the caller that asked. While a session runs, the log records the
SDK and the HTTP client create carry none of its header values.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from fevex_mcp.endpoint import Endpoint
from fevex_mcp.failures import translate
from fevex_mcp.log_redaction import secrets_kept_out_of_logs
from fevex_mcp.oauth import ANSWERED, KnownSecrets
from fevex_mcp.operations import CLIENT_INFO

if TYPE_CHECKING:
    from fevex_mcp.oauth_flow import OAuthAuth

__all__ = ["with_http_session"]

T = TypeVar("T")

# The SDK's own defaults: the connection's timeout (applied by the core) bounds the
# whole operation anyway; these only keep a dead socket from holding a slot longer.
_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


async def with_http_session(
    endpoint: Endpoint,
    headers: Mapping[str, str],
    operation: Callable[[Client], Awaitable[T]],
    auth: OAuthAuth | None = None,
) -> T:
    """Run ``operation`` on a session opened for it with ``headers`` (and ``auth``, the
    provider's OAuth flow), then close it."""
    # The status of each failed POST: the SDK folds HTTP errors into one JSON-RPC code,
    # and a user fixing a 401 or a wrong path needs the status itself.
    failed: list[httpx2.Response] = []
    secrets = KnownSecrets(headers.values(), None if auth is None else auth.secrets)

    async def record(response: httpx2.Response) -> None:
        if response.status_code >= 400 and response.request.method == "POST":
            failed.append(response)

    try:
        with secrets_kept_out_of_logs(secrets):
            async with httpx2.AsyncClient(
                headers=dict(headers),
                timeout=_TIMEOUT,
                event_hooks={"response": [record]},
                auth=auth,
            ) as http:
                transport = streamable_http_client(endpoint.url, http_client=http)
                async with Client(transport, cache=None, client_info=CLIENT_INFO) as client:
                    return await operation(client)
    except Exception as error:
        # A challenge the OAuth flow answered is no failure of the session.
        statuses = [sent.status_code for sent in failed if not sent.extensions.get(ANSWERED)]
        failure = translate(error, f"at {endpoint.display}", secrets, statuses)
    # Raised outside the handler, so that the SDK's failure (which may quote what the
    # server sent) does not travel with it as its context.
    raise failure
