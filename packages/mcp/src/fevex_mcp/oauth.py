"""How an app asks a provider to authorize itself with OAuth 2.1, as the MCP authorization
specification describes it: :class:`MCPOAuth`, given as ``create_mcp_tool_provider(url,
oauth=MCPOAuth(...))``.

Only the options live here, checked when they are made; the flow itself
(:mod:`fevex_mcp.oauth_flow`) imports the MCP SDK and runs when a server first answers
HTTP 401. The client secret and the private key are credentials: they are left out of
``repr`` and of every message.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, overload
from urllib.parse import urlsplit

import anyio

from fevex_mcp.errors import AUTH_INVALID, configuration_error
from fevex_mcp.token_stores import InMemoryTokenStore, TokenStore

__all__ = [
    "ANSWERED",
    "KnownSecrets",
    "MCPOAuth",
    "OAuthRedirect",
    "TokenEndpointAuthMethod",
    "terminal_redirect",
]

OAuthRedirect = Callable[[str], Awaitable[str]]
TokenEndpointAuthMethod = Literal["client_secret_basic", "client_secret_post", "none"]
Grant = Literal["authorization_code", "client_credentials"]

DEFAULT_REDIRECT_URI = "http://localhost:33418/callback"
# The mark the flow leaves on a response it answered (a challenge it authorized for), so
# that the session does not report that response's status as its failure.
ANSWERED = "fevex_mcp.oauth_answered"


@dataclass(frozen=True)
class MCPOAuth:
    """OAuth for one MCP server over Streamable HTTP.

    ``grant="authorization_code"`` (the default) acts for a person: when the server
    answers 401, the flow discovers the server's protected-resource metadata and its
    authorization server, registers a client (dynamically, through ``client_metadata_url``,
    or as the pre-registered ``client_id``), and calls ``redirect`` with the authorization
    URL (PKCE S256, the ``resource`` parameter). ``redirect`` is the app's: it shows the
    URL to the person (or a test follows it) and returns the URL the user agent was sent
    back to, at ``redirect_uri``, with its ``code`` and ``state``. It has
    ``redirect_timeout`` seconds.

    ``grant="client_credentials"`` acts for a service: ``client_id`` with ``client_secret``
    or with ``private_key`` (a PEM key signing an RFC 7523 assertion, ``private_key_jwt``),
    sent only to the authorization server whose issuer is ``issuer``.

    Tokens and a dynamically registered client are kept in ``token_store`` (in memory by
    default); they are refreshed when they expire. ``scopes`` are asked for on top of
    those the server's challenge or metadata select. A server that asks for more scope
    (``insufficient_scope``) gets at most ``max_step_ups`` new authorizations per request.
    Every URL the flow fetches that is not on the MCP server's own origin must be a public
    address unless ``allow_hosts`` names it (``"host"`` or ``"host:port"``, as the core's
    SSRF guard, :class:`fevex.net.HostPolicy`, reads them).
    """

    redirect: OAuthRedirect | None = None
    redirect_uri: str = DEFAULT_REDIRECT_URI
    grant: Grant = "authorization_code"
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    token_endpoint_auth_method: TokenEndpointAuthMethod | None = None
    private_key: str | None = field(default=None, repr=False)
    signing_algorithm: str = "RS256"
    issuer: str | None = None
    client_metadata_url: str | None = None
    client_name: str = "fevex"
    scopes: Sequence[str] = ()
    token_store: TokenStore = field(default_factory=InMemoryTokenStore)
    redirect_timeout: float = 300.0
    max_step_ups: int = 2
    allow_hosts: Sequence[str] = ()
    request_timeout: float = 30.0

    def __post_init__(self) -> None:
        problem = _option_problem(self) or _grant_problem(self)
        if problem is not None:
            raise configuration_error(AUTH_INVALID, f"MCPOAuth: {problem}.")
        object.__setattr__(self, "scopes", tuple(self.scopes))
        object.__setattr__(self, "allow_hosts", tuple(self.allow_hosts))

    @property
    def auth_method(self) -> TokenEndpointAuthMethod | Literal["private_key_jwt"]:
        """How the client authenticates at the token endpoint."""
        if self.private_key is not None:
            return "private_key_jwt"
        if self.token_endpoint_auth_method is not None:
            return self.token_endpoint_auth_method
        return "none" if self.client_secret is None else "client_secret_basic"

    def credentials(self) -> Iterator[str]:
        """The configured values no message, log or record may show."""
        for value in (self.client_secret, self.private_key):
            if value:
                yield value


def _grant_problem(oauth: MCPOAuth) -> str | None:
    if oauth.grant == "authorization_code":
        if not callable(oauth.redirect):
            return (
                "the authorization_code grant needs redirect=, an async callable that "
                "receives the authorization URL and returns the URL the user agent was "
                "redirected to"
            )
        if oauth.private_key is not None:
            return "private_key= is for grant='client_credentials'"
        if oauth.client_secret is not None and oauth.client_id is None:
            return "client_secret= needs the client_id= it belongs to"
        if oauth.auth_method in ("client_secret_basic", "client_secret_post"):
            if oauth.client_secret is None:
                return f"token_endpoint_auth_method={oauth.auth_method!r} needs client_secret="
        elif oauth.client_secret is not None:
            return "token_endpoint_auth_method='none' sends no client_secret; leave it out"
        return None
    if oauth.grant != "client_credentials":
        return f"grant must be 'authorization_code' or 'client_credentials', not {oauth.grant!r}"
    if not oauth.client_id:
        return "the client_credentials grant needs client_id="
    if (oauth.client_secret is None) == (oauth.private_key is None):
        return "the client_credentials grant needs client_secret= or private_key=, one of them"
    if oauth.auth_method == "none":
        return "the client_credentials grant authenticates the client; 'none' is not a method"
    if not _is_http_url(oauth.issuer):
        return (
            "the client_credentials grant needs issuer=, the http(s) issuer URL of the "
            "authorization server these credentials belong to (they are sent nowhere else)"
        )
    return None


def _option_problem(oauth: MCPOAuth) -> str | None:
    if oauth.token_endpoint_auth_method not in (
        None,
        "client_secret_basic",
        "client_secret_post",
        "none",
    ):
        return (
            "token_endpoint_auth_method is 'client_secret_basic', 'client_secret_post' or "
            f"'none', not {oauth.token_endpoint_auth_method!r}"
        )
    if not _is_http_url(oauth.redirect_uri):
        return "redirect_uri must be an http(s) URL"
    url = oauth.client_metadata_url
    if url is not None and not (url.startswith("https://") and urlsplit(url).path not in ("", "/")):
        return "client_metadata_url must be an https URL with a path"
    if isinstance(oauth.scopes, str) or not all(_is_scope(scope) for scope in oauth.scopes):
        return "scopes is a list of scope names without spaces"
    if isinstance(oauth.allow_hosts, str):
        return "allow_hosts is a list of hosts, not one string"
    if not isinstance(oauth.token_store, TokenStore):
        return "token_store must have async get(server) and set(server, record) methods"
    for name in ("redirect_timeout", "request_timeout"):
        value = getattr(oauth, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            return f"{name} must be a positive number of seconds"
    steps = oauth.max_step_ups
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        return "max_step_ups must be a whole number, 0 or more"
    return None


def _is_http_url(url: object) -> bool:
    if not isinstance(url, str):
        return False
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def _is_scope(scope: object) -> bool:
    return isinstance(scope, str) and bool(scope) and not any(c.isspace() for c in scope)


class KnownSecrets(Sequence[str]):
    """The secrets of one session, read afresh at each use: the header values, and the
    OAuth client's credentials and tokens as they are at that moment (a flow that runs
    during the session adds its tokens)."""

    def __init__(self, fixed: Iterable[str], live: Callable[[], Iterable[str]] | None) -> None:
        self._fixed = tuple(fixed)
        self._live = live

    def _all(self) -> tuple[str, ...]:
        return self._fixed if self._live is None else (*self._fixed, *self._live())

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._all())

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __repr__(self) -> str:
        return f"KnownSecrets({len(self)} values)"


async def terminal_redirect(authorization_url: str) -> str:
    """A ``redirect`` for command-line apps: print the authorization URL (to stderr) and
    read the URL the browser was redirected to from standard input."""

    def ask() -> str:
        print(f"To authorize, open this URL:\n{authorization_url}", file=sys.stderr)
        return input("Then paste the address your browser was sent back to: ").strip()

    return await anyio.to_thread.run_sync(ask, abandon_on_cancel=True)
