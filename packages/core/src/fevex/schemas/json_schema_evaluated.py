"""The properties of an object that a schema evaluated, for ``unevaluatedProperties``.

JSON Schema 2020-12 lets ``unevaluatedProperties`` apply to the properties that no adjacent
keyword evaluated, through ``$ref``, ``$dynamicRef``, the combinations and ``if``/``then``/
``else`` included. This follows jsonschema's own rule for which keywords count (its
``find_evaluated_property_keys_by_schema``) with two differences, because the document and
the value may both come from a remote server: ``patternProperties`` match with the
linear-time engine of :func:`fevex.schemas.linear_pattern`, never with Python's
backtracking ``re``, and every reference followed spends from the validation's budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fevex.schemas.json_schema_budget import budget, following_reference

__all__ = ["evaluated_properties"]


def evaluated_properties(
    validator: Any, instance: dict[str, Any], schema: Mapping[str, Any] | bool
) -> set[str]:
    """The keys of ``instance`` that ``schema`` (a schema of ``validator``'s) evaluated."""
    if not isinstance(schema, Mapping):
        return set()
    evaluated: set[str] = set()
    for keyword in ("$ref", "$dynamicRef"):
        ref = schema.get(keyword)
        if ref is not None:
            with following_reference():
                # jsonschema's resolver: it knows the dynamic scope of ``$dynamicRef``.
                resolved = validator._resolver.lookup(ref)
                inner = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
                evaluated |= evaluated_properties(inner, instance, resolved.contents)
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        evaluated.update(key for key in instance if key in properties)
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        if keyword in schema:
            subschema = schema[keyword]
            evaluated.update(
                key for key, value in instance.items() if _valid(validator, value, subschema)
            )
    patterns = schema.get("patternProperties")
    if isinstance(patterns, Mapping):
        state = budget.get()
        evaluated.update(
            key for key in instance if any(state.matches(pattern, key) for pattern in patterns)
        )
    for name, subschema in (schema.get("dependentSchemas") or {}).items():
        if name in instance:
            evaluated |= evaluated_properties(validator, instance, subschema)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword) or ():
            if _valid(validator, instance, subschema):
                evaluated |= evaluated_properties(validator, instance, subschema)
    if "if" in schema:
        if _valid(validator, instance, schema["if"]):
            evaluated |= evaluated_properties(validator, instance, schema["if"])
            if "then" in schema:
                evaluated |= evaluated_properties(validator, instance, schema["then"])
        elif "else" in schema:
            evaluated |= evaluated_properties(validator, instance, schema["else"])
    return evaluated


def _valid(validator: Any, instance: Any, schema: Any) -> bool:
    return next(validator.descend(instance, schema), None) is None
