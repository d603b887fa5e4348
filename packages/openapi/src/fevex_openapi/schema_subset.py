"""The JSON Schema subset this plugin accepts, and standalone tool schemas built from it.

Every keyword that constrains a value is enforced by the core's JSON Schema engine
(:func:`fevex.schemas.compile_json_schema`) on the tool input before a request is sent and
on a JSON success response before it is returned;
annotation keywords constrain nothing. A schema that uses another keyword of JSON Schema
is refused at definition time with ``OPENAPI_SCHEMA_UNSUPPORTED`` (:data:`REFUSED_KEYWORDS`
says why for each), so no constraint of the service is silently dropped on the way to the
model. A keyword that no vocabulary of the dialect defines (``swagger-extension``) is an
annotation, as JSON Schema 2020-12 says: it constrains nothing and is left out.

Schemas in a tool's input schema refer to ``#/$defs/<name>`` instead of
``#/components/schemas/<name>``, with the components they reach copied into ``$defs``, so
each tool schema stands alone. A reference into a component gets a ``$defs`` entry of its
own (``Invoice/properties/total``); one through a schema's ``$id`` (OpenAPI 3.1) gets the
entry of the component it names, and no ``$id`` is copied; one to an ``$anchor`` gets the
entry of the place the anchor names. The schemas of a 3.0 document are translated to
2020-12 first, one schema object at a time (:mod:`fevex_openapi.openapi30`).

References that apply a schema to the very value it checks (``$ref``, and the branches of
``allOf``, ``anyOf``, ``oneOf``, ``not``) must not lead back to where they started: such a
loop never reaches a shape, so the engine would check every value until its budget runs
out. A schema that refers to itself inside ``properties``, ``items`` or
``additionalProperties`` checks a smaller value each time, and is an ordinary tree.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from urllib.parse import urljoin

from fevex.schemas import JsonSchemaVisitor, Subschema, SubschemaShapeError, linear_pattern
from fevex_openapi.document import (
    SCHEMA_DIALECTS,
    OpenApiDocument,
    escape_part,
    reference_loop,
    reference_of,
    unescape_part,
)
from fevex_openapi.errors import configuration_error
from fevex_openapi.openapi30 import nullable_schema, translate_30_schema

__all__ = [
    "ANNOTATION_KEYWORDS",
    "CONSTRAINT_KEYWORDS",
    "LEFT_OUT_KEYWORDS",
    "REFUSED_KEYWORDS",
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

#: Keywords of a 3.1 schema that are accepted and left out of tool schemas: ``$id`` and
#: ``$anchor`` name a schema for references (which become ``#/$defs/...`` there),
#: ``$schema`` names the dialect (one of :data:`~fevex_openapi.document.SCHEMA_DIALECTS`),
#: and ``$vocabulary`` means something only in a metaschema.
LEFT_OUT_KEYWORDS = frozenset({"$id", "$anchor", "$schema", "$vocabulary"})

_CONSTRAINS = (
    "it constrains values in a way this plugin does not enforce, and leaving it out would "
    "let through what the service refuses"
)
_DYNAMIC = (
    "a dynamic reference resolves by the path validation took, which is lost when "
    "references are rewritten to #/$defs/..."
)
#: The other keywords of JSON Schema 2020-12 (and of the drafts its metaschema still
#: names), and OpenAPI 3.0's ``nullable`` in a 3.1 document: each refused, and why.
REFUSED_KEYWORDS: Mapping[str, str] = MappingProxyType(
    {
        **dict.fromkeys(
            (
                *("patternProperties", "propertyNames", "dependentRequired"),
                *("dependentSchemas", "dependencies", "if", "then", "else", "prefixItems"),
                *("contains", "minContains", "maxContains"),
                *("unevaluatedProperties", "unevaluatedItems"),
            ),
            _CONSTRAINS,
        ),
        **dict.fromkeys(
            ("$defs", "definitions"),
            "schemas are shared through #/components/schemas, where references must lead",
        ),
        **dict.fromkeys(
            ("$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor"), _DYNAMIC
        ),
        **dict.fromkeys(
            ("contentMediaType", "contentEncoding", "contentSchema"),
            "it describes a document encoded in a string (a file, base64), which this "
            "plugin neither encodes nor checks",
        ),
        "nullable": 'it is OpenAPI 3.0\'s; a 3.1 schema allows null with "type": [..., "null"]',
    }
)

# The keywords of the subset that hold schemas; every other constraint holds a value.
_SUBSCHEMAS = JsonSchemaVisitor(
    ("items", "additionalProperties", "not", "properties", "allOf", "anyOf", "oneOf")
)
# Those of them whose schemas check the very value the schema around them checks.
_IN_PLACE = frozenset({"allOf", "anyOf", "oneOf", "not"})
_ANCHOR = re.compile(r"[A-Za-z_][-A-Za-z0-9._]*")
_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean", "null"})
_COMPONENT_SCHEMAS = "#/components/schemas/"
_DEFS = "#/$defs/"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(slots=True)
class _Reached:
    """The reference targets a schema reaches: each by its ``$defs`` key, and the pointers
    of those applied in place (to the value the schema checks, not to a part of it)."""

    targets: dict[str, str] = field(default_factory=dict)
    in_place: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class _Target:
    schema: Any
    targets: Mapping[str, str]
    in_place: frozenset[str]


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
        self._targets: dict[str, _Target] = {}
        # Targets from which no in-place references lead back to themselves.
        self._loop_free: set[str] = set()
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
            reached = _Reached()
            converted = self._convert(schema, location, reached, "", in_place=True)
            pending = sorted(reached.targets.items())
            while pending:
                key, pointer = pending.pop()
                if key in defs:
                    continue
                target = self._target(pointer)
                self._refuse_loops(pointer)
                defs[key] = target.schema
                pending.extend(
                    sorted(item for item in target.targets.items() if item[0] not in defs)
                )
            return converted

    def _target(self, pointer: str) -> _Target:
        cached = self._targets.get(pointer)
        if cached is None:
            reached = _Reached()
            schema, _ = self._document.resolve(pointer, pointer)
            converted = self._convert(
                schema, pointer, reached, self._base_at(pointer), in_place=True
            )
            cached = _Target(converted, reached.targets, frozenset(reached.in_place))
            self._targets[pointer] = cached
        return cached

    def _refuse_loops(self, start: str) -> None:
        """Refuse in-place references that lead from ``start`` back to a target on the way.

        A depth-first walk over the in-place references; a target all of whose paths end
        is remembered, so each is walked once per document and process.
        """
        path = [start]
        walks = [iter(sorted(self._target(start).in_place))]
        while walks:
            following = next(walks[-1], None)
            if following is None:
                self._loop_free.add(path.pop())
                walks.pop()
            elif following in path:
                raise reference_loop([*path[path.index(following) :], following])
            elif following not in self._loop_free:
                path.append(following)
                walks.append(iter(sorted(self._target(following).in_place)))

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

    def _convert(
        self, schema: Any, location: str, reached: _Reached, base: str, *, in_place: bool
    ) -> Any:
        """``schema`` checked and rewritten; ``in_place`` tells whether it checks the value
        the schema at the top checks."""
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
                converted[keyword] = self._constraint(
                    keyword, value, here, reached, base, in_place=in_place
                )
            elif keyword in LEFT_OUT_KEYWORDS:
                # (A 3.0 document has none: its translation refused them.)
                _check_left_out(keyword, value, here, location)
            elif keyword in REFUSED_KEYWORDS:
                raise configuration_error(
                    "OPENAPI_SCHEMA_UNSUPPORTED",
                    f"The JSON Schema keyword {keyword!r} at {location} is not supported: "
                    f"{REFUSED_KEYWORDS[keyword]}. See the supported subset in the "
                    "fevex-openapi README.",
                    {"keyword": keyword, "location": location},
                )
            # Any other keyword is one no vocabulary of the dialect defines: JSON Schema
            # 2020-12 makes it an annotation, which constrains nothing, so it is left out.
        return nullable_schema(converted) if nullable else converted

    def _constraint(
        self, keyword: str, value: Any, here: str, reached: _Reached, base: str, *, in_place: bool
    ) -> Any:
        check = _VALUE_CHECKS.get(keyword)
        if check is not None:
            problem = check(value)
            if problem:
                raise _invalid(here, problem)
            return value
        if keyword == "$ref":
            return self._reference(value, here, reached, base, in_place=in_place)
        child_in_place = in_place and keyword in _IN_PLACE

        def convert(child: Subschema) -> Any:
            where = here if child.key is None else f"{here}/{escape_part(str(child.key))}"
            return self._convert(child.schema, where, reached, base, in_place=child_in_place)

        try:
            children = _SUBSCHEMAS.under(keyword, value)
        except SubschemaShapeError as error:
            raise _invalid(here, str(error)) from None
        return _SUBSCHEMAS.rebuilt(keyword, children, convert)

    def _reference(
        self, ref: Any, here: str, reached: _Reached, base: str, *, in_place: bool
    ) -> str:
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
        reached.targets[key] = pointer
        if in_place:
            reached.in_place.add(pointer)
        return _DEFS + escape_part(key)


_BUILDERS: weakref.WeakKeyDictionary[OpenApiDocument, SchemaBuilder] = weakref.WeakKeyDictionary()
_BUILDERS_LOCK = threading.Lock()


def _check_left_out(keyword: str, value: Any, here: str, location: str) -> None:
    if keyword == "$id" and not (isinstance(value, str) and value):
        raise _invalid(here, "$id must be a non-empty URI string")
    if keyword == "$anchor" and not (isinstance(value, str) and _ANCHOR.fullmatch(value)):
        raise _invalid(
            here, "$anchor must be a name: a letter or '_', then letters, digits, '-', '_' or '.'"
        )
    if keyword == "$schema" and value not in SCHEMA_DIALECTS:
        raise configuration_error(
            "OPENAPI_SCHEMA_UNSUPPORTED",
            f"The schema at {location} declares the dialect {str(value)[:120]!r} ($schema); "
            "only OpenAPI 3.1's default dialect (https://spec.openapis.org/oas/3.1/dialect/base) "
            "and JSON Schema 2020-12 are supported, since another dialect's keywords may mean "
            "something else.",
            {"keyword": "$schema", "location": location},
        )


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
