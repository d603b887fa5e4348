"""Enforcing the accepted JSON Schema subset on a JSON value.

Tool input is checked before any request leaves, and a JSON success response before it
reaches the run. Problems name where in the value they are, never the value itself (it may
be a secret or untrusted text).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

__all__ = ["schema_problems"]

_MAX_DEPTH = 256
_MAX_PROBLEMS = 5
# Combinations over recursive schemas can branch without bound; a value that needs more
# schema checks than this is refused rather than stalling the run.
_MAX_STEPS = 100_000


def schema_problems(root: Mapping[str, Any], value: Any, name: str = "value") -> list[str]:
    """What is wrong with ``value`` against the standalone schema ``root`` (empty: valid)."""
    problems: list[str] = []
    try:
        _Validator(root, problems, [_MAX_STEPS]).check(root, value, name, 0)
    except _TooComplexError:
        return [f"{name}: too deep or too complex to check against its schema"]
    return problems[:_MAX_PROBLEMS]


class _TooComplexError(Exception):
    pass


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


_TYPES: dict[str, Any] = {
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "string": lambda value: isinstance(value, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
}


def _is_multiple(value: float, divisor: float) -> bool:
    if isinstance(value, int) and isinstance(divisor, int):
        return value % divisor == 0
    quotient = value / divisor
    return math.isfinite(quotient) and math.isclose(quotient, round(quotient), abs_tol=1e-9)


def json_equal(left: Any, right: Any) -> bool:
    """Equality as JSON means it: ``true`` is not ``1``, ``1`` is ``1.0``."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if _is_number(left) and _is_number(right):
        return bool(left == right)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(json_equal, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    return type(left) is type(right) and bool(left == right)


class _Validator:
    def __init__(self, root: Mapping[str, Any], problems: list[str], steps: list[int]) -> None:
        self.root = root
        self.problems = problems
        self.steps = steps  # shared with probes: one budget per validation

    def fail(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def matches(self, schema: Any, value: Any, path: str, depth: int) -> bool:
        """Whether ``value`` is valid, without reporting why (for combinations)."""
        probe = _Validator(self.root, [], self.steps)
        probe.check(schema, value, path, depth)
        return not probe.problems

    def check(self, schema: Any, value: Any, path: str, depth: int) -> None:
        if schema is True:
            return
        if schema is False:
            self.fail(path, "no value is allowed here")
            return
        self.steps[0] -= 1
        if depth > _MAX_DEPTH or self.steps[0] < 0:
            raise _TooComplexError
        if not isinstance(schema, Mapping):
            return
        if "$ref" in schema:
            self.check(self.resolve(schema["$ref"]), value, path, depth + 1)
        kind = schema.get("type")
        if kind is not None:
            kinds = kind if isinstance(kind, list) else [kind]
            if not any(_TYPES[k](value) for k in kinds):
                self.fail(path, f"expected {' or '.join(kinds)}")
                return
        if "enum" in schema and not any(json_equal(value, item) for item in schema["enum"]):
            self.fail(path, "not one of the allowed values")
        if "const" in schema and not json_equal(value, schema["const"]):
            self.fail(path, "not the required constant")
        if _is_number(value):
            self.check_number(schema, value, path)
        elif isinstance(value, str):
            self.check_string(schema, value, path)
        elif isinstance(value, list):
            self.check_array(schema, value, path, depth)
        elif isinstance(value, dict):
            self.check_object(schema, value, path, depth)
        self.check_combinations(schema, value, path, depth)

    def resolve(self, ref: str) -> Any:
        node: Any = self.root
        fragment = unquote(ref[1:])
        for part in fragment[1:].split("/") if fragment else ():
            part = part.replace("~1", "/").replace("~0", "~")
            node = node[int(part)] if isinstance(node, list) else node[part]
        return node

    def check_number(self, schema: Mapping[str, Any], value: float, path: str) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(path, "not a finite number")
            return
        if "minimum" in schema and value < schema["minimum"]:
            self.fail(path, "below the minimum")
        if "maximum" in schema and value > schema["maximum"]:
            self.fail(path, "above the maximum")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            self.fail(path, "not above the exclusive minimum")
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            self.fail(path, "not below the exclusive maximum")
        divisor = schema.get("multipleOf")
        if divisor is not None and not _is_multiple(value, divisor):
            self.fail(path, "not a multiple of the required step")

    def check_string(self, schema: Mapping[str, Any], value: str, path: str) -> None:
        if len(value) < schema.get("minLength", 0):
            self.fail(path, "too short")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            self.fail(path, "too long")
        pattern = schema.get("pattern")
        if pattern is not None and _compiled(pattern).search(value) is None:
            self.fail(path, "does not match the pattern")

    def check_array(
        self, schema: Mapping[str, Any], value: list[Any], path: str, depth: int
    ) -> None:
        if "items" in schema:
            for index, item in enumerate(value):
                self.check(schema["items"], item, f"{path}[{index}]", depth + 1)
        if len(value) < schema.get("minItems", 0):
            self.fail(path, "too few items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            self.fail(path, "too many items")
        if schema.get("uniqueItems") is True and any(
            json_equal(value[i], value[j])
            for i in range(len(value))
            for j in range(i + 1, len(value))
        ):
            self.fail(path, "items are not unique")

    def check_object(
        self, schema: Mapping[str, Any], value: dict[str, Any], path: str, depth: int
    ) -> None:
        properties: Mapping[str, Any] = schema.get("properties") or {}
        for name in schema.get("required") or ():
            if name not in value:
                self.fail(f"{path}.{name}", "required")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in properties:
                self.check(properties[name], item, f"{path}.{name}", depth + 1)
            elif extra is False:
                self.fail(f"{path}.{name}", "not allowed")
            elif isinstance(extra, Mapping):
                self.check(extra, item, f"{path}.{name}", depth + 1)
        if len(value) < schema.get("minProperties", 0):
            self.fail(path, "too few properties")
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            self.fail(path, "too many properties")

    def check_combinations(
        self, schema: Mapping[str, Any], value: Any, path: str, depth: int
    ) -> None:
        for item in schema.get("allOf", ()):
            self.check(item, value, path, depth + 1)
        if "anyOf" in schema and not any(
            self.matches(item, value, path, depth + 1) for item in schema["anyOf"]
        ):
            self.fail(path, "matches none of the allowed shapes (anyOf)")
        if "oneOf" in schema:
            matched = sum(self.matches(item, value, path, depth + 1) for item in schema["oneOf"])
            if matched != 1:
                self.fail(path, f"matches {matched} of the shapes where exactly one must (oneOf)")
        if "not" in schema and self.matches(schema["not"], value, path, depth + 1):
            self.fail(path, "matches a shape that is not allowed (not)")
