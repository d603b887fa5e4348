"""The JSON Schema subset this plugin accepts, and standalone tool schemas built from it.

Every keyword that constrains a value is enforced by the core's JSON Schema engine
(:func:`fevex.schemas.compile_json_schema`) on the tool input before a request is sent and
on a JSON success response before it is returned;
annotation keywords constrain nothing. A schema that uses any other keyword is refused at
definition time with ``OPENAPI_SCHEMA_UNSUPPORTED``, so no constraint of the service is
silently dropped on the way to the model.

Schemas in a tool's input schema refer to ``#/$defs/<name>`` instead of
``#/components/schemas/<name>``, with the components they reach copied into ``$defs``, so
each tool schema stands alone. A reference into a component gets a ``$defs`` entry of its
own (``Invoice/properties/total``); one through a schema's ``$id`` (OpenAPI 3.1) gets the
entry of the component it names, and no ``$id`` is copied. The schemas of a 3.0 document
are translated to 2020-12 first, one schema object at a time
(:mod:`fevex_openapi.openapi30`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin

from fevex.schemas import JsonSchemaVisitor, Subschema, SubschemaShapeError, linear_pattern
from fevex_openapi.document import OpenApiDocument, escape_part, reference_of, unescape_part
from fevex_openapi.errors import configuration_error
from fevex_openapi.openapi30 import nullable_schema, translate_30_schema

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

# The keywords of the subset that hold schemas; every other constraint holds a value.
_SUBSCHEMAS = JsonSchemaVisitor(
    ("items", "additionalProperties", "not", "properties", "allOf", "anyOf", "oneOf")
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

    Each schema a reference reaches is checked once per document and process, however many
    operations and providers use it (:meth:`for_document`).
    """

    def __init__(self, document: OpenApiDocument) -> None:
        # Weak: the builder is the value of a weak-keyed map of documents, which a strong
        # reference back to its key would keep alive after the document cache evicts it.
        self._document_ref = weakref.ref(document)
        self._dialect_30 = document.version == "3.0"
        # A reference target's location -> its converted schema and the targets it reaches.
        self._targets: dict[str, tuple[Any, dict[str, str]]] = {}
        self._lock = threading.Lock()

    @property
    def _document(self) -> OpenApiDocument:
        document = self._document_ref()
        assert document is not None, "a builder is only used with its document in hand"
        return document

    @classmethod
    def for_document(cls, document: OpenApiDocument) -> SchemaBuilder:
        """The one builder of ``document`` in this process."""
        with _BUILDERS_LOCK:
            builder = _BUILDERS.get(document)
            if builder is None:
                builder = _BUILDERS[document] = cls(document)
            return builder

    def convert(self, schema: Any, location: str, defs: dict[str, Any]) -> Any:
        """``schema`` checked against the subset, with its references rewritten to
        ``#/$defs/...``; every schema it reaches, directly or not, is added to ``defs``."""
        with self._lock:
            refs: dict[str, str] = {}
            converted = self._convert(schema, location, refs, "")
            pending = sorted(refs.items())
            while pending:
                key, pointer = pending.pop()
                if key in defs:
                    continue
                defs[key], reached = self._target(pointer)
                pending.extend(sorted(item for item in reached.items() if item[0] not in defs))
            return converted

    def _target(self, pointer: str) -> tuple[Any, dict[str, str]]:
        cached = self._targets.get(pointer)
        if cached is None:
            refs: dict[str, str] = {}
            schema, _ = self._document.resolve(pointer, pointer)
            cached = (self._convert(schema, pointer, refs, self._base_at(pointer)), refs)
            self._targets[pointer] = cached
        return cached

    def _base_at(self, pointer: str) -> str:
        """The URI references at ``pointer`` are written under: the ``$id`` of the schema
        resources around it, innermost last."""
        base = ""
        if self._dialect_30:
            return base
        node: Any = self._document.data
        for part in pointer[2:].split("/"):
            if isinstance(node, dict) and isinstance(node.get("$id"), str):
                base = urljoin(base, node["$id"])
            node = node.get(unescape_part(part)) if isinstance(node, dict) else None
        return base

    def _convert(self, schema: Any, location: str, refs: dict[str, str], base: str) -> Any:
        if isinstance(schema, bool):
            return schema
        if not isinstance(schema, dict):
            raise _invalid(location, "a schema must be an object or a boolean")
        nullable = False
        if self._dialect_30:
            schema, nullable = translate_30_schema(schema, location)
        elif isinstance(schema.get("$id"), str):
            base = urljoin(base, schema["$id"])
        converted: dict[str, Any] = {}
        for keyword, value in schema.items():
            here = f"{location}/{escape_part(keyword)}"
            if keyword.startswith("x-") or keyword in ANNOTATION_KEYWORDS:
                converted[keyword] = value
            elif keyword in CONSTRAINT_KEYWORDS:
                converted[keyword] = self._constraint(keyword, value, here, refs, base)
            elif keyword == "$id" and not self._dialect_30:
                if not isinstance(value, str) or not value:
                    raise _invalid(here, "$id must be a non-empty URI string")
                # References are rewritten to #/$defs/... of the tool schema, which an $id
                # left in place would move to another base URI.
            else:
                raise configuration_error(
                    "OPENAPI_SCHEMA_UNSUPPORTED",
                    f"The JSON Schema keyword {keyword!r} at {location} is not supported; "
                    "see the supported subset in the fevex-openapi README.",
                    {"keyword": keyword, "location": location},
                )
        return nullable_schema(converted) if nullable else converted

    def _constraint(
        self, keyword: str, value: Any, here: str, refs: dict[str, str], base: str
    ) -> Any:
        check = _VALUE_CHECKS.get(keyword)
        if check is not None:
            problem = check(value)
            if problem:
                raise _invalid(here, problem)
            return value
        if keyword == "$ref":
            return self._reference(value, here, refs, base)

        def convert(child: Subschema) -> Any:
            where = here if child.key is None else f"{here}/{escape_part(str(child.key))}"
            return self._convert(child.schema, where, refs, base)

        try:
            children = _SUBSCHEMAS.under(keyword, value)
        except SubschemaShapeError as error:
            raise _invalid(here, str(error)) from None
        return _SUBSCHEMAS.rebuilt(keyword, children, convert)

    def _reference(self, ref: Any, here: str, refs: dict[str, str], base: str) -> str:
        location = here.rsplit("/", 1)[0]
        checked = reference_of({"$ref": ref}, location)
        assert checked is not None
        # The whole pointer must lead somewhere, not only its component.
        _, pointer = self._document.resolve(checked, location, base)
        if not pointer.startswith(_COMPONENT_SCHEMAS):
            raise configuration_error(
                "OPENAPI_REF_UNSUPPORTED",
                f"The schema reference at {location} must point into #/components/schemas/ "
                f"(it points at {pointer[:120]}).",
                {"location": location},
            )
        rest = pointer[len(_COMPONENT_SCHEMAS) :]
        # A whole component keeps its name; a place inside one is a $defs entry of its own
        # (component names cannot hold '/', so the two never meet).
        key = unescape_part(rest) if "/" not in rest else rest
        refs[key] = pointer
        return _DEFS + escape_part(key)


_BUILDERS: weakref.WeakKeyDictionary[OpenApiDocument, SchemaBuilder] = weakref.WeakKeyDictionary()
_BUILDERS_LOCK = threading.Lock()


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
