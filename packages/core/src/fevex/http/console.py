"""The run inspector and approval console: static pages under ``/ui`` and the guard that
keeps other sites from driving the protocol through a visitor's browser.

The pages are files shipped inside the package (``fevex/http/ui``), served as they are:
no build step, nothing fetched from another host. They hold no data; everything they show
comes from ``/v1`` with the visitor's own credentials (a bearer token pasted into the
page, or whatever cookie the host's ``authenticate`` reads), so serving them needs none.
Every answer under ``/ui`` carries a Content-Security-Policy that allows only this
origin's scripts and styles and no inline code, so that a value from a run that slipped
into markup still could not run.

With the console on, a state-changing request (POST) must carry ``X-Fevex-Request: 1``,
which a cross-site form cannot send and a cross-site script cannot send without a CORS
preflight this app refuses, and must not come from another site (``Sec-Fetch-Site``) or
origin (``Origin``, unless listed by name in ``cors_origins``: ``"*"`` trusts none).
Otherwise it is refused with 403 ``CROSS_SITE_REQUEST`` before the app reads it. The fevex
clients send the header.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import resources
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from fevex.http.errors import error_body

__all__ = ["Console", "console_assets"]

CONSOLE_PATH = "/ui"
REQUEST_HEADER = "X-Fevex-Request"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
PAGE_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-cache"),
)
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
# The protocol's only state-changing method; its router answers any other one with 405.
STATE_CHANGING = frozenset({"POST"})
# Sec-Fetch-Site values of requests this origin's own pages (or no page at all) made.
OWN_SITES = frozenset({"same-origin", "none"})


def console_assets() -> dict[str, tuple[bytes, str]]:
    """The console's files by name, with their content types, read once."""
    folder = resources.files("fevex.http") / "ui"
    assets: dict[str, tuple[bytes, str]] = {}
    for entry in folder.iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in CONTENT_TYPES:
            assets[entry.name] = (entry.read_bytes(), CONTENT_TYPES[suffix])
    return assets


class Console:
    """An ASGI wrapper around the protocol app: serves ``/ui`` and guards state-changing
    requests (see the module's description); everything else goes to ``app``."""

    def __init__(self, app: ASGIApp, *, cors_origins: Sequence[str] = ()) -> None:
        self.app = app
        self.assets = console_assets()
        self.trusted_origins = frozenset(cors_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path == CONSOLE_PATH or path.startswith(CONSOLE_PATH + "/"):
            await self._page(scope, send)
            return
        if scope["method"] in STATE_CHANGING:
            refusal = self.cross_site_refusal(_headers(scope))
            if refusal is not None:
                await _send_json(send, 403, error_body("CROSS_SITE_REQUEST", refusal))
                return
        await self.app(scope, receive, send)

    def cross_site_refusal(self, headers: Mapping[str, str]) -> str | None:
        """Why a state-changing request with these headers is refused, or ``None``."""
        if headers.get(REQUEST_HEADER.lower()) != "1":
            return f"A state-changing request must carry the header {REQUEST_HEADER}: 1."
        site = headers.get("sec-fetch-site")
        if site is not None and site not in OWN_SITES:
            return "This request came from another site."
        origin = headers.get("origin")
        if (
            origin is not None
            and origin not in self.trusted_origins
            and urlsplit(origin).netloc.lower() != headers.get("host", "").lower()
        ):
            return "This request came from another origin."
        return None

    async def _page(self, scope: Scope, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await _send_json(
                send, 405, error_body("METHOD_NOT_ALLOWED", "This path takes another method.")
            )
            return
        name = scope["path"].removeprefix(CONSOLE_PATH).lstrip("/") or "index.html"
        if scope["path"] == CONSOLE_PATH:
            await _send(send, 308, b"", "text/plain", ((b"location", b"/ui/"),))
            return
        found = self.assets.get(name)
        if found is None:
            await _send_json(send, 404, error_body("NOT_FOUND", "There is nothing at this path."))
            return
        body, content_type = found
        await _send(send, 200, b"" if scope["method"] == "HEAD" else body, content_type)


def _headers(scope: Scope) -> dict[str, str]:
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}


async def _send_json(send: Send, status: int, body: object) -> None:
    await _send(send, status, json.dumps(body).encode(), "application/json")


async def _send(
    send: Send,
    status: int,
    body: bytes,
    content_type: str,
    extra: tuple[tuple[bytes, bytes], ...] = (),
) -> None:
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
        *PAGE_HEADERS,
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
