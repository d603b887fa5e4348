"""A plain JSON Schema document used as a schema, for tools whose schema comes as data
(connections). It checks the structural core of JSON Schema 2020-12 locally (types,
properties, required, additionalProperties, items, enum, const, bounds, lengths,
patterns); the remote side stays responsible for the rest.

The document and the value may both come from a remote server, so checking is bounded:
patterns run in a linear-time engine (:func:`fevex.schemas.linear_pattern`), and nesting
deeper than ``MAX_JSON_DEPTH`` is a problem rather than a ``RecursionError``. A check
visits each value once per schema node, so it is linear in the size of the value.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from fevex.schemas.pattern import linear_pattern
from fevex.schemas.schema import MAX_JSON_DEPTH

__all__ = ["JsonSchema", "schema_patterns"]


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


class JsonSchema:
    """Validates JSON values against a JSON Schema document's structural keywords."""

    __slots__ = ("document",)

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document = dict(document)

    def json_schema(self) -> dict[str, Any]:
        return self.document

    def validate(self, value: Any) -> Any:
        problems: list[str] = []
        _check(self.document, value, "value", problems, 0)
        if problems:
            raise ValueError("; ".join(problems[:5]))
        return value


def schema_patterns(document: Any) -> Iterator[str]:
    """Every ``pattern`` string of a schema document, found without recursion."""
    stack = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            pattern = node.get("pattern")
            if isinstance(pattern, str):
                yield pattern
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _check(schema: Any, value: Any, path: str, problems: list[str], depth: int) -> None:
    if schema is True or schema is None:
        return
    if depth > MAX_JSON_DEPTH:
        problems.append(f"{path}: nested deeper than {MAX_JSON_DEPTH} levels")
        return
    if schema is False:
        problems.append(f"{path}: no value is allowed here")
        return
    if not isinstance(schema, Mapping):
        return
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_TYPES.get(k, lambda v: True)(value) for k in kinds):
            problems.append(f"{path}: expected {' or '.join(map(str, kinds))}")
            return
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: not one of the allowed values")
    if "const" in schema and value != schema["const"]:
        problems.append(f"{path}: not the required constant")
    if isinstance(value, dict):
        _check_object(schema, value, path, problems, depth)
    elif isinstance(value, list):
        items = schema.get("items")
        for index, item in enumerate(value):
            _check(items, item, f"{path}[{index}]", problems, depth + 1)
        if len(value) < schema.get("minItems", 0):
            problems.append(f"{path}: too few items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append(f"{path}: too many items")
    elif isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            problems.append(f"{path}: too short")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{path}: too long")
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            try:
                if not linear_pattern(pattern).search(value):
                    problems.append(f"{path}: does not match the pattern")
            except ValueError as error:
                problems.append(f"{path}: {error}")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            problems.append(f"{path}: not a finite number")
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{path}: below the minimum")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{path}: above the maximum")


def _check_object(
    schema: Mapping[str, Any], value: dict[str, Any], path: str, problems: list[str], depth: int
) -> None:
    properties = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in value:
            problems.append(f"{path}.{name}: required")
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            _check(properties[name], item, f"{path}.{name}", problems, depth + 1)
        elif extra is False:
            problems.append(f"{path}.{name}: not allowed")
        elif isinstance(extra, Mapping):
            _check(extra, item, f"{path}.{name}", problems, depth + 1)
