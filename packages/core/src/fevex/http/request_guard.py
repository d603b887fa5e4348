"""The guard in front of every request: the ``Host`` it names, and where a state-changing
request came from.

**Host.** A web page whose name re-resolves to this server's address (DNS rebinding) makes
the visitor's browser send requests to it with its own name in ``Host``. So a request is
answered only when its ``Host`` (without the port) is one the app serves: by default the
loopback name and addresses (``localhost``, ``127.0.0.1``, ``[::1]``), which no other site
can make a browser send; otherwise the app's ``allowed_hosts``, matched as Starlette's
``TrustedHostMiddleware`` matches them (a name or address, ``*.example.com`` for its
subdomains, ``*`` for any host). Any other is refused with 400 ``HOST_NOT_ALLOWED``, before
the app reads the request. (``fevex serve`` adds the address it binds.)

**Cross-site.** A state-changing request (POST) is refused with 403 ``CROSS_SITE_REQUEST``
when it came from another site (``Sec-Fetch-Site`` other than ``same-origin`` or ``none``)
or from another origin (an ``Origin`` whose host is not the request's ``Host``, unless the
origin is listed by name in ``cors_origins``; ``"*"`` trusts none). Browsers send these
headers on every cross-origin POST, even a form's or a ``text/plain`` one that needs no
preflight; clients that are not browsers send neither and are served. With the console
on, a POST must also carry ``X-Fevex-Request: 1`` (see :mod:`fevex.http.console`). An app
opts out with ``create_http_app(..., allow_cross_site_requests=True)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from fevex.http.errors import error_body

__all__ = [
    "LOOPBACK_HOSTS",
    "REQUEST_HEADER",
    "RequestGuard",
    "host_is_allowed",
    "host_pattern_problem",
]

REQUEST_HEADER = "X-Fevex-Request"
# What the app answers when it names no allowed_hosts: names only this machine reaches.
LOOPBACK_HOSTS: tuple[str, ...] = ("localhost", "127.0.0.1", "[::1]")
# The protocol's only state-changing method; its router answers any other one with 405.
STATE_CHANGING = frozenset({"POST"})
# Sec-Fetch-Site values of requests this origin's own pages (or no page at all) made.
OWN_SITES = frozenset({"same-origin", "none"})


def host_pattern_problem(pattern: object) -> str | None:
    """What is wrong with an entry of ``allowed_hosts``, or ``None``: a host name or
    address without port, ``*.`` before a name for its subdomains, or ``*`` alone."""
    if not isinstance(pattern, str) or not pattern:
        return "an allowed host must be a non-empty string"
    wildcard = pattern.removeprefix("*.") if pattern != "*" else ""
    if "*" in wildcard or any(character in wildcard for character in "/@ \t"):
        return f"{pattern!r} is not a host name, *.name or *"
    return None


def host_is_allowed(host: str, allowed_hosts: Sequence[str]) -> bool:
    """Whether a request whose ``Host`` names ``host`` (no port) is answered: one that a
    pattern of ``allowed_hosts`` matches."""
    host = host.lower()
    if not host:
        return False
    for pattern in allowed_hosts:
        pattern = pattern.lower()
        if pattern == "*" or host == pattern:
            return True
        if pattern.startswith("*.") and host.endswith(pattern[1:]):
            return True
    return False


def _host_name(host_header: str) -> str:
    """The host of a ``Host`` header, without its port: ``[::1]:8000`` is ``[::1]``."""
    if host_header.startswith("["):
        closing = host_header.find("]")
        return host_header if closing < 0 else host_header[: closing + 1]
    return host_header.rpartition(":")[0] if ":" in host_header else host_header


class RequestGuard:
    """An ASGI wrapper refusing what the module's description says; everything else goes
    to ``app``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: Sequence[str] = LOOPBACK_HOSTS,
        cors_origins: Sequence[str] = (),
        allow_cross_site_requests: bool = False,
        require_request_header: bool = False,
    ) -> None:
        self.app = app
        self.allowed_hosts = tuple(allowed_hosts)
        self.trusted_origins = frozenset(cors_origins)
        self.allow_cross_site_requests = allow_cross_site_requests
        self.require_request_header = require_request_header

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            # Lifespan; and websockets, which the protocol's router refuses on its own.
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        host = headers.get("host", "")
        if not host_is_allowed(_host_name(host), self.allowed_hosts):
            message = (
                f"This server does not answer requests for the host {host!r}; list it in "
                "create_http_app(allowed_hosts=...) or fevex serve --allowed-host."
            )
            await _refuse(scope, receive, send, 400, "HOST_NOT_ALLOWED", message)
            return
        if scope["method"] in STATE_CHANGING:
            refusal = self.cross_site_refusal(headers)
            if refusal is not None:
                await _refuse(scope, receive, send, 403, "CROSS_SITE_REQUEST", refusal)
                return
        await self.app(scope, receive, send)

    def cross_site_refusal(self, headers: Mapping[str, str]) -> str | None:
        """Why a state-changing request with these headers is refused, or ``None``."""
        if self.allow_cross_site_requests:
            return None
        if self.require_request_header and headers.get(REQUEST_HEADER.lower()) != "1":
            return f"A state-changing request must carry the header {REQUEST_HEADER}: 1."
        site = headers.get("sec-fetch-site")
        if site is not None and site not in OWN_SITES:
            return "This request came from another site."
        origin = headers.get("origin")
        if (
            origin is not None
            and origin not in self.trusted_origins
            and _origin_host(origin) != headers.get("host", "").lower()
        ):
            return "This request came from another origin."
        return None


def _origin_host(origin: str) -> str | None:
    """The ``host[:port]`` of an ``Origin`` header; ``None`` for ``null`` or garbage."""
    try:
        return urlsplit(origin).netloc.lower() or None
    except ValueError:
        return None


def _headers(scope: Scope) -> dict[str, str]:
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}


async def _refuse(
    scope: Scope, receive: Receive, send: Send, status: int, code: str, message: str
) -> None:
    await JSONResponse(error_body(code, message), status_code=status)(scope, receive, send)
