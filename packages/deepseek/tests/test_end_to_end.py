"""A whole agent run on ``deepseek:deepseek-v4-flash``: model, tool, model, with thinking."""

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel, ConfigDict

from fevex import create_fevex, define_agent, define_tool
from fevex_deepseek import create_deepseek

pytestmark = pytest.mark.anyio


class AccountQuery(BaseModel):
    # Closed objects are what DeepSeek's strict tools accept.
    model_config = ConfigDict(extra="forbid")
    account_id: int


class Account(BaseModel):
    id: int
    status: str


class Answer(BaseModel):
    answer: str


@define_tool(name="accounts_get", description="Get an account by ID.")
async def get_account(query: AccountQuery) -> Account:
    return Account(id=query.account_id, status="active")


@pytest.fixture
async def plugin_models_closed(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    """Close what the plugin's factory opened: fevex apps do not close their models."""
    import fevex_deepseek.plugin as plugin

    opened: list[Any] = []

    def tracked(model_name: str, **options: Any) -> Any:
        model = create_deepseek(**options)(model_name)
        opened.append(model)
        return model

    monkeypatch.setattr(plugin, "create_deepseek_model", tracked)
    yield
    for model in opened:
        await model.aclose()


@pytest.mark.usefixtures("fresh_plugins", "plugin_models_closed")
async def test_a_tool_run_resolved_through_the_entry_point_sends_thinking_back(
    deepseek_server: Any, wire: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "test")
    monkeypatch.setenv("DEEPSEEK_BASE_URL", deepseek_server.url)
    deepseek_server.stream(
        wire.chunk(role="assistant", reasoning="I need account 42; "),
        wire.chunk(reasoning="call the tool."),
        wire.chunk(tool_calls=[wire.call_start(0, "call_0", "accounts_get", '{"account_')]),
        wire.chunk(tool_calls=[wire.call_more(0, 'id": 42}')]),
        wire.chunk(finish_reason="tool_calls"),
        wire.usage_only(wire.usage(prompt=40, completion=20)),
    )
    deepseek_server.stream(
        wire.chunk(role="assistant", reasoning="The tool says active."),
        wire.chunk(content="Account 42 "),
        wire.chunk(content="is active."),
        wire.chunk(finish_reason="stop", usage=wire.usage(prompt=70, completion=10)),
    )
    app = create_fevex(
        agents=[
            define_agent(
                name="support",
                instructions="Answer account questions clearly.",
                model="deepseek:deepseek-v4-flash",
                tools=["accounts_get"],
            )
        ],
        tools=[get_account],
    )

    result = await app.run_agent("support", input="What is the status of account 42?")

    assert result.output == "Account 42 is active."
    assert result.usage.input_tokens == 110
    assert [e.payload["stop_reason"] for e in result.events if e.type == "model.completed"] == [
        "tool_use",
        "end_turn",
    ]
    assert [e.type for e in result.events] == [
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
    first, second = deepseek_server.requests
    assert [first.path, second.path] == ["/beta/chat/completions"] * 2
    assert first.headers["authorization"] == "Bearer test"
    assert first.body["tools"][0]["function"]["strict"] is True
    assert first.body["model"] == "deepseek-v4-flash"
    messages = second.body["messages"]
    assert messages[0]["role"] == "system"
    assert messages[-2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "accounts_get", "arguments": '{"account_id": 42}'},
            }
        ],
        "reasoning_content": "I need account 42; call the tool.",
    }
    assert messages[-1]["role"] == "tool"
    assert messages[-1]["tool_call_id"] == "call_0"
    assert '"active"' in messages[-1]["content"]


async def test_best_effort_structured_output_is_validated_by_the_runtime(
    deepseek_server: Any, wire: Any
) -> None:
    model = create_deepseek(
        api_key="test", base_url=deepseek_server.url, schema_policy="best-effort"
    )("deepseek-v4-flash")
    deepseek_server.stream(
        wire.chunk(content='{"answer": '),
        wire.chunk(content='"Account 42 is active."}'),
        wire.chunk(finish_reason="stop", usage=wire.usage()),
    )
    app = create_fevex(
        models={"default": model},
        agents=[define_agent(name="support", instructions="Answer.", output_schema=Answer)],
    )
    try:
        result = await app.run_agent("support", input="Status of 42?")
    finally:
        await model.aclose()

    assert result.output == Answer(answer="Account 42 is active.")
    assert deepseek_server.bodies[0]["response_format"] == {"type": "json_object"}


EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "deepseek_agent.py"
needs_example = pytest.mark.skipif(not EXAMPLE.is_file(), reason="outside the monorepo")


def _run_example(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FEVEX_", "DEEPSEEK_"))}
    return subprocess.run(
        [sys.executable, str(EXAMPLE)],
        capture_output=True,
        text=True,
        env={**clean, **env},
        timeout=120,
        check=False,
    )


@needs_example
async def test_the_example_runs_against_a_deepseek_endpoint(
    deepseek_server: Any, wire: Any
) -> None:
    deepseek_server.stream(
        wire.chunk(reasoning="Look it up."),
        wire.chunk(tool_calls=[wire.call_start(0, "call_0", "accounts_get", '{"account_id": 42}')]),
        wire.chunk(finish_reason="tool_calls", usage=wire.usage()),
    )
    deepseek_server.stream(
        wire.chunk(reasoning="Active."),
        wire.chunk(content="Account 42 is active."),
        wire.chunk(finish_reason="stop", usage=wire.usage()),
    )

    completed = await anyio.to_thread.run_sync(
        lambda: _run_example(DEEPSEEK_API_KEY="test", DEEPSEEK_BASE_URL=deepseek_server.url)
    )

    assert completed.returncode == 0, completed.stderr
    assert "[tool.completed]" in completed.stdout
    assert "Account 42 is active." in completed.stdout
    assert [r.path for r in deepseek_server.requests] == ["/beta/chat/completions"] * 2


@needs_example
def test_the_example_explains_what_to_set_without_a_key() -> None:
    completed = _run_example()

    assert completed.returncode == 0, completed.stderr
    assert "DEEPSEEK_API_KEY" in completed.stdout
    # Both installs: fevex may come from an index or from a checkout.
    assert 'pip install "fevex[deepseek]"' in completed.stdout
    assert "in a checkout: pip install ./packages/openai ./packages/deepseek" in completed.stdout


@needs_example
def test_the_example_reports_an_unreachable_endpoint_in_one_line() -> None:
    import socket

    with socket.socket() as probe:  # a loopback port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    completed = _run_example(DEEPSEEK_API_KEY="test", DEEPSEEK_BASE_URL=f"http://127.0.0.1:{port}")

    assert completed.returncode == 1
    assert "Traceback" not in completed.stderr
    assert completed.stderr.count("\n") == 1, completed.stderr
    assert completed.stderr.startswith("error: [PROVIDER_NETWORK_ERROR]")
