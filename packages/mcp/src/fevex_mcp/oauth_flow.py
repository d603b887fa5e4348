"""The OAuth flow of one provider, on the MCP SDK's OAuth client.

The SDK's providers (:class:`~mcp.client.auth.OAuthClientProvider` and its client
credentials variants) do the protocol: protected-resource metadata from the
``WWW-Authenticate`` challenge and then the well-known URLs, authorization-server metadata
(RFC 8414, then OpenID), dynamic client registration or a client ID metadata document,
PKCE S256, the ``resource`` parameter, scope selection, step-up on ``insufficient_scope``,
refresh, and the token endpoint's client authentication.

:class:`OAuthAuth` wraps one as the ``httpx2.Auth`` of the provider's HTTP client and adds
what fevex promises around it:

- every request of the flow itself (metadata, registration, token) is sent by a client of
  its own whose connections pass the core's SSRF guard (:mod:`fevex.net`,
  ``SSRF_BLOCKED``): the MCP server's own origin is allowed, since the app chose it;
  anything else must be a public address unless ``allow_hosts`` names it; and a challenge
  naming its resource metadata on another origin than the server's is refused before
  anything is fetched;
- each of those requests is bounded in time (``request_timeout``) and size;
- the app's redirect callback has ``redirect_timeout`` seconds, step-up is bounded by
  ``max_step_ups``, and every failure ends in an ``MCP_AUTH_*`` code whose message quotes
  nothing a server or the SDK said (the SDK's messages can hold a token response's body);
- tokens, the client secret and the private key are redacted from the log records the
  SDK creates while the flow runs, and stored only in the app's token store.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncGenerator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthRegistrationError, OAuthTokenError
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.oauth2 import OAuthContext
from mcp.client.auth.utils import extract_field_from_www_auth, union_scopes
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl, ValidationError

from fevex.errors import FevexConfigurationError, FevexError
from fevex.net import GuardedTransport, HostPolicy
from fevex_mcp.endpoint import Endpoint
from fevex_mcp.errors import (
    AUTH_DENIED,
    AUTH_FAILED,
    AUTH_INVALID,
    AUTH_REDIRECT_FAILED,
    AUTH_STEP_UP_LIMIT,
    AUTH_TIMEOUT,
    AUTH_UNREACHABLE,
    configuration_error,
    run_error,
)
from fevex_mcp.log_redaction import secrets_kept_out_of_logs
from fevex_mcp.oauth import ANSWERED, KnownSecrets, MCPOAuth
from fevex_mcp.token_stores import TokenStore

__all__ = ["OAuthAuth"]

# A metadata document or a token response is a few kilobytes; a server streaming more is
# refused rather than read.
MAX_BODY_BYTES = 1024 * 1024
# How many tokens and secrets a provider keeps redacting (a refresh adds two).
MAX_REMEMBERED = 64
_ERROR_CODE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class OAuthAuth(httpx2.Auth):
    """The ``auth`` of one provider's HTTP client: the SDK's flow, guarded and bounded."""

    requires_response_body = True

    def __init__(self, config: MCPOAuth, endpoint: Endpoint) -> None:
        self.where = f"at {endpoint.display}"
        self._config = config
        self._origin = _origin(endpoint.url)
        self._policy = _policy(config, endpoint.url)
        self._storage = _Storage(config, endpoint.display)
        self._provider = _sdk_provider(config, endpoint.url, self._storage, self)
        self._storage.context = self._provider.context
        self._authorization_url: str | None = None
        self._last_status: int | None = None

    def secrets(self) -> list[str]:
        """The credentials and the tokens as they are now: what no message may show."""
        return [*self._config.credentials(), *self._storage.secrets()]

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        step_ups = 0
        while True:
            answer: httpx2.Response | None = None
            flow = self._provider.async_auth_flow(request)
            try:
                outgoing = await self._step(flow, None)
                while outgoing is not None:
                    if outgoing is not request:
                        outgoing = await self._step(flow, await self._fetch(outgoing))
                        continue
                    first = answer is None
                    answer = yield request
                    self._check_challenge(answer)
                    if first and _insufficient_scope(answer):
                        # The SDK authorizes again after this answer: count it first.
                        step_ups += 1
                        self._check_step_ups(step_ups)
                    outgoing = await self._step(flow, answer)
                    if outgoing is not None:
                        answer.extensions[ANSWERED] = True
            finally:
                await flow.aclose()
            if answer is None or not _insufficient_scope(answer):
                return
            # The scope the server asked for was granted and it asks again: authorize
            # again, up to the limit.
            answer.extensions[ANSWERED] = True

    # -- the SDK's flow, one step at a time --------------------------------------------

    async def _step(
        self,
        flow: AsyncGenerator[httpx2.Request, httpx2.Response],
        response: httpx2.Response | None,
    ) -> httpx2.Request | None:
        """The flow's next request, or ``None`` when it is done; its failures as codes,
        raised outside the handler so that the SDK's exception (whose message may quote
        what a server sent) is not their context."""
        try:
            with secrets_kept_out_of_logs(KnownSecrets((), self.secrets)):
                if response is None:
                    return await flow.__anext__()
                return await flow.asend(response)
        except StopAsyncIteration:
            return None
        except FevexError:
            raise
        except OAuthTokenError:
            status = "" if self._last_status is None else f" (HTTP {self._last_status})"
            failure = run_error(
                AUTH_DENIED,
                f"The authorization server of the MCP server {self.where} refused the token "
                f"request{status}. Check the client's credentials and the grant.",
            )
        except OAuthRegistrationError:
            failure = run_error(
                AUTH_FAILED,
                f"The authorization server of the MCP server {self.where} did not register "
                "a usable client. Give a pre-registered client_id= instead.",
            )
        except Exception as error:
            # OAuthFlowError, a metadata document that does not validate, a key that does
            # not sign: only the kind is kept.
            failure = run_error(
                AUTH_FAILED,
                f"The OAuth flow with the MCP server {self.where} failed "
                f"({type(error).__name__}): its metadata, issuer, resource or state did not "
                "hold.",
            )
        raise failure

    def _check_challenge(self, response: httpx2.Response) -> None:
        """Refuse a challenge that names its resource metadata on another origin than the
        server's, before the SDK fetches it."""
        if response.status_code not in (401, 403):
            return
        named = extract_field_from_www_auth(response, "resource_metadata")
        if named is not None and _origin(named) != self._origin:
            raise run_error(
                "SSRF_BLOCKED",
                f"The MCP server {self.where} named its resource metadata on another origin; "
                "fevex only reads it from the server's own.",
                host=urlsplit(named).hostname or "",
            )

    def _check_step_ups(self, step_ups: int) -> None:
        if step_ups > self._config.max_step_ups:
            raise run_error(
                AUTH_STEP_UP_LIMIT,
                f"The MCP server {self.where} kept asking for more scope "
                f"(insufficient_scope) after {self._config.max_step_ups} new "
                "authorizations; fevex stopped.",
            )

    # -- the flow's own requests ---------------------------------------------------------

    async def _fetch(self, request: httpx2.Request) -> httpx2.Response:
        """Send one of the flow's requests through the guarded client, bounded in time
        and size."""
        kind = "no answer in time"
        try:
            with anyio.fail_after(self._config.request_timeout):
                guarded = GuardedTransport(self._policy)
                async with httpx2.AsyncClient(transport=guarded, trust_env=False) as client:
                    sent = await client.send(request, stream=True, follow_redirects=False)
                    try:
                        body = await _bounded_body(sent, self.where)
                    finally:
                        await sent.aclose()
        except FevexError:
            raise
        except httpx2.TransportError as error:
            kind = type(error).__name__
        except TimeoutError:
            pass
        else:
            return self._answer(sent, body, request)
        raise run_error(
            AUTH_UNREACHABLE,
            f"The OAuth flow of the MCP server {self.where} could not reach "
            f"{_shown(request.url)} ({kind}).",
            recoverable=True,
        )

    def _answer(
        self, sent: httpx2.Response, body: bytes, request: httpx2.Request
    ) -> httpx2.Response:
        """``sent``, read, as the response the SDK's flow is given."""
        self._last_status = sent.status_code
        response = httpx2.Response(
            sent.status_code, headers=sent.headers, content=body, request=request
        )
        response.next_request = sent.next_request
        return response

    # -- the app's redirect ------------------------------------------------------------------

    async def redirect_handler(self, authorization_url: str) -> None:
        self._authorization_url = authorization_url

    async def callback_handler(self) -> AuthorizationCodeResult:
        url, self._authorization_url = self._authorization_url, None
        redirect = self._config.redirect
        if url is None or redirect is None:  # pragma: no cover - the SDK calls both in turn
            raise run_error(AUTH_FAILED, "The OAuth flow asked for a redirect it never made.")
        timeout = self._config.redirect_timeout
        # Failures are raised outside the handlers: the callback's own exception may
        # quote the URL, and would otherwise travel as their context.
        try:
            with anyio.fail_after(timeout):
                landed = await redirect(url)
        except TimeoutError:
            failure = run_error(
                AUTH_TIMEOUT,
                f"The authorization for the MCP server {self.where} did not come back from "
                f"the redirect callback within {timeout:g} seconds.",
                recoverable=True,
            )
        except FevexError:
            raise
        except Exception as error:
            failure = run_error(
                AUTH_REDIRECT_FAILED,
                f"The OAuth redirect callback failed ({type(error).__name__}).",
            )
        else:
            return _authorization_result(landed, self.where)
        raise failure


