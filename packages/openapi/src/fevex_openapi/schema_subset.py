"""The JSON Schema subset this plugin accepts, and standalone tool schemas built from it.

Every keyword that constrains a value is enforced by the core's JSON Schema engine
(:func:`fevex.schemas.compile_json_schema`) on the tool input before a request is sent and
on a JSON success response before it is returned;
annotation keywords constrain nothing. A schema that uses any other keyword is refused at
definition time with ``OPENAPI_SCHEMA_UNSUPPORTED``, so no constraint of the service is
silently dropped on the way to the model.

Schemas in a tool's input schema refer to ``#/$defs/<name>`` instead of
``#/components/schemas/<name>``, with the components they reach copied into ``$defs``, so
each tool schema stands alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from fevex.schemas import linear_pattern
from fevex_openapi.document import OpenApiDocument, escape_part, unescape_part
from fevex_openapi.errors import configuration_error

__all__ = [
    "ANNOTATION_KEYWORDS",
    "CONSTRAINT_KEYWORDS",
    "SchemaBuilder",
]

#: Keywords that constrain a value; each one is enforced locally.
CONSTRAINT_KEYWORDS = frozenset(
    {
        "$ref",
        "type",
        "enum",
        "const",
        # numbers
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        # strings
        "minLength",
        "maxLength",
        "pattern",
        # arrays
        "items",
        "minItems",
        "maxItems",
        "uniqueItems",
        # objects
        "properties",
        "required",
        "additionalProperties",
        "minProperties",
        "maxProperties",
        # combinations
        "allOf",
        "anyOf",
        "oneOf",
        "not",
    }
)

#: Keywords that describe a value without constraining it (``format`` is an annotation in
#: JSON Schema 2020-12 and OpenAPI 3.1); ``x-`` extensions are accepted as well.
ANNOTATION_KEYWORDS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "example",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",
        "discriminator",
        "externalDocs",
        "xml",
        "$comment",
    }
)

_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean", "null"})
_COMPONENT_SCHEMAS = "#/components/schemas/"
_DEFS = "#/$defs/"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class SchemaBuilder:
    """Checks the schemas of one document and rewrites them for standalone tool schemas.

    Each component schema is checked once per builder, however many operations use it.
    """

    def __init__(self, document: OpenApiDocument) -> None:
        self._document = document
        self._components: dict[str, tuple[Any, frozenset[str]]] = {}

    def convert(self, schema: Any, location: str, defs: dict[str, Any]) -> Any:
        """``schema`` checked against the subset, with its references rewritten to
        ``#/$defs/...``; every component it reaches, directly or not, is added to ``defs``."""
        refs: set[str] = set()
        converted = self._convert(schema, location, refs)
        pending = sorted(refs)
        while pending:
            name = pending.pop()
            if name in defs:
                continue
            defs[name], reached = self._component(name)
            pending.extend(sorted(reached - defs.keys()))
        return converted

    def _component(self, name: str) -> tuple[Any, frozenset[str]]:
        cached = self._components.get(name)
        if cached is None:
            location = _COMPONENT_SCHEMAS + escape_part(name)
            refs: set[str] = set()
            schema = self._document.resolve(location, location)
            cached = (self._convert(schema, location, refs), frozenset(refs))
            self._components[name] = cached
        return cached

    def _convert(self, schema: Any, location: str, refs: set[str]) -> Any:
        if isinstance(schema, bool):
            return schema
        if not isinstance(schema, dict):
            raise _invalid(location, "a schema must be an object or a boolean")
        converted: dict[str, Any] = {}
        for keyword, value in schema.items():
            here = f"{location}/{escape_part(keyword)}"
            if keyword.startswith("x-") or keyword in ANNOTATION_KEYWORDS:
                converted[keyword] = value
            elif keyword in CONSTRAINT_KEYWORDS:
                converted[keyword] = self._constraint(keyword, value, here, refs)
            else:
                raise configuration_error(
                    "OPENAPI_SCHEMA_UNSUPPORTED",
                    f"The JSON Schema keyword {keyword!r} at {location} is not supported; "
                    "see the supported subset in the fevex-openapi README.",
                    {"keyword": keyword, "location": location},
                )
        return converted

    def _constraint(self, keyword: str, value: Any, here: str, refs: set[str]) -> Any:
        check = _VALUE_CHECKS.get(keyword)
        if check is not None:
            problem = check(value)
            if problem:
                raise _invalid(here, problem)
            return value
        if keyword == "$ref":
            return self._reference(value, here, refs)
        if keyword in ("items", "additionalProperties", "not"):
            return self._convert(value, here, refs)
        if keyword == "properties":
            if not isinstance(value, dict):
                raise _invalid(here, "properties must be an object of schemas")
            return {
                name: self._convert(item, f"{here}/{escape_part(name)}", refs)
                for name, item in value.items()
            }
        # allOf, anyOf, oneOf
        if not isinstance(value, list) or not value:
            raise _invalid(here, f"{keyword} must be a non-empty array of schemas")
        return [self._convert(item, f"{here}/{index}", refs) for index, item in enumerate(value)]

    def _reference(self, ref: Any, here: str, refs: set[str]) -> str:
        if not isinstance(ref, str) or not ref.startswith(_COMPONENT_SCHEMAS):
            raise configuration_error(
                "OPENAPI_REF_UNSUPPORTED",
                f"The schema reference at {here} must point into #/components/schemas/.",
                {"location": here},
            )
        # The whole pointer must lead somewhere, not only its component.
        self._document.resolve(ref, here)
        rest = ref[len(_COMPONENT_SCHEMAS) :]
        escaped_name = rest.split("/", 1)[0]
        refs.add(unescape_part(unquote(escaped_name)))
        return _DEFS + rest


