"""DeepSeek's strict tool subset, refused locally with the keyword and where it is.

The checker is fevex-openai's, the one every provider uses; DeepSeek's profile names
the subset.
"""

from typing import Any

import pytest
from pydantic import BaseModel, Field

from fevex.errors import FevexRunError
from fevex.messages import Message
from fevex.models import ModelInput, ToolSpec
from fevex_deepseek import DEEPSEEK_PROFILE
from fevex_openai import check_strict_schema


def check_strict_tool_schema(tool: str, schema: Any) -> None:
    check_strict_schema(schema, DEEPSEEK_PROFILE, tool=tool)


def _closed(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
        **extra,
    }


ACCEPTED = {
    "scalars with their documented keywords": _closed(
        {
            "email": {"type": "string", "format": "email", "description": "Where to write."},
            "zip": {"type": "string", "pattern": "^\\d{6}$"},
            "score": {"type": "integer", "minimum": 1, "maximum": 5},
            "ratio": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5},
            "flag": {"type": "boolean", "default": False},
            "status": {"type": "string", "enum": ["pending", "shipped"]},
        }
    ),
    "arrays, nesting and anyOf": _closed(
        {
            "tags": {"type": "array", "items": {"type": "string"}},
            "owner": _closed({"name": {"type": "string"}}),
            "contact": {
                "anyOf": [
                    {"type": "string", "format": "email"},
                    {"type": "string", "pattern": "^\\d{11}$"},
                ]
            },
        }
    ),
    "references into $defs, recursive ones too": _closed(
        {"root": {"$ref": "#/$defs/node"}},
        **{
            "$defs": {
                "node": _closed(
                    {
                        "name": {"type": "string"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                    }
                )
            }
        },
    ),
}


@pytest.mark.parametrize("schema", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_documented_schemas_are_accepted(schema: dict[str, Any]) -> None:
    check_strict_tool_schema("tool", schema)


REFUSED = {
    "root that is not an object": ({"type": "array", "items": {"type": "string"}}, "type", "#"),
    "open object": (
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
        "additionalProperties",
        "#",
    ),
    "optional property": (
        {
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "required": ["a"],
            "additionalProperties": False,
        },
        "required",
        "#",
    ),
    "minLength on a string": (
        _closed({"name": {"type": "string", "minLength": 1}}),
        "minLength",
        "#/properties/name",
    ),
    "maxItems on an array": (
        _closed({"tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}}),
        "maxItems",
        "#/properties/tags",
    ),
    "unsupported format": (
        _closed({"when": {"type": "string", "format": "date-time"}}),
        "format",
        "#/properties/when",
    ),
    "null type": (
        _closed({"x": {"anyOf": [{"type": "string"}, {"type": "null"}]}}),
        "type",
        "#/properties/x/anyOf/1",
    ),
    "type list": (_closed({"x": {"type": ["string", "integer"]}}), "type", "#/properties/x"),
    "allOf": (_closed({"x": {"allOf": [{"type": "string"}]}}), "allOf", "#/properties/x"),
    "untyped value": (_closed({"x": {}}), "type", "#/properties/x"),
    "map of values": (
        _closed({"labels": {"type": "object", "additionalProperties": {"type": "string"}}}),
        "additionalProperties",
        "#/properties/labels",
    ),
    "deep inside $defs": (
        _closed(
            {"item": {"$ref": "#/$defs/Item"}},
            **{"$defs": {"Item": _closed({"code": {"type": "string", "maxLength": 4}})}},
        ),
        "maxLength",
        "#/$defs/Item/properties/code",
    ),
    "remote reference": (
        _closed({"x": {"$ref": "https://example.com/schema.json"}}),
        "$ref",
        "#/properties/x",
    ),
    "key with a slash": (
        _closed({"a/b": {"type": "string", "minLength": 2}}),
        "minLength",
        "#/properties/a~1b",
    ),
}


@pytest.mark.parametrize(("schema", "keyword", "path"), REFUSED.values(), ids=REFUSED.keys())
def test_schemas_outside_the_subset_name_the_keyword_and_path(
    schema: dict[str, Any], keyword: str, path: str
) -> None:
    with pytest.raises(FevexRunError) as caught:
        check_strict_tool_schema("notes_add", schema)

    error = caught.value
    assert error.code == "PROVIDER_SCHEMA_UNSUPPORTED"
    assert (error.details["keyword"], error.details["path"]) == (keyword, path)
    assert error.details["tool"] == "notes_add"
    assert repr(keyword) in error.message
    assert path in error.message
    assert 'schema_policy="best-effort"' in error.message


def test_a_pydantic_model_with_only_required_fields_fits_the_subset() -> None:
    class Address(BaseModel):
        city: str
        zip_code: str = Field(pattern=r"^\d{5}$")

    class Customer(BaseModel):
        name: str
        age: int = Field(ge=0)
        addresses: list[Address]

    schema = Customer.model_json_schema()
    # pydantic leaves objects open; a strict-mode author closes them.
    schema["additionalProperties"] = False
    schema["$defs"]["Address"]["additionalProperties"] = False

    check_strict_tool_schema("customers_add", schema)


@pytest.mark.anyio
async def test_the_gateway_refuses_before_sending_anything(
    deepseek: Any, deepseek_server: Any, drain: Any
) -> None:
    tool = ToolSpec(
        "notes_add", "Add a note.", _closed({"text": {"type": "string", "minLength": 1}})
    )

    with pytest.raises(FevexRunError) as caught:
        await drain(deepseek(), ModelInput((Message.user("Note this"),), (tool,)))

    assert caught.value.code == "PROVIDER_SCHEMA_UNSUPPORTED"
    assert caught.value.details["keyword"] == "minLength"
    assert deepseek_server.requests == []
