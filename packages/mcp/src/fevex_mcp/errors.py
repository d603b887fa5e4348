"""The codes fevex-mcp raises, and the one place that turns remote text into safe text.

Configuration mistakes (an unsupported transport, a malformed URL or header set) raise
:class:`~fevex.FevexConfigurationError` when the provider is created. Everything that
goes wrong while talking to a server raises :class:`~fevex.FevexRunError`; the core
passes those through unchanged, so a run fails with the code named here.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Any

from fevex.errors import FevexConfigurationError, FevexRunError

__all__ = [
    "ARGUMENTS_INVALID",
    "FEATURE_UNSUPPORTED",
    "HEADERS_FAILED",
    "HEADERS_INVALID",
    "HTTP_ERROR",
    "IDENTITY_CHANGED",
    "INVALID_URL",
    "PROTOCOL_ERROR",
    "TOOL_ERROR",
    "TRANSPORT_UNSUPPORTED",
    "UNREACHABLE",
    "configuration_error",
    "remote_excerpt",
    "run_error",
]

TRANSPORT_UNSUPPORTED = "MCP_TRANSPORT_UNSUPPORTED"
FEATURE_UNSUPPORTED = "MCP_FEATURE_UNSUPPORTED"
INVALID_URL = "MCP_INVALID_URL"
HEADERS_INVALID = "MCP_HEADERS_INVALID"
HEADERS_FAILED = "MCP_HEADERS_FAILED"
IDENTITY_CHANGED = "MCP_IDENTITY_CHANGED"
ARGUMENTS_INVALID = "MCP_ARGUMENTS_INVALID"
TOOL_ERROR = "MCP_TOOL_ERROR"
PROTOCOL_ERROR = "MCP_PROTOCOL_ERROR"
HTTP_ERROR = "MCP_HTTP_ERROR"
UNREACHABLE = "MCP_UNREACHABLE"

EXCERPT_LIMIT = 200
REDACTED = "[redacted]"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def configuration_error(code: str, message: str) -> FevexConfigurationError:
    return FevexConfigurationError(code, message, category="configuration")


def run_error(
    code: str, message: str, *, recoverable: bool = False, **details: Any
) -> FevexRunError:
    return FevexRunError(code, message, category="tool", recoverable=recoverable, details=details)


def remote_excerpt(text: str, secrets: Iterable[str] = ()) -> str:
    """What a server said, as bounded data: its first line only (a stack trace stops
    there), printable, at most ``EXCERPT_LIMIT`` characters, without any header value
    this provider sent (a server that echoes the Authorization header leaks nothing)."""
    secrets = [secret for secret in secrets if secret]
    clean = text
    for secret in secrets:
        clean = clean.replace(secret, REDACTED)
    clean = unicodedata.normalize("NFKC", clean)
    for secret in secrets:
        clean = clean.replace(unicodedata.normalize("NFKC", secret), REDACTED)
    first_line = clean.strip().split("\n", 1)[0]
    first_line = _CONTROL.sub(" ", first_line).strip()
    if len(first_line) > EXCERPT_LIMIT:
        first_line = first_line[: EXCERPT_LIMIT - 1] + "…"
    return first_line
