"""Enforcing the accepted JSON Schema subset on a JSON value.

Tool input is checked before any request leaves, and a JSON success response before it
reaches the run. Problems name where in the value they are, never the value itself (it may
be a secret or untrusted text), nor the name of a property the schema does not declare
(that name came with the value too): such a property is named by its position.

Validation runs on the event loop, so its cost is bounded: it is linear in the size of the
value (times the size of the schema), and no check holds the loop longer than that.
Patterns run on a linear-time engine (:func:`fevex.schemas.linear_pattern`); equality for
``uniqueItems``, ``enum`` and ``const`` compares canonical forms, each computed once per
value node and validation, so a uniqueness check is one pass over hashes rather than a
comparison of every pair; nesting deeper than 256 levels and more than 100,000 schema
checks (combinations over recursive schemas branch) are refused as too complex.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Any
from urllib.parse import unquote

from fevex.schemas import linear_pattern

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
        _Validator(root, problems, _ValidationState()).check(root, value, name, 0)
    except _TooComplexError:
        return [f"{name}: too deep or too complex to check against its schema"]
    return problems[:_MAX_PROBLEMS]


class _TooComplexError(Exception):
    pass


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


class _CanonicalForms:
    """Tokens for JSON equality: two values are equal as JSON exactly when their tokens are.

    As JSON means it: ``true`` is not ``1``, ``1`` is ``1.0``, the order of an object's
    keys does not matter. A scalar's token is a tagged tuple; an array's or object's token
    is a number standing for its content, the tokens of its items, so the key that gets
    hashed is flat and an item's form is computed once however often it is compared.
    Containers are walked with an explicit stack, never by recursion.
    """

    def __init__(self) -> None:
        self._interned: dict[Hashable, int] = {}
        # By id(): every node belongs to the value or schema being validated, which stay
        # alive (and unchanged) for the whole validation.
        self._containers: dict[int, int] = {}
        self._unique: dict[int, bool] = {}
        self._sets: dict[int, frozenset[Hashable]] = {}

    def token(self, value: Any, depth: int) -> Hashable:
        if not isinstance(value, list | dict):
            return _scalar_token(value)
        stack = [(value, depth)]
        while stack:
            node, level = stack[-1]
            if id(node) in self._containers:
                stack.pop()
                continue
            if level > _MAX_DEPTH:
                raise _TooComplexError
            items = node.values() if isinstance(node, dict) else node
            pending = [
                (item, level + 1)
                for item in items
                if isinstance(item, list | dict) and id(item) not in self._containers
            ]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            key: Hashable
            if isinstance(node, dict):
                key = ("object", frozenset((k, self._known(v)) for k, v in node.items()))
            else:
                key = ("array", tuple(self._known(item) for item in node))
            self._containers[id(node)] = self._interned.setdefault(key, len(self._interned))
        return self._containers[id(value)]

    def _known(self, value: Any) -> Hashable:
        if isinstance(value, list | dict):
            return self._containers[id(value)]
        return _scalar_token(value)

    def all_unique(self, items: list[Any], depth: int) -> bool:
        known = self._unique.get(id(items))
        if known is None:
            seen: set[Hashable] = set()
            for item in items:
                token = self.token(item, depth + 1)
                if token in seen:
                    break
                seen.add(token)
            known = self._unique[id(items)] = len(seen) == len(items)
        return known

    def one_of(self, value: Any, allowed: list[Any], depth: int) -> bool:
        tokens = self._sets.get(id(allowed))
        if tokens is None:
            tokens = self._sets[id(allowed)] = frozenset(self.token(item, 0) for item in allowed)
        return self.token(value, depth) in tokens


def _scalar_token(value: Any) -> Hashable:
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, int | float):
        # Python compares int and float exactly, so 1 and 1.0 share a key and 2**53 + 1
        # stays apart from 2.0**53, as the numbers they stand for do.
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    return ("null", None) if value is None else ("other", id(value))


class _ValidationState:
    """What one validation shares with every probe of its combinations: the schema checks
    it may still make, and what it has computed once rather than again per check."""

    def __init__(self) -> None:
        self.steps = _MAX_STEPS
        self.forms = _CanonicalForms()
        self.pattern_results: dict[tuple[str, int], bool] = {}


class _Validator:
    def __init__(
        self, root: Mapping[str, Any], problems: list[str], state: _ValidationState
    ) -> None:
        self.root = root
        self.problems = problems
        self.state = state

    def fail(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def matches(self, schema: Any, value: Any, path: str, depth: int) -> bool:
        """Whether ``value`` is valid, without reporting why (for combinations)."""
        probe = _Validator(self.root, [], self.state)
        probe.check(schema, value, path, depth)
        return not probe.problems

    def check(self, schema: Any, value: Any, path: str, depth: int) -> None:
        if schema is True:
            return
        if schema is False:
            self.fail(path, "no value is allowed here")
            return
        self.state.steps -= 1
        if depth > _MAX_DEPTH or self.state.steps < 0:
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
        forms = self.state.forms
        if "enum" in schema and not forms.one_of(value, schema["enum"], depth):
            self.fail(path, "not one of the allowed values")
        if "const" in schema and forms.token(value, depth) != forms.token(schema["const"], 0):
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
        if pattern is not None and not self.matches_pattern(pattern, value):
            self.fail(path, "does not match the pattern")

    def matches_pattern(self, pattern: str, text: str) -> bool:
        # Combinations may check one string against one pattern many times; each search is
        # linear in the string, so it is done once. id(): the string outlives validation.
        key = (pattern, id(text))
        found = self.state.pattern_results.get(key)
        if found is None:
            # The document's patterns were compiled when it was loaded, so this cannot fail.
            found = self.state.pattern_results[key] = linear_pattern(pattern).search(text)
        return found

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
        if schema.get("uniqueItems") is True and not self.state.forms.all_unique(value, depth):
            self.fail(path, "items are not unique")

    def check_object(
        self, schema: Mapping[str, Any], value: dict[str, Any], path: str, depth: int
    ) -> None:
        properties: Mapping[str, Any] = schema.get("properties") or {}
        for name in schema.get("required") or ():
            if name not in value:
                self.fail(f"{path}.{name}", "required")
        extra = schema.get("additionalProperties", True)
        for position, (name, item) in enumerate(value.items()):
            if name in properties:
                self.check(properties[name], item, f"{path}.{name}", depth + 1)
            elif extra is False:
                self.fail(f"{path}.<property {position}>", "not allowed")
            elif isinstance(extra, Mapping):
                self.check(extra, item, f"{path}.<property {position}>", depth + 1)
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
