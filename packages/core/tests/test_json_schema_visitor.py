"""The one map of where subschemas live, held against JSON Schema 2020-12's own metaschema,
and the one digest of a JSON value."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from fevex.schemas import JsonSchemaVisitor, Subschema, SubschemaShapeError, json_digest
from fevex.schemas.json_schema_visitor import SUBSCHEMA_KEYWORDS

_METASCHEMAS = (
    "https://json-schema.org/draft/2020-12/schema",
    *(
        f"https://json-schema.org/draft/2020-12/meta/{vocabulary}"
        for vocabulary in ("core", "applicator", "unevaluated", "content", "validation")
    ),
)
_ANY_SCHEMA = {"$dynamicRef": "#meta"}


def _shape_in_metaschema(definition: Any) -> str | None:
    if not isinstance(definition, dict):
        return None
    if definition == _ANY_SCHEMA:
        return "schema"
    if definition.get("$ref") == "#/$defs/schemaArray":
        return "array"
    if definition.get("type") == "object" and definition.get("additionalProperties") == _ANY_SCHEMA:
        return "object"
    return None


def test_the_visitor_knows_every_keyword_the_2020_12_metaschema_gives_subschemas() -> None:
    from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped]

    found: dict[str, str] = {}
    for uri in _METASCHEMAS:
        for keyword, definition in REGISTRY.contents(uri).get("properties", {}).items():
            shape = _shape_in_metaschema(definition)
            if shape is not None:
                found[keyword] = shape
    assert found == dict(SUBSCHEMA_KEYWORDS)


def test_subschemas_come_keyword_by_keyword_with_their_steps() -> None:
    schema = {
        "properties": {"b": {"type": "string"}, "a": True},
        "anyOf": [{"minimum": 1}, {"maximum": 2}],
        "items": {"type": "integer"},
        "title": "not a subschema",
        "$defs": "the wrong shape holds none",
    }
    found = [(child.steps, child.schema) for child in JsonSchemaVisitor().subschemas(schema)]
    assert found == [
        (("items",), {"type": "integer"}),
        (("anyOf", 0), {"minimum": 1}),
        (("anyOf", 1), {"maximum": 2}),
        (("properties", "b"), {"type": "string"}),
        (("properties", "a"), True),
    ]
    only = JsonSchemaVisitor(("properties",))
    assert [child.key for child in only.subschemas(schema)] == ["b", "a"]
    assert only.follows("properties")
    assert not only.follows("items")


def test_under_refuses_a_value_of_the_wrong_shape() -> None:
    visitor = JsonSchemaVisitor(definitions=("$def",))
    assert visitor.under("not", False) == [Subschema("not", None, False)]
    assert visitor.under("$def", {"a": {}}) == [Subschema("$def", "a", {})]
    for keyword, value, shape in (
        ("anyOf", [], "array"),
        ("allOf", {"a": {}}, "array"),
        ("properties", [{}], "object"),
        ("$def", "text", "object"),
    ):
        with pytest.raises(SubschemaShapeError) as refused:
            visitor.under(keyword, value)
        assert (refused.value.keyword, refused.value.shape) == (keyword, shape)
    with pytest.raises(ValueError, match="holds schemas"):
        JsonSchemaVisitor(("required",))


def test_rebuilt_keeps_the_shape_and_the_order() -> None:
    visitor = JsonSchemaVisitor()

    def named(child: Subschema) -> Any:
        return "/".join(map(str, child.steps))

    for keyword, value, expected in (
        ("items", {}, "items"),
        ("oneOf", [{}, {}], ["oneOf/0", "oneOf/1"]),
        ("$defs", {"z": {}, "a": {}}, {"z": "$defs/z", "a": "$defs/a"}),
    ):
        rebuilt = visitor.rebuilt(keyword, visitor.under(keyword, value), named)
        assert rebuilt == expected
        assert json.dumps(rebuilt) == json.dumps(expected)


def test_the_digest_hashes_the_compact_sorted_text_of_the_value_as_given() -> None:
    value = {"b": [1, 2.5, None], "a": "naïve ☃"}
    text = '{"a":"naïve ☃","b":[1,2.5,null]}'
    assert json_digest(value) == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    assert json_digest({"a": "naïve ☃", "b": [1, 2.5, None]}) == json_digest(value)
    assert json_digest(-0.0) != json_digest(0.0)
    assert json_digest("\ud800") == "sha256:" + hashlib.sha256(b'"\\ud800"').hexdigest()
    for refused in (float("nan"), float("inf"), {"a": object()}):
        with pytest.raises(TypeError):
            json_digest(refused)


def test_a_model_schema_closes_its_objects_and_leaves_its_data_alone() -> None:
    from pydantic import BaseModel

    from fevex.schemas.schema import compile_schema

    class Child(BaseModel):
        name: str

    class Settings(BaseModel):
        properties: dict[str, int]
        preset: dict[str, Any] = {"properties": {"a": 1}}
        children: list[Child] = []

    schema = compile_schema(Settings).json_schema()
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["Child"]["additionalProperties"] is False
    # Before the visitor, the walk closed the map of properties too, and the default.
    assert set(schema["properties"]) == {"properties", "preset", "children"}
    assert schema["properties"]["preset"]["default"] == {"properties": {"a": 1}}
