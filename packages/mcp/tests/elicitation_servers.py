"""An MCP server whose tools ask the client for input (elicitation, form mode), served over
Streamable HTTP by ``conftest.serve``, and the same tools for the tests' stdio server.

Each tool records what the client declared and answered in an :class:`ElicitationLog`, and
returns the answer as JSON text: ``{"action": ..., "content": ...}``, or
``{"error": ...}`` when the client refused the request.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
import uvicorn
from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult

#: The SEP-1034 conformance scenario's schema: every field has a default.
DEFAULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "default": True},
    },
    "required": [],
}
NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "maxLength": 40},
        "plan": {"type": "string", "enum": ["free", "pro"], "default": "free"},
    },
    "required": ["name"],
}
HOSTILE_MESSAGE = "Pay now\x1b[2J\u202eyebO\u202c\x00 " + "Obey. " * 10_000
HOSTILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {f"field{index}": {"type": "string"} for index in range(5_000)},
}
NESTED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"address": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


@dataclass
class ElicitationLog:
    """What the server saw: the client's declared elicitation capability at each call,
    and each answer (or refusal) it got."""

    capabilities: list[Any] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)
    asked: int = 0
    cancelled: int = 0


async def elicit(
    ctx: Context, log: ElicitationLog, message: str, schema: dict[str, Any]
) -> dict[str, Any]:
    log.asked += 1
    try:
        result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    except MCPError as error:
        answer: dict[str, Any] = {"error": error.code}
    else:
        answer = {"action": result.action, "content": result.content}
    log.answers.append(answer)
    return answer


def build_elicitation_server(log: ElicitationLog) -> MCPServer:
    server = MCPServer("asking", log_level="WARNING")

    def declared(ctx: Context) -> None:
        capabilities = ctx.client_capabilities
        elicitation = None if capabilities is None else capabilities.elicitation
        log.capabilities.append(
            None if elicitation is None else elicitation.model_dump(exclude_none=True)
        )

    @server.tool(description="Asks for a name.", structured_output=False)
    async def ask_name(ctx: Context) -> str:
        declared(ctx)
        return json.dumps(await elicit(ctx, log, "What is your name?", NAME_SCHEMA))

    @server.tool(description="Asks, expecting every default.", structured_output=False)
    async def ask_defaults(ctx: Context) -> str:
        declared(ctx)
        return json.dumps(await elicit(ctx, log, "Accept with defaults", DEFAULTS_SCHEMA))

    @server.tool(description="Asks with a huge, dirty message.", structured_output=False)
    async def ask_dirty(ctx: Context) -> str:
        return json.dumps(await elicit(ctx, log, HOSTILE_MESSAGE, NAME_SCHEMA))

    @server.tool(description="Asks with a schema of 5,000 fields.", structured_output=False)
    async def ask_huge(ctx: Context) -> str:
        return json.dumps(await elicit(ctx, log, "Fill this in", HOSTILE_SCHEMA))

    @server.tool(description="Asks with a nested schema.", structured_output=False)
    async def ask_nested(ctx: Context) -> str:
        return json.dumps(await elicit(ctx, log, "Where do you live?", NESTED_SCHEMA))

    @server.tool(description="Asks again and again.", structured_output=False)
    async def ask_flood(ctx: Context) -> str:
        for _ in range(100):
            answer = await elicit(ctx, log, "Again?", NAME_SCHEMA)
            if answer.get("action") != "accept":
                break
        return "flooded"

    @server.tool(description="Asks the 2026-07-28 way.", structured_output=False)
    async def ask_modern(ctx: Context) -> str | InputRequiredResult:
        responses = ctx.input_responses
        if not responses:
            log.asked += 1
            params = ElicitRequestFormParams(
                message="What is your name?", requested_schema=NAME_SCHEMA
            )
            return InputRequiredResult(input_requests={"name": ElicitRequest(params=params)})
        given = responses["name"]
        assert isinstance(given, ElicitResult)
        answer = {"action": given.action, "content": given.content}
        log.answers.append(answer)
        return json.dumps(answer)

    @server.tool(description="Asks, then waits to be cancelled.", structured_output=False)
    async def ask_then_wait(ctx: Context) -> str:
        answer = await elicit(ctx, log, "What is your name?", NAME_SCHEMA)
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            log.cancelled += 1
            raise
        return json.dumps(answer)

    return server


ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]


def handshake_era(app: ASGIApp) -> ASGIApp:
    """Refuse ``server/discover``, as the handshake-era servers people run today do: the
    client then opens its session with ``initialize``, and the server's requests go on the
    tool call's stream (a 2026-07-28 session would embed them in its result instead)."""

    async def wrapped(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        messages = []
        body = bytearray()
        more = True
        while more:
            message = await receive()
            messages.append(message)
            body += message.get("body", b"")
            more = message["type"] == "http.request" and message.get("more_body", False)
        try:
            rpc = json.loads(body)
        except ValueError:
            rpc = {}
        if isinstance(rpc, dict) and rpc.get("method") == "server/discover":
            refusal = {
                "jsonrpc": "2.0",
                "id": rpc.get("id"),
                "error": {"code": -32601, "message": "Method not found"},
            }
            answer = json.dumps(refusal).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": answer})
            return

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        await app(scope, replay, send)

    return wrapped


async def serve(app: Any) -> tuple[uvicorn.Server, asyncio.Task[None], int]:
    """``app`` served by uvicorn on a free loopback port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, lifespan="on", log_config=None,
        log_level="warning", access_log=False, timeout_graceful_shutdown=2,
    )  # fmt: skip
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    with anyio.fail_after(10):
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
    return server, task, port


@dataclass
class AskingServer:
    url: str
    log: ElicitationLog


@pytest.fixture(name="asking_server")
async def asking_server_fixture() -> AsyncIterator[AskingServer]:
    """The elicitation server over Streamable HTTP, handshake-era."""
    log = ElicitationLog()
    server, task, port = await serve(
        handshake_era(build_elicitation_server(log).streamable_http_app())
    )
    try:
        yield AskingServer(f"http://127.0.0.1:{port}/mcp", log)
    finally:
        server.should_exit = True
        await task


async def tool_output(app: Any, run_id: str) -> Any:
    """The JSON the run's one tool call returned."""
    events = await app.list_events(run_id)
    (completed,) = [event for event in events if event.type == "tool.completed"]
    return json.loads(completed.payload["output"])
