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
from fevex.tools import redact_secrets

__all__ = [
    "ARGUMENTS_INVALID",
    "AUTH_DENIED",
    "AUTH_FAILED",
    "AUTH_INVALID",
    "AUTH_REDIRECT_FAILED",
    "AUTH_STEP_UP_LIMIT",
    "AUTH_TIMEOUT",
    "AUTH_UNREACHABLE",
    "CALL_TIMEOUT",
    "COMMAND_INVALID",
    "CONTENT_INVALID",
    "CONTENT_TOO_LARGE",
    "ELICITATION_CONTENT_INVALID",
    "ELICITATION_FAILED",
    "ELICITATION_INVALID",
    "ELICITATION_LIMIT",
    "ELICITATION_TIMEOUT",
    "FEATURE_UNSUPPORTED",
    "HEADERS_FAILED",
    "HEADERS_INVALID",
    "HTTP_ERROR",
    "IDENTITY_CHANGED",
    "INVALID_URL",
    "PROMPT_CHANGED",
    "PROMPT_NOT_FOUND",
    "PROTOCOL_ERROR",
    "RESOURCE_CHANGED",
    "RESOURCE_NOT_FOUND",
    "ROOTS_INVALID",
    "SAMPLING_INVALID",
    "SAMPLING_LIMIT",
    "SAMPLING_NO_CALL",
    "SAMPLING_TOO_LARGE",
    "SAMPLING_UNSUPPORTED",
    "SERVER_EXITED",
    "STARTUP_FAILED",
    "STARTUP_TIMEOUT",
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
COMMAND_INVALID = "MCP_COMMAND_INVALID"
STARTUP_FAILED = "MCP_STARTUP_FAILED"
STARTUP_TIMEOUT = "MCP_STARTUP_TIMEOUT"
SERVER_EXITED = "MCP_SERVER_EXITED"
CALL_TIMEOUT = "MCP_CALL_TIMEOUT"
RESOURCE_NOT_FOUND = "MCP_RESOURCE_NOT_FOUND"
RESOURCE_CHANGED = "MCP_RESOURCE_CHANGED"
PROMPT_NOT_FOUND = "MCP_PROMPT_NOT_FOUND"
PROMPT_CHANGED = "MCP_PROMPT_CHANGED"
AUTH_INVALID = "MCP_AUTH_INVALID"
AUTH_FAILED = "MCP_AUTH_FAILED"
AUTH_DENIED = "MCP_AUTH_DENIED"
AUTH_TIMEOUT = "MCP_AUTH_TIMEOUT"
AUTH_REDIRECT_FAILED = "MCP_AUTH_REDIRECT_FAILED"
AUTH_STEP_UP_LIMIT = "MCP_AUTH_STEP_UP_LIMIT"
AUTH_UNREACHABLE = "MCP_AUTH_UNREACHABLE"
ELICITATION_TIMEOUT = "MCP_ELICITATION_TIMEOUT"
ELICITATION_INVALID = "MCP_ELICITATION_INVALID"
ELICITATION_CONTENT_INVALID = "MCP_ELICITATION_CONTENT_INVALID"
ELICITATION_LIMIT = "MCP_ELICITATION_LIMIT"
ELICITATION_FAILED = "MCP_ELICITATION_FAILED"
SAMPLING_INVALID = "MCP_SAMPLING_INVALID"
SAMPLING_NO_CALL = "MCP_SAMPLING_NO_CALL"
SAMPLING_LIMIT = "MCP_SAMPLING_LIMIT"
SAMPLING_TOO_LARGE = "MCP_SAMPLING_TOO_LARGE"
SAMPLING_UNSUPPORTED = "MCP_SAMPLING_UNSUPPORTED"
ROOTS_INVALID = "MCP_ROOTS_INVALID"
CONTENT_INVALID = "MCP_CONTENT_INVALID"
CONTENT_TOO_LARGE = "MCP_CONTENT_TOO_LARGE"

EXCERPT_LIMIT = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def configuration_error(code: str, message: str) -> FevexConfigurationError:
    return FevexConfigurationError(code, message, category="configuration")


def run_error(
    code: str, message: str, *, recoverable: bool = False, **details: Any
) -> FevexRunError:
    return FevexRunError(code, message, category="tool", recoverable=recoverable, details=details)


def remote_excerpt(text: str, secrets: Iterable[str]) -> str:
    """What a server said, labelled as untrusted and quoted as bounded data: its first
    line only (a stack trace stops there), printable, in Python's quoting, at most
    ``EXCERPT_LIMIT`` characters inside the quotes, and without any spelling of any value
    in ``secrets`` (the header values this provider sent, so also the token inside
    ``Bearer <token>``).

    Every step that rewrites the text (NFKC, quoting) is followed by a redaction, since
    it can turn a near-spelling into a spelling; the cut comes last, so that no prefix of
    a secret survives it.
    """
    known = [secret for secret in secrets if secret]
    known += [unicodedata.normalize("NFKC", secret) for secret in known]
    clean = unicodedata.normalize("NFKC", redact_secrets(text, known))
    first_line = _CONTROL.sub(" ", clean.strip().split("\n", 1)[0]).strip()
    quoted = repr(redact_secrets(first_line, known))
    quote, body = quoted[0], redact_secrets(quoted[1:-1], known)
    if len(body) > EXCERPT_LIMIT:
        body = body[: EXCERPT_LIMIT - 1] + "…"
    return (
        f"Server's message (untrusted, first line, at most {EXCERPT_LIMIT} characters): "
        f"{quote}{body}{quote}"
    )
