"""OAuth 2.1 against a real protected MCP server on loopback: an agent's run calls a tool
once the flow has completed headlessly (the test's redirect callback follows the
authorization URL), for each kind of client; and the bounds that hold against a server
that misleads or never finishes."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp_oauth_servers import Client

from fevex import (
    FevexConfigurationError,
    FevexRunError,
    RunEvent,
    create_fevex,
    define_agent,
    define_connection,
)
from fevex.observability import ContentPolicy, InMemoryTraceExporter, Observability
from fevex.testing import FakeModel, places_holding
from fevex_mcp import FileTokenStore, InMemoryTokenStore, MCPOAuth, create_mcp_tool_provider

pytestmark = pytest.mark.anyio

REDIRECT_URI = "http://127.0.0.1:9/callback"


def tool_call(name: str, call_id: str = "call-1", **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "input": arguments}]}


async def follow(authorization_url: str) -> str:
    """The user agent's part, headless: open the authorization URL, and return where the
    authorization server sent it back to (without following that)."""
    async with httpx2.AsyncClient() as client:
        answer = await client.get(authorization_url)
    assert answer.status_code == 302, answer.text
    return answer.headers["location"]


def oauth(server: Any, **options: Any) -> MCPOAuth:
    """Options for the test's servers: its authorization server is on another loopback
    port, which the app allows as a test does."""
    options.setdefault("redirect", follow)
    options.setdefault("redirect_uri", REDIRECT_URI)
    return MCPOAuth(allow_hosts=[urlsplit(server.authorization.issuer).netloc], **options)


def make_app(
    server: Any, model: FakeModel, auth: MCPOAuth, remote: str = "search", **app: Any
) -> Any:
    provider = create_mcp_tool_provider(server.url, oauth=auth)
    return create_fevex(
        models={"default": model},
        agents=[define_agent(name="assistant", instructions="Help.", tools=[f"docs__{remote}"])],
        connections=[define_connection(name="docs", provider=provider, allowlist=[remote])],
        **app,
    )


async def output_of(app: Any, run_id: str) -> Any:
    events = await app.list_events(run_id)
    (completed,) = [event for event in events if event.type == "tool.completed"]
    return completed.payload["output"]


# -- the flows ----------------------------------------------------------------------------


async def test_an_agent_calls_a_tool_after_a_headless_authorization_code_flow(
    protected_server: Any,
) -> None:
    model = FakeModel(
        tool_call("docs__search", query="leases"), {"output": "Found it."}, {"output": "Again."}
    )
    app = make_app(protected_server, model, oauth(protected_server, scopes=["profile"]))
    result = await app.run_agent("assistant", "How are leases kept?")

    assert result.output == "Found it."
    assert await output_of(app, result.run_id) == (
        "leases: a lease is renewed by its holder's heartbeat"
    )
    authorization = protected_server.authorization
    # Dynamic registration, as a public client with the app's redirect URI.
    (registration,) = authorization.registrations
    assert registration["redirect_uris"] == [REDIRECT_URI]
    assert registration["token_endpoint_auth_method"] == "none"
    # PKCE S256, the resource parameter, and the scope of the challenge plus the app's.
    (asked,) = authorization.authorizations
    assert asked["code_challenge_method"] == "S256"
    assert asked["resource"] == protected_server.url
    assert set(asked["scope"].split()) == {"docs.read", "profile"}
    (exchange,) = authorization.token_requests
    assert exchange["grant_type"] == "authorization_code"
    assert exchange["authenticated_as"] == "none"
    # Every request after the flow carried the token it issued.
    issued = authorization.issued[0]
    assert protected_server.resource.bearers[0] is None
    assert set(protected_server.resource.bearers[1:]) == {issued}

    # A second run uses the token it holds: no new authorization.
    second = await app.run_agent("assistant", "Again.")
    assert second.output == "Again."
    assert len(authorization.authorizations) == 1


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post", "none"])
async def test_a_pre_registered_client_authenticates_as_configured(
    protected_server: Any, method: str
) -> None:
    secret = None if method == "none" else "pre-registered-secret-3f9a"
    protected_server.authorization.register(Client("fevex-docs", secret, method, [REDIRECT_URI]))
    auth = oauth(
        protected_server,
        client_id="fevex-docs",
        client_secret=secret,
        token_endpoint_auth_method=method,
    )
    app = make_app(
        protected_server, FakeModel(tool_call("docs__search", query="q"), {"output": "ok"}), auth
    )
    result = await app.run_agent("assistant", "Search.")

    assert result.output == "ok"
    authorization = protected_server.authorization
    assert authorization.registrations == []
    (asked,) = authorization.authorizations
    assert asked["client_id"] == "fevex-docs"
    (exchange,) = authorization.token_requests
    assert exchange["authenticated_as"] == method
    assert ("client_secret" in exchange) == (method == "client_secret_post")


@pytest.mark.parametrize(
    ("challenge", "listed", "expected"),
    [
        ("docs.read", ["docs.read", "docs.admin"], "docs.read"),  # the challenge's
        (None, ["docs.read", "docs.admin"], "docs.read docs.admin"),  # the metadata's
        (None, None, None),  # none named anywhere: no scope parameter
    ],
)
async def test_the_scope_comes_from_the_challenge_then_the_metadata(
    protected_server: Any, challenge: str | None, listed: list[str] | None, expected: str | None
) -> None:
    protected_server.resource.challenge_scope = challenge
    protected_server.resource.scopes_supported = listed
    protected_server.authorization.advertise_scopes = False
    model = FakeModel(tool_call("docs__search", query="q"), {"output": "ok"})
    app = make_app(protected_server, model, oauth(protected_server))
    await app.run_agent("assistant", "Search.")

    (asked,) = protected_server.authorization.authorizations
    assert asked.get("scope") == expected


async def test_a_client_id_metadata_document_stands_for_registration(
    protected_server: Any,
) -> None:
    protected_server.authorization.client_id_documents = True
    document = "https://app.example/oauth/client.json"
    auth = oauth(protected_server, client_metadata_url=document)
    model = FakeModel(tool_call("docs__search", query="q"), {"output": "ok"})
    app = make_app(protected_server, model, auth)
    result = await app.run_agent("assistant", "Search.")

    assert result.output == "ok"
    authorization = protected_server.authorization
    assert authorization.registrations == []
    (asked,) = authorization.authorizations
    assert asked["client_id"] == document
    (exchange,) = authorization.token_requests
    assert exchange["client_id"] == document


async def test_a_service_authenticates_with_a_client_secret(protected_server: Any) -> None:
    protected_server.authorization.register(
        Client("batch-job", "service-secret-8d21", "client_secret_basic", [])
    )
    auth = oauth(
        protected_server,
        grant="client_credentials",
        client_id="batch-job",
        client_secret="service-secret-8d21",
        issuer=protected_server.authorization.issuer,
        redirect=None,
    )
    app = make_app(
        protected_server, FakeModel(tool_call("docs__search", query="q"), {"output": "ok"}), auth
    )
    result = await app.run_agent("assistant", "Search.")

    assert result.output == "ok"
    assert protected_server.authorization.authorizations == []
    (exchange,) = protected_server.authorization.token_requests
    assert exchange["grant_type"] == "client_credentials"
    assert exchange["authenticated_as"] == "client_secret_basic"
    assert exchange["resource"] == protected_server.url


async def test_a_service_authenticates_with_a_private_key_jwt(protected_server: Any) -> None:
    private_pem, public_pem = key_pair()
    protected_server.authorization.register(
        Client("signer", None, "private_key_jwt", [], public_key=public_pem)
    )
    auth = oauth(
        protected_server,
        grant="client_credentials",
        client_id="signer",
        private_key=private_pem,
        issuer=protected_server.authorization.issuer,
        redirect=None,
    )
    app = make_app(
        protected_server, FakeModel(tool_call("docs__search", query="q"), {"output": "ok"}), auth
    )
    result = await app.run_agent("assistant", "Search.")

    assert result.output == "ok"
    (exchange,) = protected_server.authorization.token_requests
    assert exchange["authenticated_as"] == "private_key_jwt"
    assert "client_secret" not in exchange


async def test_an_expired_token_is_refreshed_without_asking_again(
    protected_server: Any, tmp_path: Path
) -> None:
    authorization = protected_server.authorization
    authorization.lifetime = 2
    store = FileTokenStore(tmp_path / "tokens.json")
    model = FakeModel(
        tool_call("docs__search", query="one"), {"output": "one"},
        tool_call("docs__search", query="two"), {"output": "two"},
    )  # fmt: skip
    app = make_app(protected_server, model, oauth(protected_server, token_store=store))
    await app.run_agent("assistant", "First.")
    await anyio.sleep(2.5)
    second = await app.run_agent("assistant", "Second.")

    assert second.output == "two"
    # The server refuses an expired token: only a refresh spares a second authorization.
    assert len(authorization.authorizations) == 1
    grants = [request["grant_type"] for request in authorization.token_requests]
    assert grants[0] == "authorization_code"
    assert "refresh_token" in grants[1:]
    # The store holds the refreshed tokens, in a file only its owner may read.
    mode = stat.S_IMODE(os.stat(store.path).st_mode)
    assert mode == 0o600
    record = json.loads(store.path.read_text())[protected_server.url]
    assert record["tokens"]["access_token"] == authorization.issued[-2]


async def test_a_file_store_carries_the_tokens_to_a_new_provider(
    protected_server: Any, tmp_path: Path
) -> None:
    path = tmp_path / "tokens.json"
    for _ in range(2):
        auth = oauth(protected_server, token_store=FileTokenStore(path))
        app = make_app(
            protected_server,
            FakeModel(tool_call("docs__search", query="q"), {"output": "ok"}),
            auth,
        )
        assert (await app.run_agent("assistant", "Search.")).output == "ok"
    assert len(protected_server.authorization.authorizations) == 1
    assert len(protected_server.authorization.registrations) == 1


async def test_a_tool_that_needs_more_scope_steps_up(protected_server: Any) -> None:
    model = FakeModel(tool_call("docs__purge"), {"output": "purged"})
    app = make_app(protected_server, model, oauth(protected_server), remote="purge")
    result = await app.run_agent("assistant", "Purge the index.")

    assert result.output == "purged"
    assert await output_of(app, result.run_id) == "purged"
    first, second = protected_server.authorization.authorizations
    assert first["scope"].split() == ["docs.read"]
    assert set(second["scope"].split()) == {"docs.read", "docs.admin"}


# -- bounded against a hostile or broken server ---------------------------------------------


@pytest.mark.parametrize("max_step_ups", [0, 2])
async def test_a_server_that_keeps_asking_for_scope_is_stopped(
    protected_server: Any, max_step_ups: int
) -> None:
    protected_server.authorization.grantable = {"docs.read"}  # docs.admin is never granted
    auth = oauth(protected_server, max_step_ups=max_step_ups)
    app = make_app(protected_server, FakeModel(tool_call("docs__purge")), auth, remote="purge")
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("assistant", "Purge the index.")

    assert caught.value.code == "MCP_AUTH_STEP_UP_LIMIT"
    # The first authorization, then one per step-up allowed.
    assert len(protected_server.authorization.authorizations) == 1 + max_step_ups


async def test_resource_metadata_on_another_host_is_refused(protected_server: Any) -> None:
    resource = protected_server.resource
    resource.metadata_url = "http://127.0.0.2:9/.well-known/oauth-protected-resource"
    app = make_app(protected_server, FakeModel({"output": "never"}), oauth(protected_server))
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("assistant", "Search.")

    assert caught.value.code == "SSRF_BLOCKED"
    assert resource.metadata_requests == 0
    assert protected_server.authorization.authorizations == []


@pytest.mark.parametrize(
    "authorization_server",
    ["http://10.0.0.7", "http://169.254.169.254", "http://[::1]:9", "http://localhost:9"],
)
async def test_an_authorization_server_at_a_private_address_is_refused(
    protected_server: Any, authorization_server: str
) -> None:
    protected_server.resource.authorization_servers = [authorization_server]
    app = make_app(protected_server, FakeModel({"output": "never"}), oauth(protected_server))
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("assistant", "Search.")

    assert caught.value.code == "SSRF_BLOCKED"
    assert protected_server.authorization.authorizations == []


async def test_an_authorization_server_on_loopback_needs_the_apps_permission(
    protected_server: Any,
) -> None:
    auth = MCPOAuth(redirect=follow, redirect_uri=REDIRECT_URI)  # no allow_hosts
    app = make_app(protected_server, FakeModel({"output": "never"}), auth)
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("assistant", "Search.")

    assert caught.value.code == "SSRF_BLOCKED"
    # The server's own metadata was read (its origin is the app's choice); nothing further.
    assert protected_server.resource.metadata_requests >= 1
    assert protected_server.authorization.registrations == []


async def test_a_flow_that_never_finishes_ends_in_a_timeout(protected_server: Any) -> None:
    started = anyio.Event()

    async def never(authorization_url: str) -> str:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    auth = oauth(protected_server, redirect=never, redirect_timeout=0.3)
    app = make_app(protected_server, FakeModel({"output": "never"}), auth)
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("assistant", "Search.")

    assert started.is_set()
    assert caught.value.code == "MCP_AUTH_TIMEOUT"
    assert caught.value.recoverable


async def test_a_denied_authorization_ends_in_a_stable_code(protected_server: Any) -> None:
    async def deny(authorization_url: str) -> str:
        state = parse_qs(urlsplit(authorization_url).query)["state"][0]
        return f"{REDIRECT_URI}?error=access_denied&state={state}"

    app = make_app(
        protected_server, FakeModel({"output": "never"}), oauth(protected_server, redirect=deny)
    )
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("assistant", "Search.")

    assert caught.value.code == "MCP_AUTH_DENIED"
    assert "access_denied" in caught.value.message
    assert protected_server.authorization.token_requests == []


async def test_a_failing_redirect_callback_is_reported_by_its_type(protected_server: Any) -> None:
    async def broken(authorization_url: str) -> str:
        raise RuntimeError(f"could not open {authorization_url}")

    app = make_app(
        protected_server, FakeModel({"output": "never"}), oauth(protected_server, redirect=broken)
    )
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("assistant", "Search.")

    assert caught.value.code == "MCP_AUTH_REDIRECT_FAILED"
    assert "RuntimeError" in caught.value.message
    assert "code_challenge" not in caught.value.message


# -- credentials stay out of reach --------------------------------------------------------------


async def test_tokens_and_client_credentials_reach_no_record(
    protected_server: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "pre-registered-secret-77c1"
    protected_server.authorization.register(
        Client("fevex-docs", secret, "client_secret_post", [REDIRECT_URI])
    )
    database = tmp_path / "runs.db"
    exporter = InMemoryTraceExporter()
    events: list[RunEvent] = []
    auth = oauth(
        protected_server,
        client_id="fevex-docs",
        client_secret=secret,
        token_endpoint_auth_method="client_secret_post",
        token_store=InMemoryTokenStore(),
    )
    model = FakeModel(
        tool_call("docs__search", query="q"), {"output": "ok"}, tool_call("docs__whoami")
    )
    provider = create_mcp_tool_provider(protected_server.url, oauth=auth)
    app = create_fevex(
        models={"default": model},
        agents=[
            define_agent(
                name="assistant", instructions="Help.", tools=["docs__search", "docs__whoami"]
            )
        ],
        connections=[
            define_connection(name="docs", provider=provider, allowlist=["search", "whoami"])
        ],
        run_store=f"sqlite:///{database}",
        on_event=events.append,
        observability=Observability(
            exporters=[exporter],
            content=ContentPolicy(include={"input", "output", "error_message"}),
            export_interval=0.01,
        ),
    )
    try:
        assert (await app.run_agent("assistant", "Search.")).output == "ok"
        # The server echoes the caller's token in a failed tool result.
        with pytest.raises(FevexRunError) as caught:
            await app.run_agent("assistant", "Who am I?")
        error = caught.value
        assert error.code == "MCP_TOOL_ERROR"
        assert "[redacted]" in error.message
        await app.flush_observability()
        runs = [run.to_json() for run in await app.list_runs()]
        stored = [event.to_json() for run in runs for event in await app.list_events(run["id"])]
    finally:
        await app.close()

    issued = protected_server.authorization.issued
    assert len(issued) == 2  # an access token and a refresh token
    texts = {
        "runs": json.dumps(runs),
        "stored events": json.dumps(stored),
        "observed events": json.dumps([event.payload for event in events]),
        "spans": repr(exporter.spans),
        "logs": "\n".join(
            f"{record.name} {record.getMessage()} {record.exc_text or ''}"
            for record in caplog.records
            if not record.name.startswith(("mcp.server", "uvicorn", "starlette"))
        ),
    }
    files = store_files(database)
    for value in (*issued, secret):
        assert places_holding(value, error) == [], value
        for where, text in texts.items():
            assert value not in text, where
        for name, data in files.items():
            assert value.encode() not in data, name


async def test_a_token_echoed_in_the_session_that_obtained_it_is_redacted(
    protected_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    protected_server.resource.echo_in_list = True
    app = make_app(protected_server, FakeModel({"output": "never"}), oauth(protected_server))
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("assistant", "Search.")

    error = caught.value
    assert error.code == "MCP_PROTOCOL_ERROR"
    assert "[redacted]" in error.message
    token = protected_server.authorization.issued[0]
    assert places_holding(token, error) == []
    logs = [
        f"{record.name} {record.getMessage()} {record.exc_text or ''}"
        for record in caplog.records
        if not record.name.startswith(("mcp.server", "uvicorn", "starlette"))
    ]
    assert [text for text in logs if token in text] == []


async def test_a_private_key_is_in_no_message_of_a_failed_flow(protected_server: Any) -> None:
    private_pem, _ = key_pair()
    # The authorization server knows no such client: the token request is refused.
    auth = oauth(
        protected_server,
        grant="client_credentials",
        client_id="stranger",
        private_key=private_pem,
        issuer=protected_server.authorization.issuer,
        redirect=None,
    )
    assert private_pem not in repr(auth)
    app = make_app(protected_server, FakeModel({"output": "never"}), auth)
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("assistant", "Search.")

    assert caught.value.code == "MCP_AUTH_DENIED"
    assert "HTTP 401" in caught.value.message
    assert places_holding(private_pem, caught.value) == []
    key_body = private_pem.splitlines()[1]
    assert places_holding(key_body, caught.value) == []


# -- configuration --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {},  # an authorization-code flow needs a redirect callback
        {"redirect": follow, "client_secret": "s"},  # a secret without its client id
        {"redirect": follow, "client_id": "c", "token_endpoint_auth_method": "client_secret_post"},
        {"grant": "client_credentials", "client_id": "c", "client_secret": "s"},  # no issuer
        {"grant": "client_credentials", "client_id": "c", "issuer": "https://as.example"},
        {"redirect": follow, "scopes": "docs.read"},
        {"redirect": follow, "max_step_ups": -1},
        {"redirect": follow, "redirect_timeout": 0},
        {"redirect": follow, "client_metadata_url": "http://client.example/meta.json"},
    ],
)
def test_bad_options_are_refused_when_made(options: dict[str, Any]) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        MCPOAuth(**options)
    assert caught.value.code == "MCP_AUTH_INVALID"


def test_oauth_is_refused_for_a_stdio_server_and_bad_hosts_for_any() -> None:
    auth = MCPOAuth(redirect=follow)
    with pytest.raises(FevexConfigurationError) as caught:
        create_mcp_tool_provider(command="server", oauth=auth)
    assert caught.value.code == "MCP_AUTH_INVALID"
    with pytest.raises(FevexConfigurationError) as caught:
        create_mcp_tool_provider(
            "https://docs.example/mcp", oauth=MCPOAuth(redirect=follow, allow_hosts=["a/b"])
        )
    assert caught.value.code == "MCP_AUTH_INVALID"


def test_secrets_are_left_out_of_the_options_repr() -> None:
    auth = MCPOAuth(redirect=follow, client_id="c", client_secret="hidden-secret-42")
    assert "hidden-secret-42" not in repr(auth)


# -- a server of the 2025-03-26 specification ---------------------------------------------
# No protected-resource metadata; the authorization server's metadata at the MCP server's
# origin. The flow reaches it as that specification says, and keeps the checks the current
# one requires: the metadata names the issuer its URL was built from (RFC 8414 §3.3), and
# every URL it names passes the SSRF guard.


def same_origin_oauth() -> MCPOAuth:
    # No allow_hosts: the authorization server is on the MCP server's own origin, which
    # the app chose.
    return MCPOAuth(redirect=follow, redirect_uri=REDIRECT_URI)


async def test_the_metadata_at_the_servers_origin_is_followed(legacy_protected_server: Any) -> None:
    model = FakeModel(tool_call("docs__search", query="leases"), {"output": "Found it."})
    app = make_app(legacy_protected_server, model, same_origin_oauth())

    result = await app.run_agent("assistant", "How are leases kept?")

    assert result.output == "Found it."
    assert await output_of(app, result.run_id) == (
        "leases: a lease is renewed by its holder's heartbeat"
    )
    authorization = legacy_protected_server.authorization
    # The protected-resource metadata was looked for (404), then the endpoints the
    # authorization server's metadata names, under /oauth/, were used: registration,
    # authorization with PKCE, the token exchange.
    assert legacy_protected_server.resource.metadata_requests >= 1
    (registration,) = authorization.registrations
    assert registration["redirect_uris"] == [REDIRECT_URI]
    (asked,) = authorization.authorizations
    assert asked["code_challenge_method"] == "S256"
    (exchange,) = authorization.token_requests
    assert exchange["grant_type"] == "authorization_code"
    assert set(legacy_protected_server.resource.bearers[1:]) == {authorization.issued[0]}


async def test_metadata_naming_another_issuer_than_the_origin_is_refused(
    legacy_protected_server: Any,
) -> None:
    # What @modelcontextprotocol/conformance 0.1.16's auth/2025-03-26-oauth-metadata-
    # backcompat serves: the metadata at the origin's well-known path, naming the issuer
    # <origin>/oauth, whose metadata would be at /.well-known/oauth-authorization-server/oauth.
    authorization = legacy_protected_server.authorization
    authorization.issuer = f"{legacy_protected_server.resource.base}/oauth"
    app = make_app(legacy_protected_server, FakeModel({"output": "never"}), same_origin_oauth())

    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("assistant", "Search.")

    assert caught.value.code == "MCP_AUTH_FAILED"
    assert "issuer" in caught.value.message
    assert authorization.registrations == []
    assert authorization.authorizations == []


@pytest.mark.parametrize("endpoints", ["http://10.0.0.7", "http://169.254.169.254/oauth"])
async def test_endpoints_the_metadata_names_on_a_private_address_are_refused(
    legacy_protected_server: Any, endpoints: str
) -> None:
    authorization = legacy_protected_server.authorization
    authorization.endpoint_base = endpoints
    app = make_app(legacy_protected_server, FakeModel({"output": "never"}), same_origin_oauth())

    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("assistant", "Search.")

    assert caught.value.code == "SSRF_BLOCKED"
    assert authorization.registrations == []
    assert authorization.authorizations == []


def store_files(database: Path) -> dict[str, bytes]:
    """The run store's database and its journal files, as bytes."""
    return {
        path.name: path.read_bytes()
        for path in database.parent.iterdir()
        if path.name.startswith(database.name)
    }


def key_pair() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public