def _invalid(location: str, problem: str) -> Exception:
    return configuration_error(
        "OPENAPI_SCHEMA_INVALID",
        f"The schema at {location} is invalid: {problem}.",
        {"location": location},
    )


def _check_type(value: Any) -> str | None:
    kinds = value if isinstance(value, list) else [value]
    if not kinds or not all(isinstance(k, str) and k in _TYPES for k in kinds):
        return f"type must be one of {sorted(_TYPES)} or a list of them"
    if len(set(kinds)) != len(kinds):
        return "type lists a type twice"
    return None


def _check_pattern(value: Any) -> str | None:
    if not isinstance(value, str):
        return "pattern must be a string"
    # Values from the service are matched against it on the event loop, so it must run in
    # time linear in the text: a backtracking engine can take hours on a short string.
    try:
        linear_pattern(value)
    except ValueError as error:
        return f"pattern is refused, since values are matched in linear time: {error}"
    return None


def _check_required(value: Any) -> str | None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return "required must be an array of property names"
    return None


def _check_enum(value: Any) -> str | None:
    return None if isinstance(value, list) and value else "enum must be a non-empty array"


def _number(keyword: str) -> Callable[[Any], str | None]:
    return lambda value: None if _is_number(value) else f"{keyword} must be a number"


def _count(keyword: str) -> Callable[[Any], str | None]:
    return lambda value: None if _is_count(value) else f"{keyword} must be a non-negative integer"


def _check_multiple_of(value: Any) -> str | None:
    return None if _is_number(value) and value > 0 else "multipleOf must be a positive number"


def _check_unique_items(value: Any) -> str | None:
    return None if isinstance(value, bool) else "uniqueItems must be a boolean"


_VALUE_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "type": _check_type,
    "enum": _check_enum,
    "const": lambda value: None,
    "minimum": _number("minimum"),
    "maximum": _number("maximum"),
    "exclusiveMinimum": _number("exclusiveMinimum"),
    "exclusiveMaximum": _number("exclusiveMaximum"),
    "multipleOf": _check_multiple_of,
    "minLength": _count("minLength"),
    "maxLength": _count("maxLength"),
    "pattern": _check_pattern,
    "minItems": _count("minItems"),
    "maxItems": _count("maxItems"),
    "uniqueItems": _check_unique_items,
    "required": _check_required,
    "minProperties": _count("minProperties"),
    "maxProperties": _count("maxProperties"),
}
