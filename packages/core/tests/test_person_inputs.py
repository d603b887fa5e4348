"""A tool asks a person for input: the run lists the pending input while the call waits,
and an answer given through the blocking API reaches the call; a request nobody can ask
(a tool outside an agent run) has its code."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from fevex import (
    AgentRun,
    FevexRunError,
    PendingInput,
    ToolContext,
    create_fevex,
    define_agent,
    define_tool,
)
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@define_tool(name="ask_name", description="Ask a person for a name.")
async def ask_name(context: ToolContext) -> dict[str, Any]:
    answer = await context.request_input("Which name?", schema=SCHEMA, timeout=30)
    return {"action": answer.action, "content": dict(answer.content or {})}


def make_app() -> Any:
    model = FakeModel(
        {"tool_calls": [{"id": "call-1", "name": "ask_name", "input": {}}]}, {"output": "done"}
    )
    return create_fevex(
        models={"default": model},
        agents=[define_agent(name="asker", instructions="Ask.", tools=[ask_name])],
        run_store=InMemoryRunStore(),
    )


async def pending(app: Any, run_id: str) -> PendingInput:
    async with asyncio.timeout(10):
        while True:
            run: AgentRun = await app.get_run(run_id)
            if run.inputs:
                return run.inputs[0]
            await asyncio.sleep(0.02)


async def ended(app: Any, run_id: str) -> AgentRun:
    async with asyncio.timeout(10):
        while True:
            run: AgentRun = await app.get_run(run_id)
            if run.status != "running":
                return run
            await asyncio.sleep(0.02)


async def test_an_answer_through_the_blocking_api_reaches_the_waiting_call() -> None:
    app = make_app()
    started = await app.start_agent("asker", "Ask me.")
    request = await pending(app, started.id)
    assert (request.message, request.tool_name, request.tool_call_id) == (
        "Which name?",
        "ask_name",
        "call-1",
    )
    answer = request.answer(content={"name": "Ada"}, actor="ops")
    answered = await asyncio.to_thread(app.resume_run_sync, started.id, answer)
    assert isinstance(answered, AgentRun)
    assert answered.inputs == ()
    run = await ended(app, started.id)
    assert run.status == "completed"
    events = await app.list_events(started.id)
    (completed,) = [event for event in events if event.type == "tool.completed"]
    assert completed.payload["output"] == {"action": "accept", "content": {"name": "Ada"}}
    with pytest.raises(FevexRunError) as again:
        await asyncio.to_thread(app.resume_run_sync, started.id, request.decline(actor="ops"))
    assert again.value.code == "INPUT_NOT_PENDING"


async def test_a_tool_outside_an_agent_run_cannot_ask() -> None:
    context = ToolContext("run-1", "session-1", "asker", "call-1", "ask_name")
    with pytest.raises(FevexRunError) as caught:
        await context.request_input("Which name?", schema=SCHEMA, timeout=1)
    assert caught.value.code == "INPUT_UNAVAILABLE"
