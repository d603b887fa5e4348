"""MCP elicitation answered by a person: the run lists a pending input while the tool
call waits with its MCP session alive, and the answer comes from another app sharing the
SQLite store (through the Python API, or the HTTP protocol served by uvicorn), never
through this app's memory."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from elicitation_servers import (
    AskingServer,
    asking_server_fixture,  # noqa: F401 (the asking_server fixture)
    serve,
    tool_output,
)

from fevex import (
    AgentRun,
    FevexRunError,
    PendingInput,
    create_fevex,
    define_agent,
    define_connection,
)
from fevex.http import AsyncFevexClient, create_http_app
from fevex.runtime import ExecutionContext
from fevex.testing import FakeModel
from fevex_mcp import create_mcp_tool_provider

pytestmark = pytest.mark.anyio


def make_app(store: str, provider: Any = None, *, timeout: float = 30.0) -> Any:
    model = FakeModel(
        {"tool_calls": [{"id": "call-1", "name": "asking__ask_name", "input": {}}]},
        {"output": "done"},
    )
    connections = []
    if provider is not None:
        connections = [
            define_connection(
                name="asking", provider=provider, allowlist=["ask_name"], timeout=timeout
            )
        ]
    return create_fevex(
        models={"default": model},
        agents=[
            define_agent(
                name="asker",
                instructions="Ask.",
                tools=["asking__ask_name"] if provider is not None else [],
            )
        ],
        connections=connections,
        run_store=store,
    )


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


async def pending(app: Any, run_id: str) -> PendingInput:
    with anyio.fail_after(20):
        while True:
            run = await app.get_run(run_id)
            if run.inputs:
                (found,) = run.inputs
                return found  # type: ignore[no-any-return]
            assert run.status == "running"
            await asyncio.sleep(0.05)


async def ended(app: Any, run_id: str) -> AgentRun:
    with anyio.fail_after(20):
        while True:
            run = await app.get_run(run_id)
            if run.status != "running":
                return run  # type: ignore[no-any-return]
            await asyncio.sleep(0.05)


@pytest.fixture
async def asking_app(asking_server: AskingServer, store: str) -> AsyncIterator[Any]:
    provider = create_mcp_tool_provider(asking_server.url, elicitation="person")
    # A connection timeout shorter than the person takes: the wait does not count.
    async with make_app(store, provider, timeout=3.0) as app:
        yield app


async def test_a_person_answers_from_another_app_through_the_python_api(
    asking_server: AskingServer,
    asking_app: Any,
    store: str,
) -> None:
    started = await asking_app.start_agent("asker", "Ask me.")
    request = await pending(asking_app, started.id)
    assert (request.kind, request.message) == ("elicitation", "What is your name?")
    assert request.schema["required"] == ["name"]
    assert (request.connection, request.tool_name, request.tool_call_id) == (
        "asking",
        "asking__ask_name",
        "call-1",
    )
    assert request.expires_at is not None
    assert request.run_id == started.id
    await asyncio.sleep(3.5)  # longer than the connection's timeout
    async with make_app(store) as other:
        seen = await other.get_run(started.id)
        assert seen.status == "running"
        assert seen.inputs == (request,)
        with pytest.raises(FevexRunError) as refused:
            await other.resume_run(started.id, request.answer(content={"name": 7}, actor="ops"))
        assert refused.value.code == "INPUT_INVALID"
        answered = await other.resume_run(
            started.id, request.answer(content={"name": "Ada"}, actor="ops")
        )
        assert answered.inputs == ()
        with pytest.raises(FevexRunError) as again:
            await other.resume_run(started.id, request.decline(actor="ops"))
        assert again.value.code == "INPUT_NOT_PENDING"
    run = await ended(asking_app, started.id)
    assert run.status == "completed"
    assert run.pause is None
    output = await tool_output(asking_app, started.id)
    assert output == {"action": "accept", "content": {"name": "Ada", "plan": "free"}}
    events = await asking_app.list_events(started.id)
    types = [event.type for event in events]
    assert types.index("input.requested") < types.index("input.answered")
    (answered_event,) = [event for event in events if event.type == "input.answered"]
    assert answered_event.payload["actor"] == {"id": "ops"}
    assert "Ada" not in json.dumps(answered_event.payload)


async def test_a_person_answers_through_the_http_protocol(
    asking_server: AskingServer,
    asking_app: Any,
    store: str,
) -> None:
    started = await asking_app.start_agent("asker", "Ask me.")
    await pending(asking_app, started.id)

    def authenticate(request: Any) -> ExecutionContext:
        return ExecutionContext(actor={"id": "ops"})

    async with make_app(store) as other:
        http_app = create_http_app(other, authenticate=authenticate)
        server, task, port = await serve(http_app)
        try:
            async with AsyncFevexClient(f"http://127.0.0.1:{port}") as client:
                run = await client.get_run(started.id)
                (request,) = run.inputs
                assert request.message == "What is your name?"
                answered = await client.resume_run(
                    started.id, input_id=request.id, action="decline"
                )
                assert answered.inputs == ()
                with pytest.raises(FevexRunError) as again:
                    await client.resume_run(
                        started.id, input_id=request.id, action="accept", content={"name": "x"}
                    )
                assert again.value.code == "INPUT_NOT_PENDING"
        finally:
            server.should_exit = True
            await task
    assert (await ended(asking_app, started.id)).status == "completed"
    assert await tool_output(asking_app, started.id) == {"action": "decline", "content": None}


async def test_an_unanswered_request_ends_the_call_with_a_code(
    asking_server: AskingServer,
    store: str,
) -> None:
    provider = create_mcp_tool_provider(
        asking_server.url, elicitation="person", elicitation_timeout=0.5
    )
    async with make_app(store, provider) as app:
        with anyio.fail_after(20), pytest.raises(FevexRunError) as raised:
            await app.run_agent("asker", "Ask me.")
        assert raised.value.code == "MCP_ELICITATION_TIMEOUT"
        run = await app.get_run(raised.value.run_id)
        assert run.status == "failed"
        assert run.inputs == ()
        types = [event.type for event in await app.list_events(run.id)]
        assert "input.expired" in types
        requested = [event for event in await app.list_events(run.id)]
        (shown,) = [event for event in requested if event.type == "input.requested"]
        late = PendingInput.from_json(shown.payload, run.id)
        with pytest.raises(FevexRunError) as refused:
            await app.resume_run(run.id, late.answer(content={"name": "Ada"}, actor="ops"))
        assert refused.value.code == "INPUT_NOT_PENDING"
    assert asking_server.log.answers == [{"action": "cancel", "content": None}]


async def test_a_cancelled_run_stops_waiting_and_refuses_the_answer(
    asking_server: AskingServer,
    asking_app: Any,
) -> None:
    started = await asking_app.start_agent("asker", "Ask me.")
    request = await pending(asking_app, started.id)
    cancelled = await asking_app.cancel_run(started.id)
    assert cancelled.status == "cancelled"
    assert cancelled.inputs == ()
    with pytest.raises(FevexRunError) as refused:
        await asking_app.resume_run(started.id, request.answer(content={"name": "A"}, actor="o"))
    assert refused.value.code == "INPUT_NOT_PENDING"
