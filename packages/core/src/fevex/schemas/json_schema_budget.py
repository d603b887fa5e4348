"""What one validation may spend, shared by every keyword and every branch of it.

Both the document and the value may come from a remote server, so a validation follows a
bounded number of references, nested to a bounded depth, and computes each pattern search
and each equality token once (:mod:`fevex.schemas.json_schema_engine` sets the budget for
each value it checks).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from fevex.schemas.json_equality import JsonEquality
from fevex.schemas.pattern import linear_pattern

__all__ = ["TooComplexError", "ValidationBudget", "budget", "following_reference"]


class TooComplexError(Exception):
    """The value needs more schema work than one validation may spend."""


class ValidationBudget:
    """What one validation shares with every branch of its combinations: the references it
    may still follow, how deep they nest now, and what it computed once."""

    def __init__(self, steps: int, max_ref_depth: int, max_depth: int) -> None:
        self.steps = steps
        self.ref_depth = 0
        self.max_ref_depth = max_ref_depth
        self.equality = JsonEquality(max_depth)
        self.pattern_results: dict[tuple[str, int], bool] = {}

    def matches(self, pattern: str, text: str) -> bool:
        # Combinations may check one string against one pattern many times; each search is
        # linear in the string, so it is done once. id(): the string outlives validation.
        key = (pattern, id(text))
        found = self.pattern_results.get(key)
        if found is None:
            # Every pattern of the document was compiled when it was loaded.
            found = self.pattern_results[key] = linear_pattern(pattern).search(text)
        return found


budget: ContextVar[ValidationBudget] = ContextVar("fevex_json_schema_budget")


@contextmanager
def following_reference() -> Iterator[None]:
    """Spend one reference hop while the body follows it; ``TooComplexError`` past the budget.

    A schema that refers to itself without consuming the value nests until the depth limit,
    and combinations over recursive schemas branch until the steps run out: either ends
    with a problem, never with a stack overflow or a stalled run.
    """
    state = budget.get()
    state.steps -= 1
    state.ref_depth += 1
    try:
        if state.steps < 0 or state.ref_depth > state.max_ref_depth:
            raise TooComplexError
        yield
    finally:
        state.ref_depth -= 1
