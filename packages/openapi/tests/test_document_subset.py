"""What a document may hold: refused at definition time with a code, never dropped."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from fevex import FevexConfigurationError, ToolContext
from fevex.tools import ConnectionContext
from fevex_openapi import ANNOTATION_KEYWORDS, CONSTRAINT_KEYWORDS, create_openapi_tool_provider

pytestmark = pytest.mark.anyio

SERVER = "https://billing.example.com/v1"


def document(**operation: Any) -> dict[str, Any]:
    """A small valid 3.1 document with one operation, ``getInvoice``."""
    get_invoice = {
        "operationId": "getInvoice",
        "summary": "Get an invoice.",
        "parameters": [
            {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}
        ],
        "responses": {
            "200": {
                "description": "The invoice.",
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/Invoice"}}
                },
            }
        },
    }
    get_invoice.update(operation)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Billing", "version": "1"},
        "servers": [{"url": SERVER}],
        "paths": {"/invoices/{id}": {"get": get_invoice}},
        "components": {
            "schemas": {
                "Invoice": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}, "total": {"type": "number"}},
                    "required": ["id"],
                }
            }
        },
    }


def define(doc: Any, allow: tuple[str, ...] = ("getInvoice",), **options: Any) -> Any:
    return create_openapi_tool_provider(document=doc, operations={"allow": list(allow)}, **options)


def refused(doc: Any, allow: tuple[str, ...] = ("getInvoice",), **options: Any) -> Any:
    with pytest.raises(FevexConfigurationError) as caught:
        define(doc, allow, **options)
    return caught.value


def tool_context() -> ToolContext:
    return ToolContext("run-1", "session-1", "clerk", "call-1", "billing__getInvoice")


async def tools_of(provider: Any) -> list[Any]:
    async def no_credential(name: str) -> str:
        raise AssertionError("discovery needs no credential")

    context = ConnectionContext("billing", "run-1", "session-1", "clerk", no_credential)
    return list(await provider.list_tools(context))


async def test_the_fastapi_document_is_accepted_whole(billing: Any) -> None:
    doc = billing.document()
    assert doc["openapi"].startswith("3.1.")
    allow = (
        "getInvoice",
        "createInvoice",
        "getLegacyInvoice",
        "getLatestExport",
        "getSlowReport",
        "getBrokenReport",
        "getPlainReport",
        "getOddReport",
    )
    provider = define(doc, allow, allow_hosts=[f"127.0.0.1:{billing.port}"])
    tools = await tools_of(provider)
    assert [tool.name for tool in tools] == list(allow)
    create = tools[1].input_schema
    assert create["properties"]["body"] == {"$ref": "#/$defs/NewInvoice"}
    assert set(create["$defs"]) == {"NewInvoice"}
    assert create["additionalProperties"] is False


async def test_json_text_is_accepted_and_the_callers_dict_is_copied() -> None:
    doc = document()
    from_text = await tools_of(define(json.dumps(doc)))
    from_bytes = await tools_of(define(json.dumps(doc).encode()))
    provider = define(doc)
    doc["paths"]["/invoices/{id}"]["get"]["summary"] = "Changed afterwards."
    (tool,) = await tools_of(provider)
    assert tool.description == "Get an invoice."
    assert from_text == from_bytes == [tool]
    assert tool.input_schema == {
        "type": "object",
        "properties": {
            "path": {
                "type": "object",
                "properties": {"id": {"type": "integer"}},
                "required": ["id"],
                "additionalProperties": False,
            }
        },
        "additionalProperties": False,
        "required": ["path"],
    }
    assert tool.annotations == {"method": "GET", "path": "/invoices/{id}"}


def test_text_that_is_neither_json_nor_yaml_is_refused() -> None:
    error = refused("openapi: [3.1.0\ninfo: {")
    assert error.code == "OPENAPI_DOCUMENT_UNREADABLE"
    assert "line " in error.message


@pytest.mark.parametrize("version", ["3.2.0", "3.1", "3.0", "4.0.0", "2.0"])
def test_other_openapi_versions_are_refused(version: str) -> None:
    doc = document()
    doc["openapi"] = version
    error = refused(doc)
    assert error.code == "OPENAPI_VERSION_UNSUPPORTED"
    assert version in error.message


def test_swagger_2_is_refused() -> None:
    doc = document()
    del doc["openapi"]
    doc["swagger"] = "2.0"
    assert refused(doc).code == "OPENAPI_VERSION_UNSUPPORTED"


@pytest.mark.parametrize(
    "ref",
    [
        "https://schemas.example.com/invoice.json",
        "other.json#/components/schemas/Invoice",
        "//evil.example/x.json",
    ],
)
def test_remote_references_are_refused_where_an_allowed_operation_reaches_them(ref: str) -> None:
    doc = document()
    doc["components"]["schemas"]["Invoice"]["properties"]["customer"] = {"$ref": ref}
    error = refused(doc)
    assert error.code == "OPENAPI_REF_UNSUPPORTED"
    assert "#/components/schemas/Invoice/properties/customer" in error.message
    assert "leaves the document" in error.message


async def test_a_remote_reference_no_allowed_operation_reaches_is_not_read() -> None:
    doc = document()
    doc["components"]["schemas"]["Unused"] = {"$ref": "https://schemas.example.com/x.json"}
    doc["components"]["parameters"] = {"Remote": {"$ref": "other.json#/Parameter"}}
    assert [tool.name for tool in await tools_of(define(doc))] == ["getInvoice"]


def test_a_remote_reference_in_a_parameter_is_refused() -> None:
    doc = document()
    doc["paths"]["/invoices/{id}"]["get"]["parameters"].append(
        {"$ref": "https://example.com/parameters.json#/Trace"}
    )
    error = refused(doc)
    assert error.code == "OPENAPI_REF_UNSUPPORTED"
    assert "#/paths/~1invoices~1{id}/get/parameters/1" in error.message


def test_a_dangling_local_reference_is_refused() -> None:
    doc = document()
    doc["paths"]["/invoices/{id}"]["get"]["responses"]["200"]["content"]["application/json"] = {
        "schema": {"$ref": "#/components/schemas/Missing"}
    }
    assert refused(doc).code == "OPENAPI_REF_INVALID"


def test_a_request_body_that_is_not_json_is_refused() -> None:
    error = refused(
        document(
            requestBody={
                "required": True,
                "content": {"multipart/form-data": {"schema": {"type": "object"}}},
            }
        )
    )
    assert error.code == "OPENAPI_CONTENT_UNSUPPORTED"
    assert "multipart/form-data" in error.message


def test_a_success_response_that_is_not_json_is_refused() -> None:
    error = refused(
        document(responses={"200": {"description": "PDF", "content": {"application/pdf": {}}}})
    )
    assert error.code == "OPENAPI_CONTENT_UNSUPPORTED"


async def test_json_variants_and_error_responses_of_any_type_are_fine() -> None:
    provider = define(
        document(
            requestBody={"content": {"application/merge-patch+json": {"schema": {}}}},
            responses={
                "204": {"description": "Nothing."},
                "404": {"description": "Gone.", "content": {"text/html": {}}},
            },
        )
    )
    (tool,) = await tools_of(provider)
    assert tool.input_schema["properties"]["body"] == {}
    assert tool.input_schema["required"] == ["path"]  # the body is optional


@pytest.mark.parametrize(
    ("keyword", "value"),
    [
        ("nullable", True),
        ("patternProperties", {"^x": {}}),
        ("if", {"type": "string"}),
        ("unevaluatedProperties", False),
        ("prefixItems", [{"type": "string"}]),
        ("$defs", {}),
        ("contentMediaType", "text/plain"),
        ("dependentRequired", {"a": ["b"]}),
    ],
)
def test_unsupported_schema_keywords_are_refused_with_keyword_and_location(
    keyword: str, value: Any
) -> None:
    doc = document()
    doc["components"]["schemas"]["Invoice"]["properties"]["total"][keyword] = value
    error = refused(doc)
    assert error.code == "OPENAPI_SCHEMA_UNSUPPORTED"
    assert error.details == {
        "keyword": keyword,
        "location": "#/components/schemas/Invoice/properties/total",
    }
    assert keyword in error.message


def test_an_unsupported_keyword_in_a_parameter_schema_is_refused() -> None:
    doc = document()
    doc["paths"]["/invoices/{id}"]["get"]["parameters"][0]["schema"]["nullable"] = True
    error = refused(doc)
    assert error.code == "OPENAPI_SCHEMA_UNSUPPORTED"
    assert error.details["location"] == "#/paths/~1invoices~1{id}/get/parameters/0/schema"


async def test_schemas_only_of_operations_outside_the_allowlist_are_not_checked() -> None:
    doc = document()
    doc["paths"]["/other"] = {
        "get": {
            "operationId": "other",
            "responses": {
                "200": {
                    "description": "x",
                    "content": {"text/csv": {"schema": {"nullable": True}}},
                }
            },
        }
    }
    assert [tool.name for tool in await tools_of(define(doc))] == ["getInvoice"]


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "strin"}, "type must be"),
        ({"pattern": "("}, "pattern"),
        # Look-around and back-references need a backtracking engine.
        ({"pattern": "^(?=.*[0-9])[a-z0-9]+$"}, "matched in linear time"),
        ({"pattern": "^(a)\\1$"}, "matched in linear time"),
        ({"minLength": -1}, "minLength"),
        ({"required": "id"}, "required"),
        ({"anyOf": []}, "anyOf"),
        ({"multipleOf": 0}, "multipleOf"),
        ({"items": [{"type": "string"}]}, "a schema must be"),
    ],
)
def test_malformed_keyword_values_are_refused(schema: dict[str, Any], problem: str) -> None:
    doc = document()
    doc["components"]["schemas"]["Invoice"]["properties"]["total"] = schema
    error = refused(doc)
    assert error.code == "OPENAPI_SCHEMA_INVALID"
    assert problem in error.message


def test_an_unknown_operation_in_the_allowlist_is_refused() -> None:
    error = refused(document(), ("getInvoice", "deleteInvoice"))
    assert error.code == "OPENAPI_OPERATION_UNKNOWN"
    assert "deleteInvoice" in error.message


@pytest.mark.parametrize(
    "operations",
    [
        ["getInvoice"],
        {"allow": "getInvoice"},
        {"allow": []},
        {"deny": ["x"]},
        {"allow": [1]},
        {"allow": [""]},
        {"allow": ["getInvoice", "getInvoice"]},
    ],
)
def test_the_operations_option_has_one_shape(operations: Any) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        create_openapi_tool_provider(document=document(), operations=operations)
    assert caught.value.code == "OPENAPI_OPERATIONS_INVALID"


@pytest.mark.parametrize(
    "parameter",
    [
        {"name": "session", "in": "cookie", "schema": {"type": "string"}},
        {"name": "ids", "in": "query", "style": "pipeDelimited", "schema": {"type": "array"}},
        {"name": "filter", "in": "query", "content": {"application/json": {"schema": {}}}},
        {"name": "Host", "in": "header", "schema": {"type": "string"}},
        {"name": "Bad Name", "in": "header", "schema": {"type": "string"}},
        {"name": "q", "in": "query", "allowReserved": True, "schema": {"type": "string"}},
    ],
)
def test_parameters_that_cannot_be_sent_exactly_are_refused(parameter: dict[str, Any]) -> None:
    doc = document()
    doc["paths"]["/invoices/{id}"]["get"]["parameters"].append(parameter)
    assert refused(doc).code == "OPENAPI_PARAMETER_UNSUPPORTED"


async def test_header_parameters_the_specification_ignores_are_ignored() -> None:
    doc = document()
    doc["paths"]["/invoices/{id}"]["get"]["parameters"].append(
        {"name": "Authorization", "in": "header", "schema": {"type": "string"}}
    )
    (tool,) = await tools_of(define(doc))
    assert "headers" not in tool.input_schema["properties"]


async def test_parameters_by_reference_and_path_level_parameters() -> None:
    doc = document()
    doc["components"]["parameters"] = {
        "Trace": {"name": "X-Trace", "in": "header", "description": "A trace id.",
                  "schema": {"type": "string", "maxLength": 64}}
    }  # fmt: skip
    doc["paths"]["/invoices/{id}"]["parameters"] = [{"$ref": "#/components/parameters/Trace"}]
    (tool,) = await tools_of(define(doc))
    assert tool.input_schema["properties"]["headers"] == {
        "type": "object",
        "properties": {
            "X-Trace": {"type": "string", "maxLength": 64, "description": "A trace id."}
        },
        "additionalProperties": False,
    }


def test_duplicate_operation_ids_are_refused_when_allowlisted() -> None:
    doc = document()
    doc["paths"]["/copies/{id}"] = {"get": copy.deepcopy(doc["paths"]["/invoices/{id}"]["get"])}
    assert refused(doc).code == "OPENAPI_DOCUMENT_INVALID"


def test_a_path_template_must_match_its_parameters() -> None:
    doc = document(parameters=[])
    assert refused(doc).code == "OPENAPI_DOCUMENT_INVALID"


@pytest.mark.parametrize(
    "servers",
    [
        [],
        [{"url": "/v1"}],
        [{"url": "ftp://files.example.com"}],
        [{"url": "https://u:p@h.example"}],
    ],
)
def test_servers_must_be_absolute_http_urls(servers: list[dict[str, Any]]) -> None:
    doc = document()
    doc["servers"] = servers
    assert refused(doc).code == "OPENAPI_SERVER_INVALID"


async def test_server_variables_take_their_defaults(billing: Any) -> None:
    doc = billing.document()
    doc["servers"] = [
        {
            "url": "http://{host}:{port}",
            "variables": {"host": {"default": "127.0.0.1"}, "port": {"default": str(billing.port)}},
        }
    ]
    provider = define(doc, allow_hosts=[f"127.0.0.1:{billing.port}"])
    answer = await provider.call_tool("getInvoice", {"path": {"invoice_id": 9}}, tool_context())
    assert answer["id"] == 9


async def test_base_url_replaces_the_documents_servers(billing: Any) -> None:
    doc = billing.document()
    doc["servers"] = [{"url": "http://169.254.169.254"}]
    provider = define(doc, base_url=f"{billing.origin}/", allow_hosts=["127.0.0.1"])
    answer = await provider.call_tool("getInvoice", {"path": {"invoice_id": 8}}, tool_context())
    assert answer["id"] == 8
    assert billing.seen[0]["path"] == "/invoices/8"


@pytest.mark.parametrize("value", [object(), {"openapi": float("nan")}, ["openapi"], 42, "[1, 2]"])
def test_a_document_must_be_a_json_object(value: Any) -> None:
    assert refused(value).code in {"OPENAPI_DOCUMENT_INVALID", "OPENAPI_DOCUMENT_UNREADABLE"}


def test_the_documented_keyword_lists_do_not_overlap() -> None:
    assert not CONSTRAINT_KEYWORDS & ANNOTATION_KEYWORDS
    assert {"$ref", "anyOf", "pattern", "exclusiveMinimum"} <= CONSTRAINT_KEYWORDS
    assert "nullable" not in CONSTRAINT_KEYWORDS | ANNOTATION_KEYWORDS


@pytest.mark.parametrize("headers", [{"Bad Name": "x"}, {"X-A": "line\r\nbreak"}, ["x"]])
def test_header_mappings_are_checked_without_quoting_values(headers: Any) -> None:
    error = refused(document(), headers=headers)
    assert error.code == "OPENAPI_HEADERS_INVALID"
    assert "break" not in error.message


@pytest.mark.parametrize(
    "limits", [{"timeout": 0}, {"timeout": True}, {"max_redirects": -1}, {"max_response_bytes": 0}]
)
def test_limits_are_checked(limits: dict[str, Any]) -> None:
    assert refused(document(), **limits).code == "OPENAPI_LIMIT_INVALID"
