"""References that loop back without entering the value are refused when a provider is
created; a schema that recurses into its properties or items is an ordinary tree."""

from __future__ import annotations

from typing import Any

import pytest

from fevex import FevexConfigurationError
from fevex.schemas import compile_json_schema
from fevex.tools import ConnectionContext
from fevex_openapi import create_openapi_tool_provider

pytestmark = pytest.mark.anyio

SERVER = "https://billing.example.com/v1"
A = "#/components/schemas/A"
B = "#/components/schemas/B"


def document(version: str, schemas: dict[str, Any], place: str) -> dict[str, Any]:
    """One operation ``putA`` whose request body or 200 answer is ``A``."""
    content = {"application/json": {"schema": {"$ref": A}}}
    operation: dict[str, Any] = {
        "operationId": "putA",
        "responses": {"200": {"description": "Done."}},
    }
    if place == "request body":
        operation["requestBody"] = {"required": True, "content": content}
    else:
        operation["responses"]["200"]["content"] = content
    return {
        "openapi": version,
        "info": {"title": "Loops", "version": "1"},
        "servers": [{"url": SERVER}],
        "paths": {"/a": {"put": operation}},
        "components": {"schemas": schemas},
    }


def refused(doc: dict[str, Any]) -> FevexConfigurationError:
    with pytest.raises(FevexConfigurationError) as caught:
        create_openapi_tool_provider(document=doc, operations={"allow": ["putA"]})
    return caught.value


async def tool_schema(doc: dict[str, Any]) -> dict[str, Any]:
    async def no_credential(name: str) -> str:
        raise AssertionError("discovery needs no credential")

    provider = create_openapi_tool_provider(document=doc, operations={"allow": ["putA"]})
    context = ConnectionContext("billing", "run-1", "session-1", "clerk", no_credential)
    (tool,) = await provider.list_tools(context)
    return dict(tool.input_schema)


LOOPS = {
    "A refers to A": {"A": {"$ref": A}},
    "A refers to B, B to A": {"A": {"$ref": B}, "B": {"$ref": A}},
    "A is allOf [A]": {"A": {"type": "object", "allOf": [{"$ref": A}]}},
    "A is anyOf [string, B], B is not A": {
        "A": {"anyOf": [{"type": "string"}, {"$ref": B}]},
        "B": {"not": {"$ref": A}},
    },
    "A's property x is A, and A is allOf [its own x]": {
        "A": {
            "allOf": [{"$ref": "#/components/schemas/A/properties/x"}],
            "properties": {"x": {"$ref": A}},
        }
    },
}


@pytest.mark.parametrize("place", ["request body", "response"])
@pytest.mark.parametrize("schemas", LOOPS.values(), ids=list(LOOPS))
def test_a_reference_loop_in_a_schema_is_refused_when_the_provider_is_created(
    schemas: dict[str, Any], place: str
) -> None:
    error = refused(document("3.1.0", schemas, place))
    assert error.code == "OPENAPI_REF_INVALID"
    assert "loop" in error.message
    assert error.details["location"].startswith("#/components/schemas/A")
    assert error.details["loop"][0] == error.details["loop"][-1]


@pytest.mark.parametrize("place", ["request body", "response"])
def test_a_reference_loop_in_a_3_0_schema_is_refused_as_well(place: str) -> None:
    schemas = {"A": {"type": "object", "allOf": [{"$ref": B}]}, "B": {"$ref": A, "nullable": True}}
    error = refused(document("3.0.3", schemas, place))
    assert error.code == "OPENAPI_REF_INVALID"
    assert error.details["loop"] == [A, B, A]


def test_the_loop_is_named_in_the_message() -> None:
    error = refused(document("3.1.0", LOOPS["A refers to B, B to A"], "request body"))
    assert f"{A} → {B} → {A}" in error.message


def test_a_loop_among_parameters_is_refused_with_the_same_code() -> None:
    doc = document("3.1.0", {"A": {"type": "string"}}, "response")
    doc["paths"]["/a"]["put"]["parameters"] = [{"$ref": "#/components/parameters/P"}]
    doc["components"]["parameters"] = {
        "P": {"$ref": "#/components/parameters/Q"},
        "Q": {"$ref": "#/components/parameters/P"},
    }
    error = refused(doc)
    assert error.code == "OPENAPI_REF_INVALID"
    assert "loop" in error.message


async def test_a_loop_no_allowed_operation_reaches_is_not_read() -> None:
    doc = document(
        "3.1.0",
        {"A": {"type": "string"}, "Loop": {"$ref": "#/components/schemas/Loop"}},
        "response",
    )
    assert (await tool_schema(doc))["properties"] == {}


TREES = {
    "through a property": {
        "A": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "parent": {"$ref": A}},
            "required": ["name"],
        }
    },
    "through items, behind allOf": {
        "A": {"allOf": [{"$ref": B}]},
        "B": {
            "type": "object",
            "properties": {"children": {"type": "array", "items": {"$ref": A}}},
            "additionalProperties": {"type": "string"},
        },
    },
}


@pytest.mark.parametrize("schemas", TREES.values(), ids=list(TREES))
async def test_a_schema_that_recurses_into_the_value_is_accepted(schemas: dict[str, Any]) -> None:
    schema = await tool_schema(document("3.1.0", schemas, "request body"))
    body = compile_json_schema({"$defs": schema["$defs"], **schema["properties"]["body"]})
    if "parent" in schemas["A"].get("properties", {}):
        assert body.problems({"name": "a", "parent": {"name": "b", "parent": {"name": "c"}}}) == []
        assert body.problems({"name": "a", "parent": {"parent": {"name": "c"}}})
    else:
        assert body.problems({"children": [{"children": [], "x": "y"}]}) == []
        assert body.problems({"children": [{"children": [], "x": 1}]})
