"""Regular expressions from schemas, run in linear time.

A ``pattern`` in a JSON Schema may come from a remote server (an MCP tool, an OpenAPI
document). Python's ``re`` backtracks, so a pattern such as ``^(a+)+$`` can hold the event
loop for hours on a short string. fevex runs schema patterns with the finite-automaton
engine that pydantic-core already ships (Rust's ``regex`` crate): matching time grows
linearly with the text, and a pattern that engine cannot run in linear time (look-around,
back-references, a compiled size over 10 MiB) is refused when compiled, not at match time.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic_core import SchemaValidator

__all__ = ["LinearPattern", "linear_pattern"]


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
            core_schema.str_schema(pattern=pattern, regex_engine="rust-regex", strict=True)
        )
    except SchemaError as error:
        reason = str(error).strip().splitlines()[-1].strip() if str(error).strip() else "invalid"
        raise ValueError(
            f"the pattern cannot be run by a linear-time engine ({reason[:200]})"
        ) from None
    return LinearPattern(pattern, validator)
