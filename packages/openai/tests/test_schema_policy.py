"""strict: schemas are checked against OpenAI's subset before any request is sent;
best-effort: they are forwarded as they are."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

import pytest
from openai_loopback import ChatChunks, LoopbackServer, ResponseEvents
from pydantic import BaseModel, ConfigDict, Field

from fevex import ToolContext, define_tool
from fevex.errors import FevexRunError
from fevex.messages import Message
from fevex.models import ModelInput, ToolSpec
from fevex_openai import OpenAIModel

pytestmark = pytest.mark.anyio


def obj(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
        **extra,
    }


class Address(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str
    zip_code: str | None


class Customer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    tags: list[str]
    address: Address
    kind: str


SUPPORTED = {
    "a pydantic model with extra='forbid'": Customer.model_json_schema(),
    "nullable, enum, const, formats and bounds": obj(
        {
            "when": {"type": "string", "format": "date-time"},
            "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
            "size": {"type": ["integer", "null"], "minimum": 1, "exclusiveMaximum": 10},
            "ratio": {"type": "number", "multipleOf": 0.5},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "fixed": {"type": "string", "const": "x"},
            "items": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
        },
        title="Everything",
        description="Supported keywords.",
    ),
    "a recursive definition": obj(
        {"root": {"$ref": "#/$defs/node"}},
        **{
            "$defs": {
                "node": obj(
                    {
                        "value": {"type": "string"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                    }
                )
            }
        },
    ),
    "recursion to the root and anyOf": obj({"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}),
}


def find_orders(
    customer_id: int,
    status: Annotated[Literal["open", "closed"], Field(description="Orders in this state.")],
    tags: list[str] | None,
    context: ToolContext,
) -> list[int]:
    """Find a customer's orders.

    Args:
        customer_id: The customer's number.
    """
    return []


# A plain function's parameters, as define_tool offers them to the model.
SUPPORTED["a plain function's parameters"] = define_tool(
    find_orders
).input_schema.model_json_schema()


class WithDefault(BaseModel):
    model_config = ConfigDict(extra="forbid")
    limit: int = 10


class Open(BaseModel):
    name: str


UNSUPPORTED: dict[str, tuple[Any, str, str]] = {
    "patternProperties": (
        obj({"m": {"type": "object", "patternProperties": {"^x": {"type": "string"}}}}),
        "patternProperties",
        "#/properties/m",
    ),
    "if/then/else": (
        obj({"a": {"type": "string"}}, **{"if": {"required": ["a"]}, "then": {}}),
        "if",
        "#",
    ),
    "minContains": (
        obj({"l": {"type": "array", "items": {"type": "string"}, "minContains": 1}}),
        "minContains",
        "#/properties/l",
    ),
    "allOf": (obj({"a": {"allOf": [{"type": "string"}]}}), "allOf", "#/properties/a"),
    "a pydantic default": (WithDefault.model_json_schema(), "required", "#"),
    "an object open to more properties": (Open.model_json_schema(), "additionalProperties", "#"),
    "a nested open object": (
        obj({"inner": {"type": "object", "properties": {}}}),
        "additionalProperties",
        "#/properties/inner",
    ),
    "an optional property": (
        {**obj({"a": {"type": "string"}, "b": {"type": "string"}}), "required": ["a"]},
        "required",
        "#",
    ),
    "a default value": (
        obj({"a": {"type": "string", "default": "x"}}),
        "default",
        "#/properties/a",
    ),
    "a root union": ({"anyOf": [obj({}), obj({"a": {"type": "string"}})]}, "anyOf", "#"),
    "a root that is not an object": ({"type": "array", "items": {"type": "string"}}, "type", "#"),
    "$ref beside a description": (
        obj({"a": {"$ref": "#/$defs/x", "description": "d"}}, **{"$defs": {"x": obj({})}}),
        "$ref",
        "#/properties/a",
    ),
    "a dangling $ref": (obj({"a": {"$ref": "#/$defs/missing"}}), "$ref", "#/properties/a"),
    "an unsupported format": (
        obj({"u": {"type": "string", "format": "uri"}}),
        "format",
        "#/properties/u",
    ),
    "a schema without a type": (obj({"a": {}}), "type", "#/properties/a"),
    "an array without items": (obj({"l": {"type": "array"}}), "items", "#/properties/l"),
    "minLength": (
        obj({"s": {"type": "string", "minLength": 2}}),
        "minLength",
        "#/properties/s",
    ),
}


def tool(schema: dict[str, Any]) -> ToolSpec:
    return ToolSpec("lookup", "Look something up.", schema)


@pytest.mark.parametrize("api", ["responses", "chat"])
@pytest.mark.parametrize("schema", SUPPORTED.values(), ids=SUPPORTED.keys())
async def test_supported_schemas_are_sent_strict(
    server: LoopbackServer,
    make_model: Callable[..., OpenAIModel],
    api: str,
    schema: dict[str, Any],
) -> None:
    body = (
        ResponseEvents().message("{}").completed()
        if api == "responses"
        else ChatChunks().content("{}").finish()
    )
    server.respond(body.scripted())
    model_input = ModelInput((Message.user("Hi"),), (tool(schema),), output_schema=schema)
    async for _ in make_model(api=api).stream(model_input):
        pass
    request = server.requests[0].json
    if api == "responses":
        assert request["tools"][0]["strict"] is True
        assert request["tools"][0]["parameters"] == schema
        assert request["text"]["format"]["strict"] is True
    else:
        assert request["tools"][0]["function"]["strict"] is True
        assert request["response_format"]["json_schema"]["strict"] is True


@pytest.mark.parametrize("api", ["responses", "chat"])
@pytest.mark.parametrize("boundary", ["tool", "output"])
@pytest.mark.parametrize(
    ("schema", "keyword", "path"), UNSUPPORTED.values(), ids=UNSUPPORTED.keys()
)
async def test_unsupported_schemas_fail_before_any_request(
    server: LoopbackServer,
    make_model: Callable[..., OpenAIModel],
    api: str,
    boundary: str,
    schema: dict[str, Any],
    keyword: str,
    path: str,
) -> None:
    if boundary == "tool":
        model_input = ModelInput((Message.user("Hi"),), (tool(schema),))
    else:
        model_input = ModelInput((Message.user("Hi"),), output_schema=schema)
    with pytest.raises(FevexRunError) as caught:
        async for _ in make_model(api=api).stream(model_input):
            pass
    error = caught.value
    assert error.code == "PROVIDER_SCHEMA_UNSUPPORTED"
    assert (error.details["keyword"], error.details["path"]) == (keyword, path)
    assert repr(keyword) in error.message
    assert path in error.message
    assert ("tool 'lookup'" if boundary == "tool" else "output schema") in error.message
    assert "best-effort" in error.message
    assert server.requests == []


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_best_effort_forwards_any_schema_without_strict(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel], api: str
) -> None:
    schema = WithDefault.model_json_schema()
    body = (
        ResponseEvents().message('{"limit": 3}').completed()
        if api == "responses"
        else ChatChunks().content('{"limit": 3}').finish()
    )
    server.respond(body.scripted())
    model_input = ModelInput((Message.user("Hi"),), (tool(schema),), output_schema=schema)
    result = None
    async for event in make_model(api=api, schema_policy="best-effort").stream(model_input):
        result = getattr(event, "result", result)
    assert result is not None
    assert result.output == {"limit": 3}
    request = server.requests[0].json
    if api == "responses":
        assert request["tools"][0]["strict"] is False
        assert request["tools"][0]["parameters"] == schema
        assert request["text"]["format"]["strict"] is False
    else:
        assert "strict" not in request["tools"][0]["function"]
        assert request["response_format"]["json_schema"]["strict"] is False
