"""Removing resolved credentials from text that fevex writes (errors, events, logs).

A secret reaches text in more spellings than its own: ``repr`` escapes backslashes and
quotes (``KeyError(secret)`` prints the ``repr``), JSON escapes them differently, URLs
percent-encode it, and a header value such as ``Bearer <token>`` is as secret as each of
its parts. Every spelling is replaced, longest first, before any truncation, so that no
prefix of a secret can survive a cut.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

__all__ = ["REDACTED", "redact_secrets", "secret_spellings"]

REDACTED = "[redacted]"
# A part of a header value shorter than this ("Bearer", "Basic") is a scheme, not a secret.
_MIN_PART = 8


def secret_spellings(secret: str) -> set[str]:
    """Every form in which ``secret`` (or a secret part of it) can appear in text."""
    parts = {secret}
    parts.update(part for part in secret.split() if len(part) >= _MIN_PART)
    spellings: set[str] = set()
    for part in parts:
        spellings.update(
            (
                part,
                repr(part)[1:-1],
                repr(part + "'")[1:-2],  # the repr a string holding both quote kinds gets
                ascii(part)[1:-1],
                json.dumps(part)[1:-1],
                json.dumps(part, ensure_ascii=False)[1:-1],
                quote(part, safe=""),
                quote_plus(part, safe=""),
            )
        )
    spellings.discard("")
    return spellings


def redact_secrets(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every spelling of every secret replaced by ``[redacted]``."""
    spellings: set[str] = set()
    for secret in secrets:
        if secret:
            spellings |= secret_spellings(secret)
    for spelling in sorted(spellings, key=len, reverse=True):
        text = text.replace(spelling, REDACTED)
    return text
