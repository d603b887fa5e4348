"""The run inspector and approval console: static pages under ``/ui`` and the guard that
keeps other sites from driving the protocol through a visitor's browser.

The pages are files shipped inside the package (``fevex/http/ui``), served as they are:
no build step, nothing fetched from another host. They hold no data; everything they show
comes from ``/v1`` with the visitor's own credentials (a bearer token pasted into the
page, or whatever cookie the host's ``authenticate`` reads), so serving them needs none.
Every answer under ``/ui`` carries a Content-Security-Policy that allows only this
origin's scripts and styles and no inline code, so that a value from a run that slipped
into markup still could not run.

With the console on, a state-changing request (POST) must also carry
``X-Fevex-Request: 1``, which a cross-site form cannot send and a cross-site script cannot
send without a CORS preflight this app refuses; otherwise it is refused with 403
``CROSS_SITE_REQUEST`` before the app reads it, by the guard in front of every request
(:mod:`fevex.http.request_guard`, which also checks ``Host``, ``Origin`` and
``Sec-Fetch-Site``). The fevex clients send the header.
"""

from __future__ import annotations

import json
from importlib import resources

from starlette.types import ASGIApp, Receive, Scope, Send

from fevex.http.errors import error_body

__all__ = ["Console", "console_assets"]

CONSOLE_PATH = "/ui"
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
    """An ASGI wrapper around the protocol app: serves ``/ui``; everything else goes to
    ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.assets = console_assets()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] == "http" and (
            path == CONSOLE_PATH or path.startswith(CONSOLE_PATH + "/")
        ):
            await self._page(scope, send)
            return
        await self.app(scope, receive, send)

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
