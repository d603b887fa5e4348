"""A whole agent run: ``openai:gpt-test`` resolved through the entry point, a tool call,
and a structured answer, against the loopback server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import pytest
from openai_loopback import TEST_API_KEY, ChatChunks, LoopbackServer, ResponseEvents
from pydantic import BaseModel, ConfigDict

from fevex import create_fevex, define_agent, define_tool
from fevex.plugins import reset_plugins
from fevex_openai import OpenAIModel, OpenAIProvider, create_openai

pytestmark = pytest.mark.anyio


class AccountQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    account_id: int


class Account(BaseModel):
    id: int
    status: str


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: str


@define_tool(name="accounts_get", description="Get an account by ID.")
async def get_account(query: AccountQuery) -> Account:
    return Account(id=query.account_id, status="active")


@pytest.fixture
async def built_models(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[list[OpenAIModel]]:
    """Every model built during the test, closed at its end: ``app.close()`` closes the
    run store but not the models it resolved, so their HTTP connections are closed here."""
    built: list[OpenAIModel] = []
    build = OpenAIProvider.__call__

    def tracked(provider: OpenAIProvider, model_name: str) -> OpenAIModel:
        model = build(provider, model_name)
        built.append(model)
        return model

    monkeypatch.setattr(OpenAIProvider, "__call__", tracked)
    yield built
    for model in built:
        await model.aclose()


@pytest.fixture
def openai_environment(
    server: LoopbackServer,
    monkeypatch: pytest.MonkeyPatch,
    built_models: list[OpenAIModel],
) -> Iterator[LoopbackServer]:
    monkeypatch.setenv("OPENAI_API_KEY", TEST_API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.delenv("FEVEX_PLUGINS", raising=False)
    monkeypatch.delenv("FEVEX_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("FEVEX_RUN_STORE", raising=False)
    reset_plugins()
    yield server
    reset_plugins()


async def test_an_agent_on_openai_calls_a_tool_and_answers(
    openai_environment: LoopbackServer, built_models: list[OpenAIModel]
) -> None:
    server = openai_environment
    server.respond(
        ResponseEvents("resp_1")
        .reasoning("I should look up account 42.")
        .function_call("call_42", "accounts_get", '{"account_', 'id": 42}')
        .completed(40, 12, reasoning=8)
        .scripted(),
        ResponseEvents("resp_2")
        .message('{"answer": ', '"Account 42 is active."}')
        .completed(60, 9, cached=32)
        .scripted(),
    )
    app = create_fevex(
        agents=[
            define_agent(
                name="support",
                instructions="Answer account questions clearly.",
                model="openai:gpt-test",
                tools=["accounts_get"],
                output_schema=Answer,
                model_options={"temperature": 0},
            )
        ],
        tools=[get_account],
    )
    try:
        result = await app.run_agent("support", input="What is the status of account 42?")
    finally:
        await app.close()

    assert result.output == Answer(answer="Account 42 is active.")
    [model] = built_models  # resolved from "openai:gpt-test" through the entry point
    assert (model.model_name, model.settings.base_url) == ("gpt-test", server.base_url)
    assert [event.type for event in result.events] == [
        "run.started",
        "model.started",
        "model.block.started",  # the tool call's block and its streamed arguments
        "model.tool_input.delta",
        "model.tool_input.delta",
        "model.block.stopped",
        "model.completed",
        "tool.started",
        "tool.completed",
        "model.started",
        "model.block.started",  # the answer's text block
        "model.output.delta",
        "model.output.delta",
        "model.block.stopped",
        "model.completed",
        "run.completed",
    ]
    assert result.usage.input_tokens == 100
    assert result.usage.output_tokens == 21
    assert result.usage.cached_input_tokens == 32
    assert result.usage.reasoning_tokens == 8

    first, second = (request.json for request in server.requests)
    assert first["model"] == "gpt-test"
    assert first["temperature"] == 0
    assert first["tools"][0]["name"] == "accounts_get"
    assert first["tools"][0]["strict"] is True
    assert first["text"]["format"]["strict"] is True
    assert first["input"][0] == {"role": "system", "content": "Answer account questions clearly."}
    # The second step replays the reasoning and the call, then the tool's output.
    kinds = [item.get("type") for item in second["input"]]
    assert kinds[-3:] == ["reasoning", "function_call", "function_call_output"]
    output = second["input"][-1]
    assert output["call_id"] == "call_42"
    assert json.loads(output["output"]) == {"id": 42, "status": "active"}


async def test_an_agent_on_an_openai_compatible_chat_server(server: LoopbackServer) -> None:
    server.respond(
        ChatChunks()
        .tool_call(0, "call_1", "accounts_get", '{"account_id":', " 7}")
        .finish("tool_calls")
        .usage()
        .scripted(),
        ChatChunks().content("Account 7 ", "is active.").finish().usage().scripted(),
    )
    local = create_openai(api_key="unused", base_url=server.base_url, api="chat")("llama-3")
    app = create_fevex(
        models={"local": local},
        agents=[
            define_agent(
                name="support",
                instructions="Answer briefly.",
                model="local",
                tools=["accounts_get"],
            )
        ],
        tools=[get_account],
    )
    try:
        result = await app.run_agent("support", input="Status of account 7?")
    finally:
        await app.close()
        await local.aclose()
    assert result.output == "Account 7 is active."
    messages = server.requests[1].json["messages"]
    assert messages[-2]["tool_calls"][0]["id"] == "call_1"
    assert messages[-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": '{"id": 7, "status": "active"}',
    }
