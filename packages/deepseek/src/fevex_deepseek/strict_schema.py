"""DeepSeek's strict function-calling subset of JSON Schema, checked before any request.

DeepSeek documents strict mode (beta) as supporting the types ``object``, ``string``,
``number``, ``integer``, ``boolean`` and ``array``, plus ``enum``, ``anyOf`` and local
``$ref`` into ``$defs``. Every object lists all of its properties in ``required`` and sets
``additionalProperties`` to ``false``; strings take ``pattern`` and a few ``format``
values (not ``minLength``/``maxLength``); numbers take ``const``, ``minimum``, ``maximum``,
the exclusive bounds and ``multipleOf``; arrays take ``items`` (not ``minItems``/
``maxItems``). Anything outside that list is refused here, naming the keyword and where
it is, rather than by the provider after a round trip.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fevex.errors import FevexRunError
from fevex_deepseek.errors import PROVIDER_SCHEMA_UNSUPPORTED, provider_error

__all__ = ["STRING_FORMATS", "StrictSchemaError", "check_strict_tool_schema"]

STRING_FORMATS = frozenset({"email", "hostname", "ipv4", "ipv6", "uuid"})

# Keywords that describe a schema without constraining it; accepted anywhere.
_ANNOTATIONS = frozenset({"description", "title", "default", "$comment"})
_DEFINITIONS = ("$defs", "$def")
_KEYWORDS_BY_TYPE: dict[str, frozenset[str]] = {
    "object": frozenset({"type", "properties", "required", "additionalProperties", *_DEFINITIONS}),
    "string": frozenset({"type", "pattern", "format", "enum"}),
    "number": frozenset(
        {
            "type",
            "const",
            "enum",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "multipleOf",
        }
    ),
    "boolean": frozenset({"type", "enum"}),
    "array": frozenset({"type", "items"}),
}
_KEYWORDS_BY_TYPE["integer"] = _KEYWORDS_BY_TYPE["number"]
_SUPPORTED_TYPES = ", ".join(sorted(_KEYWORDS_BY_TYPE))


class StrictSchemaError(Exception):
    """One place where a schema leaves the strict subset."""

    def __init__(self, keyword: str, path: str, reason: str) -> None:
        super().__init__(f"{keyword!r} at {path}: {reason}")
        self.keyword = keyword
        self.path = path
        self.reason = reason


def check_strict_tool_schema(tool_name: str, schema: Mapping[str, Any]) -> None:
    """Raise ``PROVIDER_SCHEMA_UNSUPPORTED`` unless ``schema`` is in the strict subset."""
    try:
        _Checker(schema).check_root()
    except StrictSchemaError as problem:
        raise _unsupported(tool_name, problem) from None


def _unsupported(tool_name: str, problem: StrictSchemaError) -> FevexRunError:
    return provider_error(
        PROVIDER_SCHEMA_UNSUPPORTED,
        f"The input schema of tool {tool_name!r} is outside DeepSeek's strict tool subset: "
        f"{problem.keyword!r} at {problem.path} - {problem.reason}. Change the schema, or "
        'create the model with schema_policy="best-effort" to send it without the '
        "provider's guarantee (fevex still validates tool input locally).",
        category="validation",
        tool=tool_name,
        keyword=problem.keyword,
        path=problem.path,
    )


def _pointer(path: str, *tokens: str) -> str:
    escaped = (token.replace("~", "~0").replace("/", "~1") for token in tokens)
    return "/".join((path, *escaped))


class _Checker:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        # Each reference target is checked once, so recursive structures terminate.
        self.checked_refs: set[str] = {"#"}

    def check_root(self) -> None:
        root = self.root
        if not isinstance(root, Mapping):
            raise StrictSchemaError("type", "#", "the input schema must be a JSON object")
        if root.get("type") != "object":
            raise StrictSchemaError(
                "type", "#", 'the root of a tool input schema must have "type": "object"'
            )
        for keyword in _DEFINITIONS:
            definitions = root.get(keyword)
            if definitions is None:
                continue
            if not isinstance(definitions, Mapping):
                raise StrictSchemaError(keyword, "#", "definitions must be an object of schemas")
            for name, definition in definitions.items():
                pointer = _pointer("#", keyword, name)
                self.checked_refs.add(pointer)
                self.check(definition, pointer)
        self.check({k: v for k, v in root.items() if k != "$schema"}, "#")

    def check(self, node: Any, path: str) -> None:
        if not isinstance(node, Mapping):
            raise StrictSchemaError(
                "type", path, "boolean and non-object schemas are not supported"
            )
        if "$ref" in node:
            self._check_ref(node, path)
        elif "anyOf" in node:
            self._check_any_of(node, path)
        elif "type" in node:
            self._check_typed(node, path)
        elif "enum" in node:
            self._only(node, path, frozenset({"enum"}), "an enum")
            self._check_enum(node["enum"], path)
        else:
            for keyword in node:
                if keyword not in _ANNOTATIONS:
                    raise StrictSchemaError(keyword, path, "not supported in strict mode")
            raise StrictSchemaError(
                "type",
                path,
                f"every schema needs a type ({_SUPPORTED_TYPES}), an enum, anyOf or $ref",
            )

    def _only(self, node: Mapping[str, Any], path: str, allowed: frozenset[str], what: str) -> None:
        for keyword in node:
            if keyword not in allowed and keyword not in _ANNOTATIONS:
                raise StrictSchemaError(keyword, path, f"not supported on {what} in strict mode")

    def _check_ref(self, node: Mapping[str, Any], path: str) -> None:
        self._only(node, path, frozenset({"$ref"}), "a $ref")
        reference = node["$ref"]
        target = self._resolve(reference, path)
        if reference not in self.checked_refs:
            self.checked_refs.add(reference)
            self.check(target, reference)

    def _resolve(self, reference: Any, path: str) -> Any:
        if not isinstance(reference, str):
            raise StrictSchemaError("$ref", path, "a reference must be a string")
        if reference == "#":
            return self.root
        for keyword in _DEFINITIONS:
            prefix = f"#/{keyword}/"
            if reference.startswith(prefix):
                name = reference[len(prefix) :].replace("~1", "/").replace("~0", "~")
                definitions = self.root.get(keyword)
                if isinstance(definitions, Mapping) and name in definitions:
                    return definitions[name]
                raise StrictSchemaError("$ref", path, f"{reference} does not resolve")
        raise StrictSchemaError(
            "$ref", path, "only local references into $defs are supported in strict mode"
        )

    def _check_any_of(self, node: Mapping[str, Any], path: str) -> None:
        self._only(node, path, frozenset({"anyOf"}), "an anyOf")
        options = node["anyOf"]
        if not isinstance(options, list) or not options:
            raise StrictSchemaError("anyOf", path, "anyOf must be a non-empty list of schemas")
        for index, option in enumerate(options):
            self.check(option, _pointer(path, "anyOf", str(index)))

    def _check_typed(self, node: Mapping[str, Any], path: str) -> None:
        kind = node["type"]
        if isinstance(kind, list):
            raise StrictSchemaError(
                "type", path, "a list of types is not supported; use anyOf with one type each"
            )
        if kind not in _KEYWORDS_BY_TYPE:
            raise StrictSchemaError(
                "type", path, f"type {kind!r} is not supported (supported: {_SUPPORTED_TYPES})"
            )
        self._only(node, path, _KEYWORDS_BY_TYPE[kind], f"type {kind!r}")
        if "enum" in node:
            self._check_enum(node["enum"], path)
        if kind == "object":
            self._check_object(node, path)
        elif kind == "array":
            if "items" not in node:
                raise StrictSchemaError("items", path, "an array must declare its items schema")
            self.check(node["items"], _pointer(path, "items"))
        elif kind == "string" and "format" in node and node["format"] not in STRING_FORMATS:
            raise StrictSchemaError(
                "format",
                path,
                f"format {node['format']!r} is not supported "
                f"(supported: {', '.join(sorted(STRING_FORMATS))})",
            )

    def _check_object(self, node: Mapping[str, Any], path: str) -> None:
        if node.get("additionalProperties") is not False:
            raise StrictSchemaError(
                "additionalProperties",
                path,
                "every object must set additionalProperties to false (for a pydantic model: "
                'model_config = ConfigDict(extra="forbid"))',
            )
        properties = node.get("properties", {})
        if not isinstance(properties, Mapping):
            raise StrictSchemaError("properties", path, "properties must be an object of schemas")
        required = node.get("required", [])
        if not isinstance(required, list):
            raise StrictSchemaError("required", path, "required must be a list of names")
        missing = [name for name in properties if name not in required]
        if missing:
            raise StrictSchemaError(
                "required",
                path,
                f"every property must be required in strict mode; not required: {missing}",
            )
        unknown = [name for name in required if name not in properties]
        if unknown:
            raise StrictSchemaError(
                "required", path, f"required names unknown properties: {unknown}"
            )
        for name, schema in properties.items():
            self.check(schema, _pointer(path, "properties", name))

    def _check_enum(self, values: Any, path: str) -> None:
        if not isinstance(values, list) or not values:
            raise StrictSchemaError("enum", path, "enum must be a non-empty list")
