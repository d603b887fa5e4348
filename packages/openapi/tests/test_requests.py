"""How a tool input becomes a request: parameters by location, default serialization."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from fevex import FevexRunError, ToolContext
from fevex_openapi import create_openapi_tool_provider
from fevex_openapi.document import load_document
from fevex_openapi.operations import read_operations
from fevex_openapi.request_parts import request_parts

pytestmark = pytest.mark.anyio


def context() -> ToolContext:
    return ToolContext("run-1", "session-1", "clerk", "call-1", "billing__listInvoices")


def invoices(billing: Any, **options: Any) -> Any:
    options.setdefault("allow_hosts", [f"127.0.0.1:{billing.port}"])
    return create_openapi_tool_provider(
        document=billing.document(),
        operations={"allow": ["listInvoices", "getInvoice"]},
        **options,
    )


async def test_query_arrays_booleans_and_header_parameters_reach_the_service(
    billing: Any,
) -> None:
    answer = await invoices(billing).call_tool(
        "listInvoices",
        {
            "query": {"status": ["open", "paid"], "paid": False, "limit": 5},
            "headers": {"x-request-note": "from the model"},
        },
        context(),
    )
    assert answer == {
        "query": [["status", "open"], ["status", "paid"], ["paid", "false"], ["limit", "5"]],
        "status": ["open", "paid"],
        "paid": False,
        "limit": 5,
        "note": "from the model",
    }


async def test_a_header_parameter_cannot_replace_a_configured_header(billing: Any) -> None:
    provider = invoices(billing, headers=lambda context: {"X-Request-Note": "configured"})
    answer = await provider.call_tool(
        "listInvoices", {"headers": {"x-request-note": "from the model"}}, context()
    )
    assert answer["note"] == "configured"


async def test_input_outside_the_schema_never_reaches_the_service(billing: Any) -> None:
    provider = invoices(billing)
    for bad in (
        {"query": {"limit": 0}},
        {"query": {"unknown": 1}},
        {"cookies": {}},
        {"path": {"invoice_id": "one"}},
    ):
        with pytest.raises(FevexRunError) as caught:
            await provider.call_tool("listInvoices", bad, context())
        assert caught.value.code == "OPENAPI_INPUT_INVALID"
    with pytest.raises(FevexRunError) as caught:
        await provider.call_tool("getInvoice", {}, context())
    assert caught.value.code == "OPENAPI_INPUT_INVALID"
    assert billing.seen == []


async def test_a_headers_function_must_return_a_mapping_of_strings(billing: Any) -> None:
    async def broken(context: ToolContext) -> Any:
        return {"Authorization": 42}

    with pytest.raises(FevexRunError) as caught:
        await invoices(billing, headers=broken).call_tool("listInvoices", {}, context())
    assert caught.value.code == "OPENAPI_HEADERS_INVALID"
    assert billing.seen == []


async def test_an_operation_the_provider_does_not_allow_is_refused(billing: Any) -> None:
    with pytest.raises(FevexRunError) as caught:
        await invoices(billing).call_tool("createInvoice", {}, context())
    assert caught.value.code == "OPENAPI_OPERATION_UNKNOWN"


async def test_a_success_body_larger_than_the_limit_is_refused(billing: Any) -> None:
    provider = invoices(billing, max_response_bytes=16)
    with pytest.raises(FevexRunError) as caught:
        await provider.call_tool("getInvoice", {"path": {"invoice_id": 1}}, context())
    assert caught.value.code == "OPENAPI_RESPONSE_TOO_LARGE"


async def test_an_unreachable_service_is_a_recoverable_error() -> None:
    with socket.socket() as placeholder:
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    provider = create_openapi_tool_provider(
        document=path_document(),
        operations={"allow": ["getFile"]},
        base_url=f"http://127.0.0.1:{port}",
        allow_hosts=[f"127.0.0.1:{port}"],
    )
    with pytest.raises(FevexRunError) as caught:
        await provider.call_tool("getFile", {"path": {"name": "a"}}, context())
    assert caught.value.code == "OPENAPI_REQUEST_FAILED"
    assert caught.value.recoverable
    assert f"127.0.0.1:{port}" in caught.value.message


def path_document() -> dict[str, Any]:
    return {
        "openapi": "3.1.1",
        "info": {"title": "Files", "version": "1"},
        "servers": [{"url": "https://files.example.com"}],
        "paths": {
            "/files/{name}": {
                "get": {
                    "operationId": "getFile",
                    "parameters": [{"name": "name", "in": "path", "required": True, "schema": {}}],
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
    }


def path_operation() -> Any:
    return read_operations(load_document(path_document()), ["getFile"], None)["getFile"]


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("a/b", "/files/a%2Fb"),
        ("../admin", "/files/..%2Fadmin"),
        ("q?x=1#y", "/files/q%3Fx%3D1%23y"),
        (12, "/files/12"),
        (True, "/files/true"),
        (["a", "b"], "/files/a%2Cb"),
    ],
)
def test_path_values_are_one_encoded_segment(value: Any, path: str) -> None:
    assert request_parts(path_operation(), {"path": {"name": value}}).path == path


@pytest.mark.parametrize("value", ["", ".", "..", {"a": 1}, [{"a": 1}]])
def test_path_values_that_are_not_a_segment_are_refused(value: Any) -> None:
    with pytest.raises(FevexRunError) as caught:
        request_parts(path_operation(), {"path": {"name": value}})
    assert caught.value.code == "OPENAPI_INPUT_INVALID"
