"""Strict-mode subsets of JSON Schema, checked before a request is sent.

Strict mode (``strict: true`` on tools, and on OpenAI's JSON-schema output format) makes
the model follow the schema exactly, but providers accept only part of JSON Schema there.
One checker serves every provider; the :class:`~fevex_openai.StrictSubset` of its profile
(:mod:`fevex_openai.strict_subset`) says what a provider accepts. OpenAI's, from its
Structured Outputs guide:

- the root is an object, not ``anyOf``;
- every object sets ``additionalProperties: false`` and lists every property in
  ``required`` (an optional field is written as a union with ``null``);
- only these keywords: ``type``, ``title``, ``description``, ``enum``, ``const``,
  ``anyOf``, ``$ref`` (alone in its object, to ``#`` or into the document),
  ``$defs``/``definitions``, ``properties``, ``required``, ``additionalProperties``,
  ``items``, ``pattern``, ``format`` (from a fixed list), ``minimum``, ``maximum``,
  ``exclusiveMinimum``, ``exclusiveMaximum``, ``multipleOf``, ``minItems``, ``maxItems``.

Anything else fails with ``PROVIDER_SCHEMA_UNSUPPORTED`` naming the keyword and where it
is. Size limits (total properties, nesting depth, enum values) are left to the provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fevex.errors import FevexRunError
from fevex.schemas import JsonSchemaVisitor, Subschema, SubschemaShapeError
from fevex_openai.error_mapping import invalid_request
from fevex_openai.profile import ProviderProfile

__all__ = ["check_strict_schema"]


def check_strict_schema(schema: Any, profile: ProviderProfile, *, tool: str | None = None) -> None:
    """Raise ``PROVIDER_SCHEMA_UNSUPPORTED`` unless ``schema`` fits the profile's subset.

    ``tool`` names the tool whose input schema it is; without it, it is the output schema.
    """
    _Checker(schema, profile, tool).check_root()


def _pointer(path: tuple[str, ...]) -> str:
    escaped = (part.replace("~", "~0").replace("/", "~1") for part in path)
    return "#/" + "/".join(escaped) if path else "#"


class _Checker:
    def __init__(self, root: Any, profile: ProviderProfile, tool: str | None) -> None:
        self.root = root
        self.profile = profile
        self.subset = profile.strict_subset
        self.tool = tool
        self.where = f"the input schema of tool {tool!r}" if tool else "the output schema"
        # Each location is checked once, so recursive references terminate.
        self.checked: set[str] = set()
        # Strict mode accepts no other keyword that holds schemas.
        self.visitor = JsonSchemaVisitor(
            ("anyOf", "properties", "items"), definitions=self.subset.definitions
        )

    def fail(self, keyword: str, path: tuple[str, ...], reason: str) -> FevexRunError:
        pointer = _pointer(path)
        return invalid_request(
            self.profile.name,
            "PROVIDER_SCHEMA_UNSUPPORTED",
            f"{self.where[:1].upper()}{self.where[1:]} uses {keyword!r} at {pointer}: "
            f"{reason} {self.profile.label} strict mode does not accept it; change the "
            'schema, or use schema_policy="best-effort" to send it without strict '
            "adherence (fevex still validates it locally).",
            keyword=keyword,
            path=pointer,
            schema=self.where,
            tool=self.tool,
        )

    def check_root(self) -> None:
        root = self.root
        if not isinstance(root, Mapping):
            raise self.fail("type", (), "the schema is not a JSON object.")
        if "anyOf" in root:
            raise self.fail("anyOf", (), "the root schema cannot be a union.")
        if self.types(root, ()) != {"object"}:
            raise self.fail("type", (), 'the root schema must have "type": "object".')
        self.check(root, ())

    def types(self, node: Mapping[str, Any], path: tuple[str, ...]) -> set[str]:
        value = node.get("type")
        if value is None:
            return set()
        if isinstance(value, list) and not self.subset.type_lists:
            raise self.fail(
                "type", path, "a list of types is not supported; use anyOf with one type each."
            )
        listed = value if isinstance(value, list) else [value]
        known = self.subset.keywords
        if not listed or not all(isinstance(kind, str) and kind in known for kind in listed):
            raise self.fail(
                "type",
                path,
                f"type {value!r} is not supported (supported: {', '.join(sorted(known))}).",
            )
        return set(listed)

    def check(self, node: Any, path: tuple[str, ...]) -> None:
        self.checked.add(_pointer(path))
        subset = self.subset
        if not isinstance(node, Mapping):
            raise self.fail(
                "type", path, f"a schema must be a JSON object, not {type(node).__name__}."
            )
        if "$ref" in node:
            self.check_ref(node, path)
            return
        types = self.types(node, path)
        allowed = set(subset.annotations | subset.definitions)
        if types:
            allowed.add("type")
            for kind in types:
                allowed |= subset.keywords[kind]
        else:
            allowed |= subset.untyped_keywords
        for keyword in node:
            if keyword not in allowed:
                what = f"type {'/'.join(sorted(types))!r}" if types else "a schema without a type"
                raise self.fail(keyword, path, f"this keyword is not supported on {what}.")
        if not types and not subset.type_stand_ins & set(node):
            stand_ins = ", ".join(sorted(subset.type_stand_ins))
            raise self.fail("type", path, f"every schema needs a type (or {stand_ins}, or $ref).")
        for keyword in sorted(subset.definitions & set(node)):
            self.check_each(self.subschemas(keyword, node[keyword], path), path)
        if "anyOf" in node:
            self.check_each(self.subschemas("anyOf", node["anyOf"], path), path)
        if "enum" in node and not (isinstance(node["enum"], list) and node["enum"]):
            raise self.fail("enum", path, "enum must be a non-empty list.")
        if "object" in types or "properties" in node:
            self.check_object(node, path)
        if "array" in types or "items" in node:
            if "items" not in node:
                raise self.fail("items", path, "an array must say what its items are.")
            self.check_each(self.subschemas("items", node["items"], path), path)
        fmt = node.get("format")
        if fmt is not None and fmt not in subset.formats:
            raise self.fail(
                "format",
                path,
                f"format {fmt!r} is not one of {', '.join(sorted(subset.formats))}.",
            )

    def check_object(self, node: Mapping[str, Any], path: tuple[str, ...]) -> None:
        if node.get("additionalProperties", True) is not False:
            raise self.fail(
                "additionalProperties",
                path,
                "every object must set additionalProperties to false (with pydantic: "
                "model_config = ConfigDict(extra='forbid')).",
            )
        properties = self.subschemas("properties", node.get("properties", {}), path)
        names = [child.key for child in properties]
        required = node.get("required", [])
        if not isinstance(required, list):
            raise self.fail("required", path, "required must be a list of property names.")
        missing = [name for name in names if name not in required]
        if missing:
            raise self.fail(
                "required",
                path,
                f"every property must be required, but {', '.join(map(repr, missing))} "
                "is not (make it nullable instead of optional, without a default).",
            )
        unknown = [name for name in required if name not in names]
        if unknown:
            raise self.fail(
                "required", path, f"required names {', '.join(map(repr, unknown))}, not defined."
            )
        self.check_each(properties, path)

    def subschemas(self, keyword: str, value: Any, path: tuple[str, ...]) -> list[Subschema]:
        try:
            return self.visitor.under(keyword, value)
        except SubschemaShapeError as error:
            if error.shape == "array":
                problem = f"{keyword} must be a non-empty list of schemas."
            else:
                what = "definitions" if keyword in self.subset.definitions else keyword
                problem = f"{what} must be a JSON object."
            raise self.fail(keyword, path, problem) from None

    def check_each(self, children: list[Subschema], path: tuple[str, ...]) -> None:
        for child in children:
            self.check(child.schema, (*path, *(str(step) for step in child.steps)))

    def check_ref(self, node: Mapping[str, Any], path: tuple[str, ...]) -> None:
        siblings = sorted(key for key in node if key != "$ref")
        if siblings and self.subset.ref_alone:
            raise self.fail(
                "$ref",
                path,
                f"$ref cannot stand beside other keywords ({', '.join(siblings)}).",
            )
        for keyword in siblings:
            if keyword not in self.subset.annotations:
                raise self.fail(keyword, path, "this keyword is not supported beside a $ref.")
        ref = node["$ref"]
        if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
            raise self.fail("$ref", path, f"only references inside the schema, not {ref!r}.")
        target_path = (
            tuple(part.replace("~1", "/").replace("~0", "~") for part in ref[2:].split("/"))
            if ref != "#"
            else ()
        )
        if (
            self.subset.refs_into_definitions_only
            and target_path
            and not (len(target_path) == 2 and target_path[0] in self.subset.definitions)
        ):
            raise self.fail(
                "$ref", path, f"only references to # or into the definitions, not {ref!r}."
            )
        target: Any = self.root
        for key in target_path:
            if not isinstance(target, Mapping) or key not in target:
                raise self.fail("$ref", path, f"{ref!r} points to nothing in the schema.")
            target = target[key]
        if _pointer(target_path) not in self.checked:
            self.check(target, target_path)
