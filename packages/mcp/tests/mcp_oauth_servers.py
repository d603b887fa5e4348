"""An OAuth-protected MCP server on loopback, for the OAuth tests: an authorization server
(a small Starlette app written here: metadata, dynamic registration, authorization with
PKCE, token endpoint with client_secret_basic, client_secret_post, none and
private_key_jwt, refresh, client credentials) and a resource server (the SDK's MCPServer
over Streamable HTTP behind a bearer check that answers 401 with its protected-resource
metadata, and 403 ``insufficient_scope`` for a tool that needs more scope).

Both record what they saw, so that tests can assert the flow the client ran.

``legacy_protected_server`` lays the same two out as a 2025-03-26 server does: one origin,
no protected-resource metadata (404), a plain ``Bearer`` challenge, and the authorization
server's metadata at the origin's ``/.well-known/oauth-authorization-server``, its
endpoints under ``/oauth/``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import jwt
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
# conftest's ``serve``: the app on a free loopback port, as (server, task, port).
Serve = Callable[[Any], Awaitable[tuple[Any, Any, int]]]

READ = "docs.read"
ADMIN = "docs.admin"


@dataclass
class Client:
    client_id: str
    secret: str | None
    method: str
    redirect_uris: list[str]
    public_key: str | None = None


@dataclass
class Grant:
    client_id: str
    scope: set[str]
    resource: str | None
    expires_at: float


@dataclass
class AuthorizationServer:
    """What the authorization server knows and saw."""

    issuer: str = ""
    # Where its endpoints are, when not at the issuer (a prefix on the issuer's origin).
    endpoint_base: str = ""
    clients: dict[str, Client] = field(default_factory=dict)
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    tokens: dict[str, Grant] = field(default_factory=dict)
    refresh_tokens: dict[str, Grant] = field(default_factory=dict)
    # Scopes it grants; anything else asked for is left out of the grant.
    grantable: set[str] = field(default_factory=lambda: {READ, ADMIN})
    lifetime: int = 3600
    # Whether its metadata lists the scopes it grants.
    advertise_scopes: bool = True
    # Client ID metadata documents: an https client_id is the URL of the client's document.
    # A real server fetches it; this one, which may not leave loopback, trusts it.
    client_id_documents: bool = False
    registrations: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[dict[str, str]] = field(default_factory=list)
    token_requests: list[dict[str, Any]] = field(default_factory=list)
    issued: list[str] = field(default_factory=list)

    def register(self, client: Client) -> None:
        self.clients[client.client_id] = client

    def metadata(self) -> dict[str, Any]:
        endpoints = self.endpoint_base or self.issuer
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{endpoints}/authorize",
            "token_endpoint": f"{endpoints}/token",
            "registration_endpoint": f"{endpoints}/register",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": [
                "client_secret_basic",
                "client_secret_post",
                "none",
                "private_key_jwt",
            ],
            "client_id_metadata_document_supported": self.client_id_documents,
        } | ({"scopes_supported": sorted(self.grantable)} if self.advertise_scopes else {})

    def issue(
        self, client_id: str, scope: set[str], resource: str | None, refresh: bool
    ) -> dict[str, Any]:
        granted = scope & self.grantable
        access = "at-" + secrets.token_urlsafe(24)
        grant = Grant(client_id, granted, resource, time.time() + self.lifetime)
        self.tokens[access] = grant
        self.issued.append(access)
        answer: dict[str, Any] = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.lifetime,
            "scope": " ".join(sorted(granted)),
        }
        if refresh:
            token = "rt-" + secrets.token_urlsafe(24)
            self.refresh_tokens[token] = grant
            self.issued.append(token)
            answer["refresh_token"] = token
        return answer

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/.well-known/oauth-authorization-server", self._metadata),
                Route("/register", self._register, methods=["POST"]),
                Route("/authorize", self._authorize),
                Route("/token", self._token, methods=["POST"]),
            ]
        )

    async def _metadata(self, request: Request) -> Response:
        return JSONResponse(self.metadata())

    async def _register(self, request: Request) -> Response:
        body = await request.json()
        self.registrations.append(body)
        method = body.get("token_endpoint_auth_method") or "client_secret_basic"
        client = Client(
            client_id="dyn-" + secrets.token_urlsafe(8),
            secret=None if method == "none" else "cs-" + secrets.token_urlsafe(16),
            method=method,
            redirect_uris=list(body.get("redirect_uris") or []),
        )
        self.register(client)
        answer = {**body, "client_id": client.client_id}
        if client.secret is not None:
            answer["client_secret"] = client.secret
        return JSONResponse(answer, status_code=201)

    async def _authorize(self, request: Request) -> Response:
        query = dict(request.query_params)
        self.authorizations.append(query)
        client_id = query.get("client_id", "")
        if self.client_id_documents and client_id.startswith("https://"):
            self.clients.setdefault(
                client_id, Client(client_id, None, "none", [query.get("redirect_uri", "")])
            )
        client = self.clients.get(client_id)
        if client is None or query.get("redirect_uri") not in client.redirect_uris:
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        if query.get("response_type") != "code" or query.get("code_challenge_method") != "S256":
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        code = "code-" + secrets.token_urlsafe(16)
        self.codes[code] = {
            "client_id": client.client_id,
            "challenge": query["code_challenge"],
            "redirect_uri": query["redirect_uri"],
            "resource": query.get("resource"),
            "scope": set(query.get("scope", "").split()),
        }
        back = {"code": code, "state": query.get("state", ""), "iss": self.issuer}
        return RedirectResponse(f"{query['redirect_uri']}?{urlencode(back)}", status_code=302)

    async def _token(self, request: Request) -> Response:
        form = dict(await request.form())
        seen = {**form, "authorization": request.headers.get("authorization")}
        self.token_requests.append(seen)
        client = self._authenticate(request, form)
        if client is None:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        seen["authenticated_as"] = client.method
        grant_type = form.get("grant_type")
        if grant_type == "authorization_code":
            code = self.codes.pop(str(form.get("code")), None)
            verifier = str(form.get("code_verifier", ""))
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
            if (
                code is None
                or code["client_id"] != client.client_id
                or code["redirect_uri"] != form.get("redirect_uri")
                or challenge.decode().rstrip("=") != code["challenge"]
                or code["resource"] != form.get("resource")
            ):
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            return JSONResponse(self.issue(client.client_id, code["scope"], code["resource"], True))
        if grant_type == "refresh_token":
            grant = self.refresh_tokens.pop(str(form.get("refresh_token")), None)
            if grant is None or grant.client_id != client.client_id:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            return JSONResponse(self.issue(client.client_id, grant.scope, grant.resource, True))
        if grant_type == "client_credentials":
            scope = set(str(form.get("scope", "")).split()) or {READ}
            resource = form.get("resource")
            return JSONResponse(
                self.issue(client.client_id, scope, resource and str(resource), False)
            )
        return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)

    def _authenticate(self, request: Request, form: dict[str, Any]) -> Client | None:
        header = request.headers.get("authorization", "")
        if header.startswith("Basic "):
            client_id, _, secret = base64.b64decode(header[6:]).decode().partition(":")
            client = self.clients.get(client_id)
            if client is not None and client.secret is not None and client.secret == secret:
                return Client(client.client_id, client.secret, "client_secret_basic", [])
            return None
        if (
            form.get("client_assertion_type")
            == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        ):
            assertion = str(form.get("client_assertion"))
            client_id = jwt.decode(assertion, options={"verify_signature": False}).get("sub")
            client = self.clients.get(str(client_id))
            if client is None or client.public_key is None:
                return None
            try:
                jwt.decode(
                    assertion,
                    client.public_key,
                    algorithms=["RS256"],
                    audience=[self.issuer, f"{self.issuer}/"],
                )
            except jwt.PyJWTError:
                return None
            return Client(client.client_id, None, "private_key_jwt", [])
        client = self.clients.get(str(form.get("client_id")))
        if client is None:
            return None
        if "client_secret" in form:
            if client.secret == form["client_secret"]:
                return Client(client.client_id, client.secret, "client_secret_post", [])
            return None
        return Client(client.client_id, None, "none", []) if client.secret is None else None


@dataclass
class ResourceServer:
    """The MCP server's side: its URL, what it demands and what it saw."""

    url: str = ""
    base: str = ""
    authorization: AuthorizationServer = field(default_factory=AuthorizationServer)
    # What the 401 challenge names as resource metadata (its own, unless a test changes it).
    metadata_url: str = ""
    # The authorization servers its metadata lists (the test's, unless a test changes it).
    authorization_servers: list[str] = field(default_factory=list)
    # The scope its 401 challenge names, and the scopes its metadata lists (None: none).
    challenge_scope: str | None = READ
    scopes_supported: list[str] | None = field(default_factory=lambda: [READ, ADMIN])
    # Tools that need more than docs.read, and the scope they need.
    needs: dict[str, str] = field(default_factory=lambda: {"purge": ADMIN})
    bearers: list[str | None] = field(default_factory=list)
    metadata_requests: int = 0
    # A hostile server: it answers tools/list with an error that quotes the caller's token,
    # streamed.
    echo_in_list: bool = False
    # False for a 2025-03-26 server: no protected-resource metadata, a plain challenge, and
    # tokens without a resource (a client sends none when it found no such metadata).
    publishes_metadata: bool = True

    def wrap(self, app: ASGIApp) -> ASGIApp:
        async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            if scope["path"].startswith("/.well-known/oauth-protected-resource"):
                self.metadata_requests += 1
                if not self.publishes_metadata:
                    await _send_json(send, 404, {"error": "not_found"})
                    return
                document: dict[str, Any] = {
                    "resource": self.url,
                    "authorization_servers": self.authorization_servers,
                }
                if self.scopes_supported is not None:
                    document["scopes_supported"] = self.scopes_supported
                await _send_json(send, 200, document)
                return
            headers = {key.decode().lower(): value.decode() for key, value in scope["headers"]}
            bearer = headers.get("authorization", "").removeprefix("Bearer ") or None
            self.bearers.append(bearer)
            grant = self.authorization.tokens.get(bearer or "")
            resources = {self.url} if self.publishes_metadata else {self.url, None}
            if grant is None or grant.expires_at < time.time() or grant.resource not in resources:
                await _send_json(send, 401, {"error": "invalid_token"}, self._challenge())
                return
            messages, body = await _read_body(receive, scope["method"] == "POST")
            if self.echo_in_list and _method(body) == "tools/list":
                error = {"code": -32001, "message": f"token {bearer} is not welcome here"}
                answer = {"jsonrpc": "2.0", "id": json.loads(body)["id"], "error": error}
                # As an SSE stream: the SDK logs each streamed message, at DEBUG.
                stream = b"event: message\r\ndata: " + json.dumps(answer).encode() + b"\r\n\r\n"
                headers = [(b"content-type", b"text/event-stream")]
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": stream})
                return
            needed = self._needed(body)
            if needed is not None and needed not in grant.scope:
                wanted = " ".join(sorted({READ, needed}))
                challenge = (
                    f'Bearer error="insufficient_scope", scope="{wanted}", '
                    f'resource_metadata="{self.metadata_url}"'
                )
                await _send_json(send, 403, {"error": "insufficient_scope"}, challenge)
                return

            async def replay() -> Message:
                return messages.pop(0) if messages else await receive()

            await app(scope, replay, send)

        return wrapped

    def _challenge(self) -> str:
        if not self.publishes_metadata:
            return "Bearer"
        challenge = f'Bearer resource_metadata="{self.metadata_url}"'
        if self.challenge_scope is not None:
            challenge += f', scope="{self.challenge_scope}"'
        return challenge

    def _needed(self, body: bytes) -> str | None:
        try:
            message = json.loads(body)
        except ValueError:
            return None
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return None
        return self.needs.get(str(message.get("params", {}).get("name")))


