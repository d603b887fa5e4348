"""The operations table against what is served: the OpenAPI document of a real ``fevex
serve`` process names every operation of the table, with its method, path, operationId,
parameters, body and answers, and nothing else; every operation has a route; and each
one the clients call is a method of both, sending the table's method and path.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2
import pytest

from fevex.http import AsyncFevexClient, FevexClient, FevexHttpError
from fevex.http.openapi import openapi_document
from fevex.http.operations import OPERATIONS, Operation
from fevex.http.parameters import Bounds

HERE = Path(__file__).resolve().parent
ALICE = {"Authorization": "Bearer alice"}
# What the shared server is started with (see conftest.SHARED_ENVIRONMENT).
PAGE_SIZE = 5
MAX_BODY = 4096


def _service_app() -> Any:
    spec = importlib.util.spec_from_file_location("http_service_app", HERE / "http_service.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_fevex()


@pytest.fixture(scope="module")
def served(shared_server: Any) -> dict[str, Any]:
    with httpx2.Client(base_url=shared_server.url, headers=ALICE) as http:
        response = http.get("/v1/openapi.json")
    assert response.status_code == 200
    document: dict[str, Any] = response.json()
    return document


def test_the_served_document_has_one_entry_per_operation_and_no_other(
    served: dict[str, Any],
) -> None:
    listed = {(path, method) for path, methods in served["paths"].items() for method in methods}
    assert listed == {(operation.path, operation.method.lower()) for operation in OPERATIONS}
    assert len({operation.operation_id for operation in OPERATIONS}) == len(OPERATIONS)


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.name)
def test_each_served_operation_is_its_table_entry(
    served: dict[str, Any], operation: Operation
) -> None:
    bounds = Bounds(_service_app(), PAGE_SIZE)
    entry = served["paths"][operation.path][operation.method.lower()]
    assert entry["operationId"] == operation.operation_id
    parameters = [
        (p["name"], p["in"], p["required"], p["schema"]) for p in entry.get("parameters", [])
    ]
    assert parameters == [
        *((name.name, "path", True, name.schema(bounds)) for name in operation.path_names),
        *((p.name, p.location, False, p.schema(bounds)) for p in operation.parameters),
    ]
    assert set(entry["responses"]) == {operation.answer.status, *operation.errors}
    answer = entry["responses"][operation.answer.status]
    media = "text/event-stream" if operation.streams else "application/json"
    assert set(answer["content"]) == {media}
    for status in operation.errors:
        error = entry["responses"][status]["content"]["application/json"]["schema"]
        assert error == {"$ref": "#/components/schemas/Error"}
    if operation.body is None:
        assert "requestBody" not in entry
    else:
        schema = entry["requestBody"]["content"]["application/json"]["schema"]
        assert schema["properties"] == {field.name: field.schema for field in operation.body}
        assert schema["required"] == [field.name for field in operation.body if field.required]
        assert schema["additionalProperties"] is False
    # Every operation is for authenticated callers: none lifts the document's security.
    assert operation.authenticated
    assert "security" not in entry
    assert served["security"] == [{"host": []}]


def test_the_served_document_is_the_one_made_from_the_table(served: dict[str, Any]) -> None:
    made = openapi_document(
        _service_app(), event_page_size=PAGE_SIZE, max_body_size=MAX_BODY, anonymous=False
    )
    assert served == made


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.name)
def test_every_operation_has_a_route(shared_server: Any, operation: Operation) -> None:
    # Names nobody has: each route answers for itself (RUN_NOT_FOUND, AGENT_NOT_FOUND,
    # INVALID_REQUEST...), never the router's NOT_FOUND or METHOD_NOT_ALLOWED.
    path = re.sub(r"\{[a-z_]+\}", "nobody-has-this", operation.path)
    with httpx2.Client(
        base_url=shared_server.url, headers={**ALICE, "X-Fevex-Request": "1"}
    ) as http:
        response = http.request(
            operation.method, path, json={} if operation.method == "POST" else None
        )
    if response.status_code >= 400:
        code = response.json()["error"]["code"]
        assert code not in ("NOT_FOUND", "METHOD_NOT_ALLOWED"), (operation.name, code)


# Arguments for each client method; ids and names are the placeholders of the path.
CLIENT_ARGUMENTS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "start_agent": (("a/1", "hi"), {"session_id": "s", "timeout": 1.0}),
    "start_workflow": (("w 1", {"x": 1}), {"timeout": 1.0}),
    "start_team": (("t1", "go"), {}),
    "list_runs": ((), {"status": "completed", "limit": 3, "after": "r0"}),
    "get_run": (("r1",), {}),
    "get_run_view": (("r1",), {}),
    "list_events": (("r1",), {"after": "e1", "limit": 2}),
    "observe_run": (("r1",), {}),
    "resume_run": (("r1",), {"approval_id": "p", "decision": "reject", "reason": "no"}),
    "recover_run": (("r1",), {}),
    "cancel_run": (("r1",), {"timeout": 2.0}),
    "send_event": (("r1", "review.approved", {"ok": True}), {}),
    "get_session": (("s1",), {}),
    "compact_session": (("s1", "short"), {"revision": 2}),
}
CLIENT_OPERATIONS = [operation for operation in OPERATIONS if operation.in_clients]


def _expected_path(operation: Operation, arguments: tuple[Any, ...]) -> str:
    path = operation.path
    for name, value in zip(operation.path_names, arguments, strict=True):
        path = path.replace(f"{{{name.name}}}", quote(value, safe=""))
    return path


def _refusing(seen: list[httpx2.Request]) -> Any:
    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(404, json={"error": {"code": "RUN_NOT_FOUND", "message": "no"}})

    return answer


def test_every_table_entry_the_clients_call_is_a_method_of_both() -> None:
    assert set(CLIENT_ARGUMENTS) == {operation.name for operation in CLIENT_OPERATIONS}
    for operation in CLIENT_OPERATIONS:
        blocking = getattr(FevexClient, operation.name)
        concurrent = getattr(AsyncFevexClient, operation.name)
        assert inspect.signature(blocking).parameters == inspect.signature(concurrent).parameters, (
            operation.name
        )
        if operation.streams:
            assert inspect.isasyncgenfunction(concurrent)
        else:
            assert inspect.iscoroutinefunction(concurrent)


@pytest.mark.parametrize("operation", CLIENT_OPERATIONS, ids=lambda operation: operation.name)
def test_the_blocking_client_sends_the_tables_method_and_path(operation: Operation) -> None:
    seen: list[httpx2.Request] = []
    arguments, keywords = CLIENT_ARGUMENTS[operation.name]
    transport = httpx2.MockTransport(_refusing(seen))
    with FevexClient("http://server", transport=transport) as client, pytest.raises(FevexHttpError):
        result = getattr(client, operation.name)(*arguments, **keywords)
        if operation.streams:
            next(iter(result))
    _check_sent(seen, operation, arguments)


@pytest.mark.parametrize("operation", CLIENT_OPERATIONS, ids=lambda operation: operation.name)
def test_the_async_client_sends_the_tables_method_and_path(operation: Operation) -> None:
    seen: list[httpx2.Request] = []
    arguments, keywords = CLIENT_ARGUMENTS[operation.name]

    async def send() -> None:
        transport = httpx2.MockTransport(_refusing(seen))
        async with AsyncFevexClient("http://server", transport=transport) as client:
            method = getattr(client, operation.name)
            if operation.streams:
                await anext(aiter(method(*arguments, **keywords)))
            else:
                await method(*arguments, **keywords)

    with pytest.raises(FevexHttpError):
        asyncio.run(send())
    _check_sent(seen, operation, arguments)


def _check_sent(
    seen: list[httpx2.Request], operation: Operation, arguments: tuple[Any, ...]
) -> None:
    assert len(seen) == 1
    request = seen[0]
    assert request.method == operation.method
    path_arguments = arguments[: len(operation.path_names)]
    assert request.url.raw_path.decode().split("?")[0] == _expected_path(operation, path_arguments)
    taken = {parameter.name for parameter in operation.parameters if parameter.location == "query"}
    assert set(request.url.params.keys()) <= taken
    if request.content:
        fields = {field.name for field in operation.body or ()}
        assert set(json.loads(request.content)) <= fields