class _Storage:
    """The SDK's token storage over the app's :class:`TokenStore`: one plain-JSON record
    for the server, ``{"tokens", "expires_at", "client"}``. It remembers the values it
    handed out, so that they can be redacted."""

    def __init__(self, config: MCPOAuth, server: str) -> None:
        self._store: TokenStore = config.token_store
        self._server = server
        self._registered = _registered_client(config)
        self.context: OAuthContext | None = None
        # Every token and client secret handed out, the latest last: a server may still
        # echo a token after it was refreshed.
        self._seen: list[str] = []

    def secrets(self) -> list[str]:
        return list(self._seen)

    def _saw(self, *values: str | None) -> None:
        for value in values:
            if value and value not in self._seen:
                self._seen.append(value)
        del self._seen[:-MAX_REMEMBERED]

    async def get_tokens(self) -> OAuthToken | None:
        record = await self._record()
        try:
            tokens = OAuthToken.model_validate(record.get("tokens"))
        except ValidationError:
            return None
        self._saw(tokens.access_token, tokens.refresh_token)
        expires_at = record.get("expires_at")
        if self.context is not None and isinstance(expires_at, int | float):
            # The SDK reads no expiry from storage; without it a stored token that has
            # expired would be sent, refused, and a person asked again instead of refreshed.
            self.context.token_expiry_time = float(expires_at)
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._saw(tokens.access_token, tokens.refresh_token)
        expires_at = None if tokens.expires_in is None else time.time() + tokens.expires_in
        await self._update(
            tokens=tokens.model_dump(mode="json", exclude_none=True), expires_at=expires_at
        )

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self._registered is not None:
            return self._registered
        record = await self._record()
        try:
            client = OAuthClientInformationFull.model_validate(record.get("client"))
        except ValidationError:
            return None
        self._saw(client.client_secret)
        return client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._saw(client_info.client_secret)
        await self._update(client=client_info.model_dump(mode="json", exclude_none=True))

    async def _record(self) -> dict[str, Any]:
        record = await self._store.get(self._server)
        return dict(record) if record is not None else {}

    async def _update(self, **fields: Any) -> None:
        record = await self._record()
        record.update(fields)
        await self._store.set(self._server, record)


