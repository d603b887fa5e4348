"""MCP elicitation: a real server (Streamable HTTP on loopback, and stdio) asks for input
during a tool call, and a handler the provider names answers, on a real SQLite store.

Unconfigured, the client declares no elicitation capability and the server's request is
refused; configured, the answer is checked against the server's schema, takes its
defaults (SEP-1034), and a hostile server (a huge or dirty request, a flood of them) is
bounded. The person path (a pending input on the run) is in ``test_elicitation_person.py``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import SessionLog, handshake_era, serve
from elicitation_servers import ElicitationLog, build_elicitation_server

from fevex import FevexRunError, create_fevex, define_agent, define_connection
from fevex.testing import FakeModel
from fevex_mcp import ElicitationRequest, ElicitationResponse, create_mcp_tool_provider

pytestmark = pytest.mark.anyio


@dataclass
class AskingServer:
    url: str
    log: ElicitationLog


@pytest.fixture
async def asking_server() -> AsyncIterator[AskingServer]:
    log = ElicitationLog()
    # Handshake-era, as the servers people run today: requests to the client go on the
    # tool call's stream (a 2026-07-28 session would embed them in its result instead).
    app = handshake_era(build_elicitation_server(log).streamable_http_app(), SessionLog())
    server, task, port = await serve(app)
    try:
        yield AskingServer(f"http://127.0.0.1:{port}/mcp", log)
    finally:
        server.should_exit = True
        await task


def tool_call(name: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": "call-1", "name": f"asking__{name}", "input": {}}]}


def make_app(tmp_path: Path, tool: str, provider: Any, timeout: float = 30.0) -> Any:
    model = FakeModel(tool_call(tool), {"output": "done"})
    return create_fevex(
        models={"default": model},
        agents=[define_agent(name="asker", instructions="Ask.", tools=[f"asking__{tool}"])],
        connections=[
            define_connection(
                name="asking", provider=provider, allowlist=[tool], timeout=timeout
            )
        ],
        run_store=f"sqlite:///{tmp_path / 'runs.db'}",
    )


async def tool_output(app: Any, run_id: str) -> Any:
    events = await app.list_events(run_id)
    (completed,) = [event for event in events if event.type == "tool.completed"]
    return json.loads(completed.payload["output"])


async def test_unconfigured_declares_nothing_and_the_request_is_refused(
    asking_server: AskingServer, tmp_path: Path
) -> None:
    provider = create_mcp_tool_provider(asking_server.url)
    async with make_app(tmp_path, "ask_name", provider) as app:
        result = await app.run_agent("asker", "Ask me.")
        assert await tool_output(app, result.run_id) == {"error": -32600}
    assert asking_server.log.capabilities == [None]


async def test_a_handler_accepts_with_content_and_sees_who_asks(
    asking_server: AskingServer, tmp_path: Path
) -> None:
    seen: list[ElicitationRequest] = []

    async def handler(request: ElicitationRequest) -> ElicitationResponse:
        seen.append(request)
        return ElicitationResponse.accept({"name": "Ada"})

    provider = create_mcp_tool_provider(asking_server.url, elicitation=handler)
    async with make_app(tmp_path, "ask_name", provider) as app:
        result = await app.run_agent("asker", "Ask me.")
        output = await tool_output(app, result.run_id)
    # The plan the handler left out takes the schema's default.
    assert output == {"action": "accept", "content": {"name": "Ada", "plan": "free"}}
    (request,) = seen
    assert request.message == "What is your name?"
    assert request.schema["properties"]["plan"]["enum"] == ["free", "pro"]
    assert (request.connection, request.tool_name, request.tool_call_id) == (
        "asking",
        "asking__ask_name",
        "call-1",
    )
    assert request.run_id == result.run_id
    assert request.server == f"at {asking_server.url}"
    (declared,) = asking_server.log.capabilities
    assert declared is not None and "form" in declared
