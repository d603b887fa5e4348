"""jsonschema's Draft 2020-12 validator, with the keywords that must stay bounded replaced.

This is the only module that imports ``jsonschema``; :mod:`fevex.schemas.json_schema_engine`
imports it when a schema is first compiled, so ``import fevex`` does not pay for it.

Replaced, because the document and the value may both come from a remote server:

- ``pattern``, ``patternProperties`` and ``additionalProperties`` (which consults
  ``patternProperties``) match with the linear-time engine of
  :func:`fevex.schemas.linear_pattern`, never with Python's backtracking ``re``;
- ``uniqueItems``, ``enum`` and ``const`` compare tokens of :class:`JsonEquality` (jsonschema
  falls back to comparing every pair, quadratic in the array);
- ``$ref`` and ``$dynamicRef`` spend from a budget and count their nesting, so a schema that
  refers to itself without consuming the value ends with a problem, not a stack overflow;
- ``multipleOf`` tolerates binary rounding (``0.3`` is a multiple of ``0.1``);
- ``required`` and ``additionalProperties`` report one problem per property, at its place.

Messages are fevex's own: they say what is wrong, never what the value is.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from jsonschema import Draft202012Validator, validators  # type: ignore[import-untyped]
from jsonschema.exceptions import ValidationError  # type: ignore[import-untyped]

from fevex.schemas.json_equality import JsonEquality
from fevex.schemas.pattern import linear_pattern

__all__ = ["TooComplexError", "ValidationBudget", "Validator", "budget"]


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

#: Keywords whose problems carry a message written here rather than looked up by keyword.
FEVEX_MESSAGES = frozenset(
    {
        "additionalProperties",
        "const",
        "enum",
        "multipleOf",
        "pattern",
        "required",
        "uniqueItems",
    }
)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if isinstance(instance, str) and not budget.get().matches(pattern, instance):
        yield ValidationError("does not match the pattern")


def _pattern_properties(
    validator: Any, pattern_properties: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not isinstance(instance, dict):
        return
    state = budget.get()
    for pattern, subschema in pattern_properties.items():
        for key, value in instance.items():
            if state.matches(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[Any]:
    if not isinstance(instance, dict):
        return
    state = budget.get()
    properties = schema.get("properties") or {}
    patterns = list(schema.get("patternProperties") or ())
    for key, value in instance.items():
        if key in properties or any(state.matches(pattern, key) for pattern in patterns):
            continue
        if additional is False:
            yield ValidationError("not allowed", path=(key,))
        else:
            yield from validator.descend(value, additional, path=key)


def _required(validator: Any, required: list[str], instance: Any, schema: Any) -> Iterator[Any]:
    if not isinstance(instance, dict):
        return
    for name in required:
        if name not in instance:
            yield ValidationError("required", path=(name,))


def _unique_items(validator: Any, unique: bool, instance: Any, schema: Any) -> Iterator[Any]:
    if unique and isinstance(instance, list) and not budget.get().equality.all_unique(instance):
        yield ValidationError("items are not unique")


def _enum(validator: Any, allowed: list[Any], instance: Any, schema: Any) -> Iterator[Any]:
    if not budget.get().equality.one_of(instance, allowed):
        yield ValidationError("not one of the allowed values")


def _const(validator: Any, const: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not budget.get().equality.equal(instance, const):
        yield ValidationError("not the required constant")


def _multiple_of(validator: Any, divisor: float, instance: Any, schema: Any) -> Iterator[Any]:
    if not (isinstance(instance, int | float) and not isinstance(instance, bool)):
        return
    if isinstance(instance, int) and isinstance(divisor, int):
        multiple = instance % divisor == 0
    else:
        quotient = instance / divisor
        multiple = math.isfinite(quotient) and math.isclose(quotient, round(quotient), abs_tol=1e-9)
    if not multiple:
        yield ValidationError("not a multiple of the required step")


def _bounded_reference(keyword: str) -> Any:
    follow = Draft202012Validator.VALIDATORS[keyword]

    def reference(validator: Any, ref: Any, instance: Any, schema: Any) -> Iterator[Any]:
        state = budget.get()
        state.steps -= 1
        state.ref_depth += 1
        try:
            if state.steps < 0 or state.ref_depth > state.max_ref_depth:
                raise TooComplexError
            yield from follow(validator, ref, instance, schema)
        finally:
            state.ref_depth -= 1

    return reference


Validator: Any = validators.extend(
    Draft202012Validator,
    {
        "$ref": _bounded_reference("$ref"),
        "$dynamicRef": _bounded_reference("$dynamicRef"),
        "additionalProperties": _additional_properties,
        "const": _const,
        "enum": _enum,
        "multipleOf": _multiple_of,
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "required": _required,
        "uniqueItems": _unique_items,
    },
)