def _method(body: bytes) -> str | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    return str(message.get("method")) if isinstance(message, dict) else None


async def _read_body(receive: Receive, more: bool) -> tuple[list[Message], bytes]:
    messages: list[Message] = []
    body = bytearray()
    while more:
        message = await receive()
        messages.append(message)
        body += message.get("body", b"")
        more = message["type"] == "http.request" and message.get("more_body", False)
    return messages, bytes(body)


async def _send_json(send: Send, status: int, document: Any, challenge: str | None = None) -> None:
    body = json.dumps(document).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if challenge is not None:
        headers.append((b"www-authenticate", challenge.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def build_docs_server() -> MCPServer:
    server = MCPServer("protected-docs", log_level="WARNING")

    @server.tool(description="Search the documentation.", structured_output=False)
    def search(query: str) -> str:
        return f"{query}: a lease is renewed by its holder's heartbeat"

    @server.tool(description="Purge the index (needs docs.admin).", structured_output=False)
    def purge() -> str:
        return "purged"

    @server.tool(description="Says who is asking, in a failure.")
    def whoami(ctx: Context) -> CallToolResult:
        request = ctx.request_context.request
        echoed = getattr(request, "headers", {}).get("authorization", "")
        return CallToolResult(is_error=True, content=[TextContent(text=f"not allowed: {echoed}")])

    return server


@dataclass
class ProtectedServer:
    url: str
    resource: ResourceServer
    authorization: AuthorizationServer


@asynccontextmanager
async def protected_server(serve: Serve) -> AsyncIterator[ProtectedServer]:
    """The authorization server and the OAuth-protected MCP server, on two loopback ports."""
    authorization = AuthorizationServer()
    auth_running, auth_task, auth_port = await serve(authorization.app())
    authorization.issuer = f"http://127.0.0.1:{auth_port}"
    resource = ResourceServer(authorization=authorization)
    app = resource.wrap(build_docs_server().streamable_http_app())
    running, task, port = await serve(app)
    resource.base = f"http://127.0.0.1:{port}"
    resource.url = f"{resource.base}/mcp"
    resource.metadata_url = f"{resource.base}/.well-known/oauth-protected-resource/mcp"
    resource.authorization_servers = [authorization.issuer]
    try:
        yield ProtectedServer(resource.url, resource, authorization)
    finally:
        running.should_exit = True
        auth_running.should_exit = True
        await task
        await auth_task


def _one_origin(authorization: AuthorizationServer, resource: ASGIApp) -> ASGIApp:
    """The authorization server's metadata at the origin's well-known path and its
    endpoints under ``/oauth/``, beside the MCP server (which has the rest)."""
    served = authorization.app()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path == "/.well-known/oauth-authorization-server":
            await served(scope, receive, send)
        elif scope["type"] == "http" and path.startswith("/oauth/"):
            inner = {**scope, "path": path.removeprefix("/oauth")}
            inner.pop("raw_path", None)
            await served(inner, receive, send)
        else:
            await resource(scope, receive, send)

    return app


@asynccontextmanager
async def legacy_protected_server(serve: Serve) -> AsyncIterator[ProtectedServer]:
    """A 2025-03-26 server: the MCP server and its authorization server on one origin, no
    protected-resource metadata; the authorization server's issuer is the origin."""
    authorization = AuthorizationServer(advertise_scopes=False)
    resource = ResourceServer(
        authorization=authorization, publishes_metadata=False, challenge_scope=None
    )
    app = _one_origin(authorization, resource.wrap(build_docs_server().streamable_http_app()))
    running, task, port = await serve(app)
    resource.base = f"http://127.0.0.1:{port}"
    resource.url = f"{resource.base}/mcp"
    authorization.issuer = resource.base
    authorization.endpoint_base = f"{resource.base}/oauth"
    try:
        yield ProtectedServer(resource.url, resource, authorization)
    finally:
        running.should_exit = True
        await task
