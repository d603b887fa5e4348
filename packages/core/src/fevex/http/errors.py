"""Errors on the wire: one body shape, ``{"error": {"code", "message"}}``, and one documented
HTTP status per code.

The status depends on the code alone, so that a client can act on either. A code this table
does not list is a run or a request the app refused for the reason the code names (422); a
store failure is 503; anything that is not a :class:`~fevex.FevexError` is 500
``INTERNAL_ERROR``, whose message never says more than that (the exception is logged on the
server, never sent).
"""

from __future__ import annotations

from typing import Any

from fevex.errors import FevexError, FevexRunError

__all__ = [
    "ERROR_STATUS",
    "FevexHttpError",
    "Forbidden",
    "error_body",
    "error_status",
]

ERROR_STATUS: dict[str, int] = {
    # The request itself: its JSON, its fields, its arguments.
    "INVALID_REQUEST": 400,
    "INVALID_ARGUMENT": 400,
    "INVALID_INPUT": 400,
    "INVALID_CURSOR": 400,
    "INVALID_CONTEXT": 400,
    "EVENT_PAYLOAD_INVALID": 400,
    "INPUT_INVALID": 400,
    "HOST_NOT_ALLOWED": 400,
    # Who asks.
    "UNAUTHENTICATED": 401,
    "FORBIDDEN": 403,
    "CROSS_SITE_REQUEST": 403,
    "EVENT_ACTOR_REQUIRED": 403,
    # What it names: missing, or of another namespace (never told apart).
    "NOT_FOUND": 404,
    "RUN_NOT_FOUND": 404,
    "SESSION_NOT_FOUND": 404,
    "AGENT_NOT_FOUND": 404,
    "WORKFLOW_NOT_FOUND": 404,
    "TEAM_NOT_FOUND": 404,
    "APPROVAL_NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    # The run or session is not in a state that allows it.
    "RUN_CONFLICT": 409,
    "SESSION_CONFLICT": 409,
    "RUN_NOT_PAUSED": 409,
    "RUN_NOT_DUE": 409,
    "EVENT_NOT_EXPECTED": 409,
    "INPUT_NOT_PENDING": 409,
    "LEASE_LOST": 409,
    "RUN_CANCEL_REQUESTED": 409,
    "RUN_KIND_UNKNOWN": 409,
    "WORKFLOW_VERSION_MISMATCH": 409,
    "TEAM_VERSION_MISMATCH": 409,
    "CHECKPOINT_UNSUPPORTED": 409,
    # Another holder kept the run past the caller's own timeout: nothing was written.
    "RUN_TIMEOUT": 409,
    "REQUEST_TOO_LARGE": 413,
    "INTERNAL_ERROR": 500,
    "STORE_ERROR": 503,
}
# Every other fevex error code: the app understood the request and refused it.
DEFAULT_ERROR_STATUS = 422
# Every code of a store's own failures (``STORE_*``, ``SCHEMA_OUTDATED``): try again later.
STORE_ERROR_STATUS = 503


class Forbidden(FevexError):
    """What ``authenticate(request)`` raises to refuse a caller it recognised (403
    ``FORBIDDEN``); returning ``None`` instead means nobody was recognised (401)."""

    def __init__(self, message: str = "This caller may not use this service.") -> None:
        super().__init__("FORBIDDEN", message)


class FevexHttpError(FevexRunError):
    """An error response of a fevex HTTP server, as the clients raise it: the server's
    ``code`` and ``message``, and the HTTP ``status``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(code, message, details={"status": status})
        self.status = status


def error_status(error: FevexError) -> int:
    """The HTTP status of ``error``'s code (see :data:`ERROR_STATUS`)."""
    status = ERROR_STATUS.get(error.code)
    if status is not None:
        return status
    if error.category == "store":
        return STORE_ERROR_STATUS
    return DEFAULT_ERROR_STATUS


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}
