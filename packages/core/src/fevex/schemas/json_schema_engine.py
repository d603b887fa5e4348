"""fevex's one JSON Schema 2020-12 engine, for schemas that arrive as JSON.

Connection tools (MCP), OpenAPI operations and :class:`fevex.schemas.JsonSchema` all check
values with it. It is jsonschema's Draft 2020-12 validator (every keyword, ``$ref``,
``$defs`` and the combinators included; ``format`` is an annotation, as 2020-12 says),
with the keywords that could stall a run replaced (:mod:`fevex.schemas.json_schema_keywords`).
jsonschema is imported when the first schema is compiled, not by ``import fevex``.

A document is checked whole when it is compiled, and refused with :class:`JsonSchemaError`
when it is not a 2020-12 schema, has a ``pattern`` (or ``patternProperties`` key) that a
linear-time engine cannot run (look-around, back-references), or a ``$ref`` that points
at nothing or outside the document, but for the metaschemas jsonschema bundles: no
reference is ever fetched. Callers turn the error into their own stable code.

Both the document and the value may come from a remote server, so validation is bounded:
patterns run in linear time, equality is linear, a value nested deeper than
``MAX_JSON_DEPTH`` is a problem before any keyword runs, and references spend from a budget.
Problems name the JSON path of the place (``input.body.card``, ``value[3]``), never the
value, and name a property only when the schema declares that name: any other key came
with the value and is named by its position (``value.<property 2>``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

from fevex.schemas.json_schema_budget import TooComplexError, ValidationBudget, budget
from fevex.schemas.json_schema_visitor import JsonSchemaVisitor
from fevex.schemas.pattern import linear_pattern
from fevex.schemas.schema import MAX_JSON_DEPTH, ensure_json

__all__ = ["CompiledJsonSchema", "JsonSchemaError", "compile_json_schema"]

MAX_PROBLEMS = 5
# Combinations over recursive schemas branch without bound; a value that needs more
# reference hops than this is refused rather than stalling the run.
_MAX_REFERENCE_STEPS = 100_000
# A reference that refers back to itself without consuming the value nests until this.
_MAX_REFERENCE_DEPTH = 2 * MAX_JSON_DEPTH
_MAX_SHOWN = 64
_EVERY_SUBSCHEMA = JsonSchemaVisitor()

_MESSAGES = {
    "minimum": "below the minimum",
    "maximum": "above the maximum",
    "exclusiveMinimum": "not above the exclusive minimum",
    "exclusiveMaximum": "not below the exclusive maximum",
    "minLength": "too short",
    "maxLength": "too long",
    "minItems": "too few items",
    "maxItems": "too many items",
    "minProperties": "too few properties",
    "maxProperties": "too many properties",
    "anyOf": "matches none of the allowed shapes (anyOf)",
    "not": "matches a shape that is not allowed (not)",
    "contains": "has no item of the required shape (contains)",
    "minContains": "has too few items of the required shape (minContains)",
    "maxContains": "has too many items of the required shape (maxContains)",
    "dependentRequired": "lacks a property that another property requires (dependentRequired)",
    "unevaluatedProperties": "has properties its schema does not allow (unevaluatedProperties)",
    "unevaluatedItems": "has items its schema does not allow (unevaluatedItems)",
    "items": "has more items than its schema allows (items)",
    "propertyNames": "has a property name its schema does not allow (propertyNames)",
}


class JsonSchemaError(ValueError):
    """A JSON Schema document that fevex refuses to compile.

    ``location`` is a JSON Pointer into the document (``#/properties/q/pattern``) and
    ``problem`` says what is wrong there; the message joins them.
    """

    def __init__(self, location: str, problem: str) -> None:
        super().__init__(f"the schema at {location} is invalid: {problem}")
        self.location = location
        self.problem = problem


class CompiledJsonSchema:
    """A checked JSON Schema document, ready to check values."""

    __slots__ = ("_declared", "_validator", "document")

    def __init__(
        self, document: Mapping[str, Any] | bool, validator: Any, declared: frozenset[str]
    ):
        self.document = document
        self._validator = validator
        self._declared = declared

    def problems(self, value: Any, name: str = "value") -> list[str]:
        """What is wrong with ``value`` (at most five problems; empty: it is valid).

        Each problem is ``"<path>: <what>"`` with the path starting at ``name``.
        """
        from referencing.exceptions import Unresolvable

        from fevex.schemas.json_equality import NestedTooDeepError

        shape = _shape_problem(value, name, self._declared)
        if shape is not None:
            return [shape]
        state = ValidationBudget(_MAX_REFERENCE_STEPS, _MAX_REFERENCE_DEPTH, MAX_JSON_DEPTH)
        token = budget.set(state)
        found: list[tuple[tuple[int, ...], str]] = []
        try:
            for error in self._validator.iter_errors(value):
                found.append(_describe(error, value, name, self._declared))
                if len(found) >= MAX_PROBLEMS:
                    break
        except (TooComplexError, NestedTooDeepError, RecursionError):
            return [f"{name}: too deep or too complex to check against its schema"]
        except Unresolvable:
            return [f"{name}: its schema refers to a schema it does not hold"]
        finally:
            budget.reset(token)
        # In the order of the places in the value, whatever order the keywords ran in.
        return [problem for _, problem in sorted(found, key=lambda item: item[0])]

    def is_valid(self, value: Any) -> bool:
        return not self.problems(value)


def compile_json_schema(document: Any) -> CompiledJsonSchema:
    """Check ``document`` as a JSON Schema 2020-12 document and compile it.

    Raises :class:`JsonSchemaError` when it is refused (see the module's docstring).
    """
    if not isinstance(document, Mapping | bool):
        raise JsonSchemaError("#", "a schema must be an object or a boolean")
    if isinstance(document, Mapping):
        document = dict(document)
        try:
            ensure_json(document)
        except TypeError as error:
            raise JsonSchemaError("#", f"not plain JSON ({error})") from None
    from fevex.schemas.json_schema_keywords import Validator

    _check_against_metaschema(document, Validator)
    declared = _check_subschemas(document)
    # An explicit registry: references resolve inside the document and to the bundled
    # metaschemas, and jsonschema never fetches one from the network.
    registry, _ = _metaschemas()
    return CompiledJsonSchema(document, Validator(document, registry=registry), declared)


def _check_against_metaschema(document: Any, validator_class: Any) -> None:
    from jsonschema.exceptions import best_match  # type: ignore[import-untyped]

    # The document is checked with the same bounded keywords as values are: it may come
    # from a remote server too (a ``required`` of 100,000 numbers is no reason to stall).
    checker = validator_class(validator_class.META_SCHEMA)
    token = budget.set(ValidationBudget(_MAX_REFERENCE_STEPS, 64 * MAX_JSON_DEPTH, MAX_JSON_DEPTH))
    try:
        error = best_match(checker.iter_errors(document))
    except (TooComplexError, RecursionError):
        raise JsonSchemaError("#", "too deep or too complex to check") from None
    finally:
        budget.reset(token)
    if error is not None:
        where = _pointer(error.absolute_path)
        keyword = error.validator if isinstance(error.validator, str) else "schema"
        raise JsonSchemaError(where, f"it does not follow JSON Schema 2020-12 ({keyword})")


def _check_subschemas(document: Any) -> frozenset[str]:
    """Compile every pattern, resolve every reference; the property names it declares."""
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012

    declared: set[str] = set()
    root = DRAFT202012.create_resource(document)
    registry, bundled = _metaschemas()
    resolver = registry.resolver_with_root(root)
    stack: list[tuple[Any, Any, tuple[str | int, ...]]] = [(document, resolver, ())]
    seen: set[int] = set()
    while stack:
        schema, resolver, path = stack.pop()
        if not isinstance(schema, Mapping) or id(schema) in seen:
            continue
        seen.add(id(schema))
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            _check_pattern(pattern, (*path, "pattern"))
        for key in schema.get("patternProperties") or ():
            _check_pattern(key, (*path, "patternProperties", key))
        declared.update(schema.get("properties") or ())
        declared.update(schema.get("required") or ())
        for owner, names in (schema.get("dependentRequired") or {}).items():
            declared.add(owner)
            declared.update(names)
        for keyword in ("$ref", "$dynamicRef"):
            ref = schema.get(keyword)
            if isinstance(ref, str):
                try:
                    resolved = resolver.lookup(ref)
                except Unresolvable:
                    raise JsonSchemaError(
                        _pointer((*path, keyword)),
                        f"the reference {_shown(ref)!r} points at nothing in the document "
                        "(references to other documents are not fetched)",
                    ) from None
                # A reference may lead where no keyword does (``#/anything``): what it
                # reaches is checked as well, unless it is a metaschema fevex ships.
                if id(resolved.contents) not in bundled:
                    stack.append((resolved.contents, resolved.resolver, (*path, keyword)))
        for child in _EVERY_SUBSCHEMA.subschemas(schema):
            resource = DRAFT202012.create_resource(child.schema)
            stack.append((child.schema, resolver.in_subresource(resource), (*path, *child.steps)))
    return frozenset(declared)


@functools.cache
def _metaschemas() -> tuple[Any, frozenset[int]]:
    """The registry of the metaschemas jsonschema bundles (every draft's, and the 2020-12
    vocabularies'), and the ``id()`` of every object inside them: they are trusted, need
    no check, and their keyword names are not names a document declares."""
    from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped]

    nodes: set[int] = set()
    stack: list[Any] = [REGISTRY.contents(uri) for uri in REGISTRY]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            nodes.add(id(node))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return REGISTRY, frozenset(nodes)


def _check_pattern(pattern: str, path: tuple[str | int, ...]) -> None:
    try:
        linear_pattern(pattern)
    except ValueError as error:
        raise JsonSchemaError(
            _pointer(path),
            f"{error}; values are matched in linear time, without look-around or back-references",
        ) from None


def _shape_problem(value: Any, name: str, declared: frozenset[str]) -> str | None:
    """Nesting deeper than ``MAX_JSON_DEPTH`` or a non-finite number, found iteratively."""
    stack: list[tuple[Any, tuple[Any, ...], int]] = [(value, (), 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return f"{_path(name, path, value, declared)[0]}: not a finite number"
        if isinstance(item, dict | list):
            if depth >= MAX_JSON_DEPTH:
                return f"{name}: nested deeper than {MAX_JSON_DEPTH} levels"
            children = item.items() if isinstance(item, dict) else enumerate(item)
            stack.extend((child, (*path, key), depth + 1) for key, child in children)
    return None


def _describe(
    error: Any, value: Any, name: str, declared: frozenset[str]
) -> tuple[tuple[int, ...], str]:
    """The problem as text, after the key that orders it by its place in the value."""
    where, place = _path(name, tuple(error.absolute_path), value, declared)
    keyword = error.validator
    from fevex.schemas.json_schema_keywords import FEVEX_MESSAGES

    if keyword in FEVEX_MESSAGES:
        message = error.message
    elif keyword is None:  # the schema ``false``
        message = "no value is allowed here"
    elif keyword == "type":
        kinds = error.validator_value
        kinds = kinds if isinstance(kinds, list) else [kinds]
        message = f"expected {' or '.join(map(str, kinds))}"
    elif keyword == "oneOf":
        message = (
            "matches none of the shapes where exactly one must (oneOf)"
            if error.context
            else "matches more than one of the shapes where exactly one must (oneOf)"
        )
    else:
        message = _MESSAGES.get(keyword, f"does not satisfy {keyword}")
    return place, f"{where}: {message}"


def _path(
    name: str, steps: tuple[Any, ...], value: Any, declared: frozenset[str]
) -> tuple[str, tuple[int, ...]]:
    """``steps`` as a JSON path from ``name``, and the position of each step in the value."""
    parts = [name]
    positions: list[int] = []
    node = value
    for step in steps:
        if isinstance(node, dict):
            position = list(node).index(step) if step in node else len(node)
        else:
            position = step if isinstance(step, int) else 0
        positions.append(position)
        if isinstance(step, int) and isinstance(node, list):
            parts.append(f"[{step}]")
        elif isinstance(step, str) and step in declared and len(step) <= _MAX_SHOWN:
            parts.append(f".{step}")
        else:
            # A name the schema does not declare came with the value, and may be anything
            # (a credential included): it is named by its position.
            parts.append(f".<property {position}>")
        node = node.get(step) if isinstance(node, dict) else _item(node, step)
    return "".join(parts), tuple(positions)


def _item(node: Any, step: Any) -> Any:
    if isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
        return node[step]
    return None


def _pointer(path: Any) -> str:
    parts = [str(part).replace("~", "~0").replace("/", "~1") for part in path]
    return _shown("#/" + "/".join(parts) if parts else "#")


def _shown(text: str) -> str:
    return text if len(text) <= 200 else text[:199] + "…"
