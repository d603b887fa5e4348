"""MCP elicitation: a real server (Streamable HTTP on loopback, and stdio) asks for input
during a tool call, and a handler the provider names answers, on a real SQLite store.

Unconfigured, the client declares no elicitation capability and the server's request is
refused; configured, the answer is checked against the server's schema, takes its
defaults (SEP-1034), and a hostile server (a huge or dirty request, a flood of them) is
bounded. The person path (a pending input on the run) is in ``test_elicitation_person.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from elicitation_servers import (
    AskingServer,
    ElicitationLog,
    asking_server_fixture,  # noqa: F401 (the asking_server fixture)
    build_elicitation_server,
    serve,
    tool_output,
)

from fevex import FevexRunError, create_fevex, define_agent, define_connection
from fevex.testing import FakeModel
from fevex_mcp import ElicitationRequest, ElicitationResponse, create_mcp_tool_provider

pytestmark = pytest.mark.anyio


def tool_call(name: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": "call-1", "name": f"asking__{name}", "input": {}}]}


def make_app(tmp_path: Path, tool: str, provider: Any, timeout: float = 30.0) -> Any:
    model = FakeModel(tool_call(tool), {"output": "done"})
    return create_fevex(
        models={"default": model},
        agents=[define_agent(name="asker", instructions="Ask.", tools=[f"asking__{tool}"])],
        connections=[
            define_connection(name="asking", provider=provider, allowlist=[tool], timeout=timeout)
        ],
        run_store=f"sqlite:///{tmp_path / 'runs.db'}",
    )


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
    assert declared is not None
    assert "form" in declared


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_handler_declines_or_cancels(
    asking_server: AskingServer, tmp_path: Path, action: str
) -> None:
    def handler(request: ElicitationRequest) -> ElicitationResponse:
        # A plain function: called in a worker thread.
        return ElicitationResponse(action)  # type: ignore[arg-type]

    provider = create_mcp_tool_provider(asking_server.url, elicitation=handler)
    async with make_app(tmp_path, "ask_name", provider) as app:
        result = await app.run_agent("asker", "Ask me.")
        assert await tool_output(app, result.run_id) == {"action": action, "content": None}


async def test_every_default_is_applied_sep_1034(
    asking_server: AskingServer, tmp_path: Path
) -> None:
    async def accept_empty(request: ElicitationRequest) -> ElicitationResponse:
        return ElicitationResponse.accept()

    provider = create_mcp_tool_provider(asking_server.url, elicitation=accept_empty)
    async with make_app(tmp_path, "ask_defaults", provider) as app:
        result = await app.run_agent("asker", "Ask me.")
        output = await tool_output(app, result.run_id)
    assert output["content"] == {
        "name": "John Doe",
        "age": 30,
        "score": 95.5,
        "status": "active",
        "verified": True,
    }


@pytest.mark.parametrize(
    "content",
    [{"name": 7}, {"plan": "free"}, {"name": "Ada", "plan": "gold"}, {"name": "Ada", "x": 1}],
)
async def test_content_that_breaks_the_schema_ends_the_call(
    asking_server: AskingServer, tmp_path: Path, content: dict[str, Any]
) -> None:
    async def handler(request: ElicitationRequest) -> ElicitationResponse:
        return ElicitationResponse.accept(content)

    provider = create_mcp_tool_provider(asking_server.url, elicitation=handler)
    async with make_app(tmp_path, "ask_name", provider) as app:
        with pytest.raises(FevexRunError) as raised:
            await app.run_agent("asker", "Ask me.")
        assert raised.value.code == "MCP_ELICITATION_CONTENT_INVALID"
        run = await app.get_run(raised.value.run_id)
        assert run.status == "failed"
        assert run.error is not None
        assert run.error["code"] == "MCP_ELICITATION_CONTENT_INVALID"
    # The server was told the request was cancelled; no value reached it.
    assert asking_server.log.answers == [{"action": "cancel", "content": None}]
    assert "gold" not in raised.value.message


async def test_a_handler_that_takes_too_long_ends_the_call(
    asking_server: AskingServer, tmp_path: Path
) -> None:
    import anyio

    async def slow(request: ElicitationRequest) -> ElicitationResponse:
        await anyio.sleep(30)
        return ElicitationResponse.decline()

    provider = create_mcp_tool_provider(
        asking_server.url, elicitation=slow, elicitation_timeout=0.5
    )
    async with make_app(tmp_path, "ask_then_wait", provider) as app:
        with anyio.fail_after(15), pytest.raises(FevexRunError) as raised:
            await app.run_agent("asker", "Ask me.")
        assert raised.value.code == "MCP_ELICITATION_TIMEOUT"
        run = await app.get_run(raised.value.run_id)
        assert run.status == "failed"


async def test_a_failing_handler_and_a_wrong_answer_have_a_code(
    asking_server: AskingServer, tmp_path: Path
) -> None:
    def broken(request: ElicitationRequest) -> Any:
        raise RuntimeError("password=hunter2")

    provider = create_mcp_tool_provider(asking_server.url, elicitation=broken)
    async with make_app(tmp_path, "ask_name", provider) as app:
        with pytest.raises(FevexRunError) as raised:
            await app.run_agent("asker", "Ask me.")
    assert raised.value.code == "MCP_ELICITATION_FAILED"
    assert "hunter2" not in str(raised.value)

    provider = create_mcp_tool_provider(asking_server.url, elicitation=lambda request: "yes")
    async with make_app(tmp_path / "2", "ask_name", provider) as app:
        with pytest.raises(FevexRunError) as raised:
            await app.run_agent("asker", "Ask me.")
    assert raised.value.code == "MCP_ELICITATION_FAILED"


@pytest.mark.parametrize("tool", ["ask_huge", "ask_nested"])
async def test_a_request_outside_the_restricted_form_is_refused(
    asking_server: AskingServer, tmp_path: Path, tool: str
) -> None:
    asked: list[ElicitationRequest] = []

    async def handler(request: ElicitationRequest) -> ElicitationResponse:
        asked.append(request)
        return ElicitationResponse.decline()

    provider = create_mcp_tool_provider(asking_server.url, elicitation=handler)
    async with make_app(tmp_path, tool, provider) as app:
        with pytest.raises(FevexRunError) as raised:
            await app.run_agent("asker", "Ask me.")
    assert raised.value.code == "MCP_ELICITATION_INVALID"
    assert asked == []


async def test_a_dirty_message_reaches_the_handler_clean_and_bounded(
    asking_server: AskingServer, tmp_path: Path
) -> None:
    asked: list[ElicitationRequest] = []

    async def handler(request: ElicitationRequest) -> ElicitationResponse:
        asked.append(request)
        return ElicitationResponse.decline()

    provider = create_mcp_tool_provider(asking_server.url, elicitation=handler)
    async with make_app(tmp_path, "ask_dirty", provider) as app:
        await app.run_agent("asker", "Ask me.")
    (request,) = asked
    assert len(request.message) <= 2_000
    assert request.message.startswith("Pay now")
    assert not any(char in request.message for char in "\x1b\x00\u202e\u202c")


async def test_a_flood_of_requests_is_bounded(asking_server: AskingServer, tmp_path: Path) -> None:
    async def handler(request: ElicitationRequest) -> ElicitationResponse:
        return ElicitationResponse.accept({"name": "Ada"})

    provider = create_mcp_tool_provider(asking_server.url, elicitation=handler)
    async with make_app(tmp_path, "ask_flood", provider) as app:
        with pytest.raises(FevexRunError) as raised:
            await app.run_agent("asker", "Ask me.")
    assert raised.value.code == "MCP_ELICITATION_LIMIT"
    assert asking_server.log.asked <= 9


async def test_a_stdio_server_asks_a_handler(tmp_path: Path) -> None:
    import sys

    server = Path(__file__).with_name("elicitation_stdio_server.py")

    async def handler(request: ElicitationRequest) -> ElicitationResponse:
        return ElicitationResponse.accept({"name": "Ada"})

    provider = create_mcp_tool_provider(
        command=sys.executable, args=[str(server)], inherit_env=["PATH"], elicitation=handler
    )
    # A stdio session speaks 2026-07-28: the request comes in the tool's result.
    async with provider, make_app(tmp_path, "ask_modern", provider) as app:
        result = await app.run_agent("asker", "Ask me.")
        output = await tool_output(app, result.run_id)
    assert output == {"action": "accept", "content": {"name": "Ada", "plan": "free"}}


async def test_a_2026_07_28_server_asks_in_its_result(tmp_path: Path) -> None:
    log = ElicitationLog()
    server, task, port = await serve(build_elicitation_server(log).streamable_http_app())

    async def handler(request: ElicitationRequest) -> ElicitationResponse:
        return ElicitationResponse.accept({"name": "Ada"})

    try:
        provider = create_mcp_tool_provider(f"http://127.0.0.1:{port}/mcp", elicitation=handler)
        async with make_app(tmp_path, "ask_modern", provider) as app:
            result = await app.run_agent("asker", "Ask me.")
            output = await tool_output(app, result.run_id)
    finally:
        server.should_exit = True
        await task
    assert output == {"action": "accept", "content": {"name": "Ada", "plan": "free"}}


def test_elicitation_is_a_handler_or_person() -> None:
    from fevex import FevexConfigurationError

    with pytest.raises(FevexConfigurationError) as raised:
        create_mcp_tool_provider("http://127.0.0.1:9/mcp", elicitation="robot")  # type: ignore[arg-type]
    assert raised.value.code == "MCP_FEATURE_UNSUPPORTED"
    with pytest.raises(FevexConfigurationError):
        create_mcp_tool_provider(
            "http://127.0.0.1:9/mcp", elicitation="person", elicitation_timeout=0
        )
