"""Keeping header values out of what the MCP SDK and the HTTP client log during a session.

The SDK logs what a server sends (at DEBUG, each SSE message in full; at ERROR, a
response it could not parse, with the parser's error), and a server that echoes the
caller's token puts that token in those records. fevex-mcp cannot change the SDK's
loggers, and a filter on a logger misses its children, so it wraps the process's log
record factory once: a record created while a session of this provider runs (a context
variable says which secrets that session holds, and the SDK's tasks inherit it) has every
spelling of those secrets replaced by ``[redacted]`` before any handler sees it. Records
created outside a session are left as they are.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from fevex.tools import redact_secrets, secret_spellings

__all__ = ["secrets_kept_out_of_logs"]

_SECRETS: ContextVar[tuple[Iterable[str], ...]] = ContextVar("fevex_mcp_log_secrets", default=())
_INSTALL = threading.Lock()
_installed = False


@contextmanager
def secrets_kept_out_of_logs(secrets: Iterable[str]) -> Iterator[None]:
    """Redact ``secrets`` from every log record created in this context (and in the
    tasks started from it) until the block ends. ``secrets`` is read again for each
    record, so a source that grows (the tokens an OAuth flow obtains during the session)
    is redacted from the moment it holds a value."""
    _install()
    token = _SECRETS.set((*_SECRETS.get(), secrets))
    try:
        yield
    finally:
        _SECRETS.reset(token)


def _install() -> None:
    global _installed
    with _INSTALL:
        if _installed:
            return
        previous = logging.getLogRecordFactory()

        def record_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            sources = _SECRETS.get()
            if sources:
                secrets = _spellings(sources)
                if secrets:
                    _redact(record, secrets)
            return record

        logging.setLogRecordFactory(record_factory)
        _installed = True


def _spellings(sources: tuple[Iterable[str], ...]) -> tuple[str, ...]:
    known: set[str] = set()
    for source in sources:
        for secret in source:
            if secret:
                # A record often holds a repr of what the server sent (``SSE message:
                # ...``), so a server's own spelling of a secret is escaped once more there.
                known |= {secret, *secret_spellings(secret)}
    return tuple(known)


def _redact(record: logging.LogRecord, secrets: tuple[str, ...]) -> None:
    try:
        message = record.getMessage()
    except Exception:
        # Logging would report the broken call with its raw arguments.
        record.msg, record.args = f"(a log message of {record.name} could not be formatted)", ()
    else:
        clean = redact_secrets(message, secrets)
        if clean != message:
            record.msg, record.args = clean, ()
    if record.exc_info and record.exc_info[0] is not None:
        text = logging.Formatter().formatException(record.exc_info)
        clean = redact_secrets(text, secrets)
        if clean != text:
            # A handler formats exc_info itself; only the redacted text may reach it.
            record.exc_info, record.exc_text = None, clean
    if record.stack_info:
        record.stack_info = redact_secrets(record.stack_info, secrets)
