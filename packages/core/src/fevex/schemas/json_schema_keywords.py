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
- ``unevaluatedProperties`` finds the properties a schema evaluated with the same linear-time
  patterns and reference budget (:mod:`fevex.schemas.json_schema_evaluated`);
- ``multipleOf`` divides exactly the decimal numbers the JSON text wrote (``0.3`` is a
  multiple of ``0.1``, and ``1e308`` of ``0.5``, where a float quotient overflows);
- ``required`` and ``additionalProperties`` report one problem per property, at its place.

Messages are fevex's own: they say what is wrong, never what the value is.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

from jsonschema import Draft202012Validator, validators  # type: ignore[import-untyped]
from jsonschema.exceptions import ValidationError  # type: ignore[import-untyped]

from fevex.schemas.json_schema_budget import budget, following_reference
from fevex.schemas.json_schema_evaluated import evaluated_properties

__all__ = ["Validator"]


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
        # Exact, so never an overflow (``1e308 / 0.5``) nor a rounding error: a float stands
        # for the shortest decimal that reads back as it, the number its JSON text wrote.
        # Both sides are bounded (floats by their exponent, integers by ``ensure_json``).
        multiple = (_exact(instance) / _exact(divisor)).denominator == 1
    if not multiple:
        yield ValidationError("not a multiple of the required step")


def _exact(number: float) -> Fraction:
    return Fraction(Decimal(repr(number))) if isinstance(number, float) else Fraction(number)


def _bounded_reference(keyword: str) -> Any:
    follow = Draft202012Validator.VALIDATORS[keyword]

    def reference(validator: Any, ref: Any, instance: Any, schema: Any) -> Iterator[Any]:
        with following_reference():
            yield from follow(validator, ref, instance, schema)

    return reference


def _unevaluated_properties(
    validator: Any, unevaluated: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[Any]:
    if not isinstance(instance, dict):
        return
    evaluated = evaluated_properties(validator, instance, schema)
    for key, value in instance.items():
        errors = validator.descend(value, unevaluated, path=key, schema_path=key)
        if key not in evaluated and next(errors, None) is not None:
            # One problem, at the object, as jsonschema reports this keyword.
            yield ValidationError("unevaluated")
            return


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
        "unevaluatedProperties": _unevaluated_properties,
        "uniqueItems": _unique_items,
    },
)
