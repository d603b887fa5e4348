"""The server URL a provider accepts: an http(s) Streamable HTTP endpoint, nothing else.

A stdio command given as a URL (a string with spaces, a path, an argument list, a
``stdio:`` URL), a malformed URL, or one that carries credentials, is refused with
``MCP_INVALID_URL`` (a stdio server is given as ``command=`` and ``args=``); a non-HTTP
scheme (legacy HTTP+SSE) with ``MCP_TRANSPORT_UNSUPPORTED``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from fevex_mcp.errors import INVALID_URL, TRANSPORT_UNSUPPORTED, configuration_error

__all__ = ["STDIO_HINT", "Endpoint", "parse_endpoint"]

STDIO_HINT = (
    "MCP provider: url is a Streamable HTTP endpoint (http:// or https://). To start a "
    "stdio server, pass the program as command= and its arguments as args= instead."
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where the server is. ``display`` is the URL without its query string, which may
    carry a token: the only form that appears in messages."""

    url: str
    display: str


def parse_endpoint(url: object) -> Endpoint:
    if isinstance(url, list | tuple):
        raise configuration_error(INVALID_URL, STDIO_HINT)
    if not isinstance(url, str) or not url.strip():
        raise configuration_error(INVALID_URL, "MCP provider: url must be an http(s) URL.")
    if not _SCHEME.match(url):
        if any(char.isspace() for char in url.strip()) or url.startswith((".", "/", "~")):
            raise configuration_error(INVALID_URL, STDIO_HINT)
        raise configuration_error(
            INVALID_URL, "MCP provider: url must start with http:// or https://."
        )
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "stdio":
        raise configuration_error(INVALID_URL, STDIO_HINT)
    if scheme not in ("http", "https"):
        raise configuration_error(
            TRANSPORT_UNSUPPORTED,
            f"MCP URL scheme {scheme!r} is not supported: fevex-mcp speaks Streamable HTTP "
            "over http:// or https://, or stdio (command=); legacy HTTP+SSE is out of scope.",
        )
    try:
        hostname, port = parts.hostname, parts.port
    except ValueError:
        raise configuration_error(INVALID_URL, "MCP provider: url has an invalid port.") from None
    if not hostname:
        raise configuration_error(INVALID_URL, "MCP provider: url needs a host.")
    if parts.username is not None or parts.password is not None:
        # A URL shows up in logs and messages; headers never do.
        raise configuration_error(
            INVALID_URL,
            "MCP provider: put credentials in headers (resolved through the credential "
            "resolver), not in the URL.",
        )
    host = f"[{hostname}]" if ":" in hostname else hostname
    display = f"{scheme}://{host}{'' if port is None else f':{port}'}{parts.path}"
    return Endpoint(url, display)