def _registered_client(config: MCPOAuth) -> OAuthClientInformationFull | None:
    """The pre-registered client of an authorization-code flow, if the app gave one."""
    if config.grant != "authorization_code" or config.client_id is None:
        return None
    return OAuthClientInformationFull(
        client_id=config.client_id,
        client_secret=config.client_secret,
        redirect_uris=[AnyUrl(config.redirect_uri)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method=config.auth_method,
        client_name=config.client_name,
    )


class _AuthorizationCode(OAuthClientProvider):
    extra_scope: str | None = None

    async def _perform_authorization(self) -> httpx2.Request:
        _add_scope(self.context, self.extra_scope)
        return await super()._perform_authorization()


class _ClientSecret(ClientCredentialsOAuthProvider):
    extra_scope: str | None = None

    async def _perform_authorization(self) -> httpx2.Request:
        _add_scope(self.context, self.extra_scope)
        return await super()._perform_authorization()


class _PrivateKeyJWT(PrivateKeyJWTOAuthProvider):
    extra_scope: str | None = None

    async def _perform_authorization(self) -> httpx2.Request:
        _add_scope(self.context, self.extra_scope)
        return await super()._perform_authorization()


def _add_scope(context: OAuthContext, extra: str | None) -> None:
    """The app's scopes on top of those the SDK selected from the challenge or metadata."""
    context.client_metadata.scope = union_scopes(context.client_metadata.scope, extra)


def _sdk_provider(
    config: MCPOAuth, server_url: str, storage: _Storage, handlers: OAuthAuth
) -> OAuthClientProvider:
    scope = " ".join(config.scopes) or None
    provider: _AuthorizationCode | _ClientSecret | _PrivateKeyJWT
    if config.grant == "client_credentials":
        assert config.client_id is not None
        if config.private_key is not None:
            assertion = SignedJWTParameters(
                issuer=config.client_id,
                subject=config.client_id,
                signing_key=config.private_key,
                signing_algorithm=config.signing_algorithm,
            ).create_assertion_provider()
            provider = _PrivateKeyJWT(
                server_url, storage, config.client_id, assertion, scope, config.issuer
            )
        else:
            assert config.client_secret is not None
            method = config.auth_method
            assert method in ("client_secret_basic", "client_secret_post")
            provider = _ClientSecret(
                server_url,
                storage,
                config.client_id,
                config.client_secret,
                method,
                scope,
                config.issuer,
            )
    else:
        metadata = OAuthClientMetadata(
            redirect_uris=[AnyUrl(config.redirect_uri)],
            client_name=config.client_name,
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method=config.auth_method,
            scope=scope,
        )
        provider = _AuthorizationCode(
            server_url,
            metadata,
            storage,
            handlers.redirect_handler,
            handlers.callback_handler,
            client_metadata_url=config.client_metadata_url,
        )
    provider.extra_scope = scope
    return provider


def _authorization_result(landed: object, where: str) -> AuthorizationCodeResult:
    """The code, state and issuer of the URL the user agent was redirected to."""
    if not isinstance(landed, str):
        raise run_error(
            AUTH_REDIRECT_FAILED,
            "The OAuth redirect callback must return the URL the user agent was redirected "
            f"to, as a string (got {type(landed).__name__}).",
        )
    query = parse_qs(urlsplit(landed.strip()).query)

    def one(name: str) -> str | None:
        values = query.get(name)
        return values[0] if values else None

    error = one("error")
    if error is not None:
        shown = error if _ERROR_CODE.match(error) else "an unreadable error"
        raise run_error(
            AUTH_DENIED,
            f"The authorization server of the MCP server {where} answered the authorization "
            f"request with {shown!r}.",
        )
    code = one("code")
    if not code:
        raise run_error(
            AUTH_REDIRECT_FAILED,
            "The URL the OAuth redirect callback returned has no code parameter.",
        )
    return AuthorizationCodeResult(code=code, state=one("state"), iss=one("iss"))


async def _bounded_body(response: httpx2.Response, where: str) -> bytes:
    body = bytearray()
    async for chunk in response.aiter_raw():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise run_error(
                AUTH_FAILED,
                f"An OAuth document of the MCP server {where} is over "
                f"{MAX_BODY_BYTES} bytes; fevex stopped reading.",
            )
    return bytes(body)


def _insufficient_scope(response: httpx2.Response) -> bool:
    return (
        response.status_code == 403
        and extract_field_from_www_auth(response, "error") == "insufficient_scope"
    )


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port


def _policy(config: MCPOAuth, server_url: str) -> HostPolicy:
    """The guard's rule: the MCP server's own host and port, and what the app allows."""
    _, host, port = _origin(server_url)
    own = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        return HostPolicy([own, *config.allow_hosts])
    except FevexConfigurationError as error:
        message = error.message
        del error
        raise configuration_error(AUTH_INVALID, f"MCPOAuth: {message}") from None


def _shown(url: httpx2.URL) -> str:
    """A URL as a message may show it: no user information, query or fragment."""
    return str(url.copy_with(userinfo=b"", query=None, fragment=None))
