"""Text from outside the app (a remote server's descriptions, what a tool reports while it
runs) made safe to show and store: without the characters that hide or reorder text, and
bounded."""

from __future__ import annotations

import re
import unicodedata

from fevex._ground.storable_text import UNSTORABLE_TEXT

__all__ = ["CONTROL_CHARACTERS", "clean_text"]

# What such text may not carry, each replaced by a space: the C0 controls but tab and
# newline, DEL and the C1 controls (a terminal's escapes, text a reader never sees), and the
# bidirectional controls (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069),
# which make a reviewer read the text in another order than the model.
CONTROL_CHARACTERS = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def clean_text(text: str, limit: int) -> str:
    """``text`` NFKC-normalised, without control characters (replaced by a space) or
    characters no store keeps, stripped, and cut to ``limit`` characters (the last one
    an ellipsis when cut)."""
    clean = CONTROL_CHARACTERS.sub(" ", unicodedata.normalize("NFKC", text))
    clean = UNSTORABLE_TEXT.sub("\ufffd", clean).strip()
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"
