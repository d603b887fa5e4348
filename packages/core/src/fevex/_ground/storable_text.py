"""Characters no run store can keep in text: PostgreSQL's jsonb refuses NUL, and UTF-8 has
no encoding for a lone surrogate."""

from __future__ import annotations

import re

UNSTORABLE_TEXT = re.compile("[\x00\ud800-\udfff]")


def is_storable(text: str) -> bool:
    """Whether every store can keep and look up ``text``: it holds no NUL character and
    no lone surrogate."""
    return UNSTORABLE_TEXT.search(text) is None
