"""Regular expressions from schemas, run in linear time.

A ``pattern`` in a JSON Schema may come from a remote server (an MCP tool, an OpenAPI
document). Python's ``re`` backtracks, so a pattern such as ``^(a+)+$`` can hold the event
loop for hours on a short string. fevex runs schema patterns with the finite-automaton
engine that pydantic-core already ships (Rust's ``regex`` crate): matching time grows
linearly with the text, and a pattern that engine cannot run in linear time (look-around,
back-references, a compiled size over 10 MiB) is refused when compiled, not at match time.

JSON Schema patterns are ECMA-262 regular expressions. Where ECMA-262 has an escape that the
engine lacks, it is translated before compiling: ``\\cX`` (the control character whose code
is the letter's modulo 32, ``\\cJ`` a line feed) becomes ``\\xHH``, which Python's ``re``
and Rust's ``regex`` read alike.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic_core import SchemaValidator

__all__ = ["LinearPattern", "linear_pattern"]

# Every escape, so that ``\\c`` (an escaped backslash, then ``c``) is never read as ``\c``.
# Linear: no quantifier nests, and each match consumes two or three characters.
_ESCAPE = re.compile(r"\\(?:c([A-Za-z])|.)", re.DOTALL)


class LinearPattern:
    """A compiled schema pattern; ``search`` has JSON Schema's unanchored semantics."""

    __slots__ = ("_validator", "pattern")

    def __init__(self, pattern: str, validator: SchemaValidator) -> None:
        self.pattern = pattern
        self._validator = validator

    def search(self, text: str) -> bool:
        """Whether the pattern matches anywhere in ``text``, in time linear in its length."""
        return bool(self._validator.isinstance_python(text))


def linear_pattern(pattern: str) -> LinearPattern:
    """Compile ``pattern``; ``ValueError`` when it cannot be run in linear time."""
    if not isinstance(pattern, str):
        raise ValueError("a pattern must be a string")
    return _compile(pattern)


@lru_cache(maxsize=512)
def _compile(pattern: str) -> LinearPattern:
    from pydantic_core import SchemaError, SchemaValidator, core_schema

    try:
        validator = SchemaValidator(
            core_schema.str_schema(
                pattern=_translated(pattern), regex_engine="rust-regex", strict=True
            )
        )
    except SchemaError as error:
        reason = str(error).strip().splitlines()[-1].strip() if str(error).strip() else "invalid"
        raise ValueError(
            f"the pattern cannot be run by a linear-time engine ({reason[:200]})"
        ) from None
    return LinearPattern(pattern, validator)


def _translated(pattern: str) -> str:
    """``pattern`` with the ECMA-262 escapes Rust's ``regex`` lacks written as it reads them."""
    if "\\c" not in pattern:
        return pattern
    return _ESCAPE.sub(_control_escape, pattern)


def _control_escape(match: re.Match[str]) -> str:
    letter = match.group(1)
    return match.group(0) if letter is None else f"\\x{ord(letter) % 32:02x}"
