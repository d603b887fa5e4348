"""OpenAI's Structured Outputs subset of JSON Schema, checked before a request is sent.

Strict mode (``strict: true`` on tools and on the JSON-schema output format) makes the
model follow the schema exactly, but OpenAI accepts only part of JSON Schema there. The
rules come from OpenAI's Structured Outputs guide:

- the root is an object, not ``anyOf``;
- every object sets ``additionalProperties: false`` and lists every property in
  ``required`` (an optional field is written as a union with ``null``);
- only these keywords: ``type``, ``title``, ``description``, ``enum``, ``const``,
  ``anyOf``, ``$ref`` (alone in its object, to ``#`` or into the document),
  ``$defs``/``definitions``, ``properties``, ``required``, ``additionalProperties``,
  ``items``, ``pattern``, ``format`` (from a fixed list), ``minimum``, ``maximum``,
  ``exclusiveMinimum``, ``exclusiveMaximum``, ``multipleOf``, ``minItems``, ``maxItems``.

Anything else (``default``, ``allOf``, ``oneOf``, ``not``, ``if``/``then``/``else``,
``patternProperties``, ``minContains``, ``minLength``, ``uniqueItems``, ...) fails with
``PROVIDER_SCHEMA_UNSUPPORTED`` naming the keyword and where it is. Size limits (total
properties, nesting depth, enum values) are left to the provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fevex.errors import FevexRunError
from fevex_openai.error_mapping import invalid_request

__all__ = ["SUPPORTED_FORMATS", "SUPPORTED_KEYWORDS", "check_strict_schema"]

SUPPORTED_KEYWORDS = frozenset(
    {
        "type",
        "title",
        "description",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "$defs",
        "definitions",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)
SUPPORTED_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})


def check_strict_schema(schema: Any, where: str) -> None:
    """Raise ``PROVIDER_SCHEMA_UNSUPPORTED`` unless ``schema`` fits OpenAI strict mode.

    ``where`` names the schema in the message, for example ``"the input schema of tool
    'accounts_get'"``.
    """
    _Checker(schema, where).check_root()


def _pointer(path: tuple[str, ...]) -> str:
    escaped = (part.replace("~", "~0").replace("/", "~1") for part in path)
    return "#/" + "/".join(escaped) if path else "#"


class _Checker:
    def __init__(self, root: Any, where: str) -> None:
        self.root = root
        self.where = where

    def fail(self, keyword: str, path: tuple[str, ...], reason: str) -> FevexRunError:
        pointer = _pointer(path)
        return invalid_request(
            "PROVIDER_SCHEMA_UNSUPPORTED",
            f"{self.where[:1].upper()}{self.where[1:]} uses {keyword!r} at {pointer}: "
            f"{reason} OpenAI strict mode does not accept it; change the schema or use "
            "schema_policy='best-effort'.",
            keyword=keyword,
            path=pointer,
            schema=self.where,
        )

    def check_root(self) -> None:
        root = self.root
        if not isinstance(root, Mapping):
            raise self.fail("type", (), "the schema is not a JSON object.")
        if "anyOf" in root:
            raise self.fail("anyOf", (), "the root schema cannot be a union.")
        if _types(root.get("type")) != {"object"}:
            raise self.fail("type", (), 'the root schema must have "type": "object".')
        self.check(root, ())

    def check(self, node: Any, path: tuple[str, ...]) -> None:
        if not isinstance(node, Mapping):
            raise self.fail(
                "type", path, f"a schema must be a JSON object, not {type(node).__name__}."
            )
        for keyword in node:
            if keyword not in SUPPORTED_KEYWORDS:
                raise self.fail(keyword, path, "this keyword is not in the supported subset.")
        if "$ref" in node:
            self.check_ref(node, path)
            return
        for defs_keyword in ("$defs", "definitions"):
            if defs_keyword in node:
                defs = node[defs_keyword]
                if not isinstance(defs, Mapping):
                    raise self.fail(defs_keyword, path, "definitions must be a JSON object.")
                for name, definition in defs.items():
                    self.check(definition, (*path, defs_keyword, str(name)))
        if "anyOf" in node:
            variants = node["anyOf"]
            if not isinstance(variants, list) or not variants:
                raise self.fail("anyOf", path, "anyOf must be a non-empty list of schemas.")
            for index, variant in enumerate(variants):
                self.check(variant, (*path, "anyOf", str(index)))
        elif "type" not in node:
            raise self.fail("type", path, "every schema needs a type (or anyOf, or $ref).")
        types = _types(node.get("type"))
        if types is None:
            raise self.fail("type", path, f"unknown type {node.get('type')!r}.")
        if "object" in types or "properties" in node:
            self.check_object(node, path)
        if "array" in types or "items" in node:
            self.check_array(node, path)
        fmt = node.get("format")
        if fmt is not None and fmt not in SUPPORTED_FORMATS:
            raise self.fail(
                "format",
                path,
                f"format {fmt!r} is not one of {', '.join(sorted(SUPPORTED_FORMATS))}.",
            )

    def check_object(self, node: Mapping[str, Any], path: tuple[str, ...]) -> None:
        if node.get("additionalProperties", True) is not False:
            raise self.fail(
                "additionalProperties",
                path,
                "every object must set additionalProperties to false (with pydantic: "
                "model_config = ConfigDict(extra='forbid')).",
            )
        properties = node.get("properties", {})
        if not isinstance(properties, Mapping):
            raise self.fail("properties", path, "properties must be a JSON object.")
        required = node.get("required", [])
        if not isinstance(required, list):
            raise self.fail("required", path, "required must be a list of property names.")
        missing = [name for name in properties if name not in required]
        if missing:
            raise self.fail(
                "required",
                path,
                f"every property must be required, but {', '.join(map(repr, missing))} "
                "is not (make it nullable instead of optional, without a default).",
            )
        unknown = [name for name in required if name not in properties]
        if unknown:
            raise self.fail(
                "required", path, f"required names {', '.join(map(repr, unknown))}, not defined."
            )
        for name, prop in properties.items():
            self.check(prop, (*path, "properties", str(name)))

    def check_array(self, node: Mapping[str, Any], path: tuple[str, ...]) -> None:
        if "items" not in node:
            raise self.fail("items", path, "an array must say what its items are.")
        self.check(node["items"], (*path, "items"))

    def check_ref(self, node: Mapping[str, Any], path: tuple[str, ...]) -> None:
        siblings = sorted(key for key in node if key != "$ref")
        if siblings:
            raise self.fail(
                "$ref",
                path,
                f"$ref cannot stand beside other keywords ({', '.join(siblings)}).",
            )
        ref = node["$ref"]
        if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
            raise self.fail("$ref", path, f"only references inside the schema, not {ref!r}.")
        target: Any = self.root
        for part in ref[2:].split("/") if ref != "#" else ():
            key = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, Mapping) or key not in target:
                raise self.fail("$ref", path, f"{ref!r} points to nothing in the schema.")
            target = target[key]


def _types(value: Any) -> set[str] | None:
    if isinstance(value, str):
        return {value} if value in _TYPES else None
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        types = set(value)
        return types if types <= _TYPES else None
    if value is None:
        return set()
    return None
