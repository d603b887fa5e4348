"""Where the subschemas of a JSON Schema document live, for every walker of one in fevex.

A keyword that holds subschemas holds them in one of three shapes: one schema (``items``,
``not``, ``if``...), a non-empty array of schemas (``anyOf``, ``prefixItems``...) or an
object of named schemas (``properties``, ``$defs``...). :data:`SUBSCHEMA_KEYWORDS` is that
map for JSON Schema 2020-12. A :class:`JsonSchemaVisitor` follows some of those keywords:
it finds the subschemas under them, each with the steps of its JSON Pointer, and makes a
keyword's value anew from converted subschemas, in the same shape. What a walker does at each
schema, and in which order it goes, stays the walker's own: the core's engine checks every
subschema of a document it compiles, a provider's strict mode (fevex-openai) checks the few
keywords it accepts, and fevex-openapi converts the subset of an OpenAPI document.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

__all__ = [
    "JsonSchemaVisitor",
    "Subschema",
    "SubschemaShape",
    "SubschemaShapeError",
]

SubschemaShape = Literal["schema", "array", "object"]

#: The keywords of JSON Schema 2020-12 that hold subschemas (with ``definitions``, which
#: its metaschema keeps for older documents), and the shape each holds them in.
SUBSCHEMA_KEYWORDS: Mapping[str, SubschemaShape] = MappingProxyType(
    {
        **dict.fromkeys(
            (
                *("items", "contains", "additionalProperties", "propertyNames", "not", "if"),
                *("then", "else", "unevaluatedItems", "unevaluatedProperties", "contentSchema"),
            ),
            "schema",
        ),
        **dict.fromkeys(("allOf", "anyOf", "oneOf", "prefixItems"), "array"),
        **dict.fromkeys(
            ("$defs", "definitions", "properties", "patternProperties", "dependentSchemas"),
            "object",
        ),
    }
)


@dataclass(frozen=True, slots=True)
class Subschema:
    """One subschema: the keyword it is under, its name or index there (``None`` under a
    keyword that holds one schema), and the schema itself, as the document has it."""

    keyword: str
    key: str | int | None
    schema: Any

    @property
    def steps(self) -> tuple[str | int, ...]:
        """The steps from the schema that holds it: its JSON Pointer's last parts."""
        return (self.keyword,) if self.key is None else (self.keyword, self.key)


class SubschemaShapeError(ValueError):
    """A keyword's value is not the shape its subschemas come in: ``shape`` says which
    shape it must be (an ``"array"`` must also not be empty). Each walker words the
    problem in its own error."""

    def __init__(self, keyword: str, shape: SubschemaShape) -> None:
        wanted = {"schema": "a schema", "array": "a non-empty array", "object": "an object"}
        super().__init__(f"{keyword} must be {wanted[shape]} of schemas")
        self.keyword = keyword
        self.shape = shape


class JsonSchemaVisitor:
    """Follows ``keywords`` (every keyword of :data:`SUBSCHEMA_KEYWORDS` when not given), in
    that order, and ``definitions``: further keywords that hold an object of reusable
    schemas, for a provider that names them its own way."""

    __slots__ = ("shapes",)

    def __init__(
        self, keywords: Iterable[str] = SUBSCHEMA_KEYWORDS, *, definitions: Iterable[str] = ()
    ) -> None:
        shapes: dict[str, SubschemaShape] = {}
        for keyword in keywords:
            shape = SUBSCHEMA_KEYWORDS.get(keyword)
            if shape is None:
                raise ValueError(f"{keyword!r} is not a JSON Schema keyword that holds schemas")
            shapes[keyword] = shape
        shapes.update(dict.fromkeys(definitions, "object"))
        self.shapes: Mapping[str, SubschemaShape] = MappingProxyType(shapes)

    def follows(self, keyword: str) -> bool:
        return keyword in self.shapes

    def subschemas(self, schema: Mapping[str, Any]) -> Iterator[Subschema]:
        """Every subschema of ``schema`` under the keywords followed, keyword by keyword.

        A value of the wrong shape holds no subschemas here; a walker that must refuse it
        asks :meth:`under`.
        """
        for keyword, shape in self.shapes.items():
            if keyword not in schema:
                continue
            value = schema[keyword]
            if shape == "schema":
                yield Subschema(keyword, None, value)
            elif shape == "array" and isinstance(value, list):
                for index, child in enumerate(value):
                    yield Subschema(keyword, index, child)
            elif shape == "object" and isinstance(value, Mapping):
                for name, child in value.items():
                    yield Subschema(keyword, name, child)

    def under(self, keyword: str, value: Any) -> list[Subschema]:
        """The subschemas ``value`` holds as the value of ``keyword`` (a keyword followed);
        :class:`SubschemaShapeError` when it is not their shape."""
        shape = self.shapes[keyword]
        if shape == "schema":
            return [Subschema(keyword, None, value)]
        if shape == "array":
            if not isinstance(value, list) or not value:
                raise SubschemaShapeError(keyword, shape)
            return [Subschema(keyword, index, child) for index, child in enumerate(value)]
        if not isinstance(value, Mapping):
            raise SubschemaShapeError(keyword, shape)
        return [Subschema(keyword, name, child) for name, child in value.items()]

    def rebuilt(
        self, keyword: str, children: list[Subschema], convert: Callable[[Subschema], Any]
    ) -> Any:
        """The value of ``keyword`` made anew from ``children`` (what :meth:`under` found),
        each replaced by what ``convert`` makes of it, in the document's order and shape."""
        shape = self.shapes[keyword]
        if shape == "schema":
            return convert(children[0])
        if shape == "array":
            return [convert(child) for child in children]
        return {child.key: convert(child) for child in children}
