"""What a server says while a session runs, passed on to the run: a tool call's progress
notifications, and the server's log messages.

Progress (``notifications/progress`` for a ``tools/call`` fevex sent with a progress token)
goes to the call's :meth:`~fevex.ToolContext.report_progress`, which records it as
``tool.progress`` run events, coalesced and capped per call by the core. Log messages
(``notifications/message``) go to the span of the tool call in flight on the session
(:meth:`~fevex.ToolContext.add_trace_event`, as ``mcp.log`` events), the latest one when
several are; one that arrives while no call is in flight (during a discovery) is not
traced. Both are the server's text: cut before anything else, redacted of the
connection's secrets (its header values, its OAuth flow's credentials and tokens, a stdio
server's environment values), and bounded and cleaned again by the core. A flood costs a
slice and a redaction per notification, never an event or a span event per notification.
"""

from __future__ import annotations

import json
import unicodedata
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from fevex.tools import ToolContext, redact_secrets, secret_spellings
from fevex_mcp.calls_in_flight import latest_call

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import LoggingMessageNotificationParams

__all__ = ["LOG_EVENT", "MAX_LOG_CHARS", "SessionNotices", "progress_reporter"]

LOG_EVENT = "mcp.log"
LOG_LEVEL = "info"
# What is kept of a log message's data, and of a progress message, before redaction.
MAX_LOG_CHARS = 2000
MAX_PROGRESS_CHARS = 1000
MAX_LOGGER_CHARS = 100


class SessionNotices:
    """The notifications of one SDK session: give :attr:`callbacks` to its ``Client``,
    then :meth:`attach` it to the client."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = secrets
        self._session: weakref.ref[Any] | None = None

    @property
    def callbacks(self) -> dict[str, Any]:
        # Servers on the 2026-07-28 protocol send log messages only to requests that ask
        # for a level; earlier ones send what ``logging/setLevel`` (never sent) allows.
        return {"logging_callback": self.log, "log_level": LOG_LEVEL}

    def attach(self, client: Client) -> None:
        self._session = weakref.ref(client.session)

    async def log(self, params: LoggingMessageNotificationParams) -> None:
        session = None if self._session is None else self._session()
        call = None if session is None else latest_call(session)
        if call is None:
            return
        data = params.data
        text = data if isinstance(data, str) else _json(data)
        attributes: dict[str, str] = {
            "mcp.log.level": str(params.level),
            "mcp.log.data": _redacted(text, MAX_LOG_CHARS, self._secrets),
        }
        if params.logger:
            attributes["mcp.log.logger"] = _redacted(params.logger, MAX_LOGGER_CHARS, self._secrets)
        call.context.add_trace_event(LOG_EVENT, attributes)


def progress_reporter(context: ToolContext, secrets: Iterable[str]) -> Any:
    """The SDK's ``progress_callback`` for one tool call: each notification reported to
    ``context``, its message cut and redacted of ``secrets``."""

    async def report(progress: float, total: float | None, message: str | None) -> None:
        said = None
        if isinstance(message, str):
            said = _redacted(message, MAX_PROGRESS_CHARS, secrets)
        context.report_progress(progress, total, said)

    return report


def _redacted(text: str, limit: int, secrets: Iterable[str]) -> str:
    """At most ``limit`` characters of ``text``, NFKC-normalised (as the core cleans it),
    without any spelling of ``secrets``: cut with room for the longest secret first, then
    redacted, then cut, so that no prefix of a secret survives the cut."""
    known = [secret for secret in secrets if secret]
    known += [unicodedata.normalize("NFKC", secret) for secret in known]
    room = max(
        (len(spelling) for secret in known for spelling in secret_spellings(secret)), default=0
    )
    clean = unicodedata.normalize("NFKC", text[: limit + room])
    if known:
        clean = redact_secrets(clean, known)
    return clean[:limit]


def _json(data: Any) -> str:
    try:
        return json.dumps(data, ensure_ascii=False, default=str)[: MAX_LOG_CHARS * 2]
    except (TypeError, ValueError):
        return type(data).__name__
