"""Sampling and roots, the client capabilities a provider offers only when configured:
real MCP servers over Streamable HTTP (a handshake-era session, where the server asks on
the side of a call) and stdio (a 2026 session, where it asks inside the call), agent runs
with the core's fake model as the app model, on a real SQLite store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fevex import (
    FevexConfigurationError,
    FevexRunError,
    ToolContext,
    create_fevex,
    define_agent,
    define_connection,
)
from fevex.models import ModelInput, Usage
from fevex.observability import Cost, Observability
from fevex.policies import PolicyRequest
from fevex.testing import FakeModel
from fevex_mcp import MCPRoot, MCPSampling, create_mcp_tool_provider
from fevex_sqlite import SQLiteRunStore

pytestmark = pytest.mark.anyio

ANSWER = {"output": "A lease is a claim.", "usage": {"input_tokens": 12, "output_tokens": 5}}
TOKEN = "s3cr3t-sampling-token"


class Caller(FakeModel):
    """An agent model that calls ``docs__<calls_tool>`` once, then answers "Done."."""

    def __init__(self, name: str, arguments: dict[str, Any]) -> None:
        call = {"id": "call-1", "name": f"docs__{name}", "input": arguments}
        super().__init__(
            {"tool_calls": [call], "usage": {"input_tokens": 3, "output_tokens": 2}},
            {"output": "Done.", "usage": {"input_tokens": 3, "output_tokens": 2}},
        )
        self.calls_tool = name


def calls(name: str, **arguments: Any) -> Caller:
    return Caller(name, arguments)


def app_for(
    tmp_path: Path, provider: Any, agent_model: Caller, helper: FakeModel, **options: Any
) -> Any:
    limits = options.pop("limits", None)
    tool = agent_model.calls_tool
    return create_fevex(
        models={"default": agent_model, "helper": helper},
        agents=[
            define_agent(
                name="assistant",
                instructions="Help.",
                tools=[f"docs__{tool}"],
                **({"limits": limits} if limits else {}),
            )
        ],
        connections=[define_connection(name="docs", provider=provider, allowlist=[tool])],
        run_store=SQLiteRunStore(tmp_path / "runs.sqlite"),
        **options,
    )


async def run(app: Any) -> tuple[Any, list[Any]]:
    """The run's record and its stored events, whether it completed or failed."""
    async with app:
        try:
            result = await app.run_agent("assistant", "Go.")
            run_id = result.run_id
        except FevexRunError as error:
            run_id = error.run_id or ""
        return await app.get_run(run_id), list(await app.list_events(run_id))


def tool_output(events: list[Any]) -> Any:
    (completed,) = [event for event in events if event.type == "tool.completed"]
    return completed.payload["output"]


def price(usage: Usage, model: str | None) -> Cost:
    return Cost(float((usage.input_tokens or 0) + (usage.output_tokens or 0)), "USD")


# -- sampling over Streamable HTTP --------------------------------------------------------


async def test_sampling_answers_with_the_app_model_as_a_step_of_the_run(
    sampling_server: Any, tmp_path: Path
) -> None:
    helper = FakeModel({**ANSWER, "output": "A lease is a claim. STOP and more"})
    provider = create_mcp_tool_provider(
        sampling_server.url, sampling=MCPSampling("helper", max_tokens=64)
    )
    app = app_for(
        tmp_path,
        provider,
        calls("ask", prompt="What is a lease?"),
        helper,
        observability=Observability(calculate_cost=price),
    )
    record, events = await run(app)

    assert record.status == "completed", record.error
    answer = json.loads(tool_output(events))
    # The stop sequence the server gave is applied by fevex.
    assert answer == {"text": "A lease is a claim. ", "model": "helper", "stop": "stopSequence"}
    (asked,) = helper.calls
    assert isinstance(asked, ModelInput)
    assert [(m.role, m.text) for m in asked.messages] == [
        ("system", "Be brief. [2J"),
        ("user", "What is a lease?"),
    ]
    # The server's maxTokens (100) is capped by the provider's (64); its temperature passes.
    assert asked.max_output_tokens == 64
    assert dict(asked.options) == {"temperature": 0.5}
    assert asked.tools == ()
    # The server saw sampling declared, and no roots.
    (declared,) = sampling_server.log.capabilities
    assert "sampling" in declared
    assert "roots" not in declared
    # A model step of the run: its events, usage and cost.
    sampled = [
        event
        for event in events
        if "tool_call_id" in event.payload and event.type.startswith("model.")
    ]
    assert [event.type for event in sampled] == ["model.started", "model.completed"]
    assert sampled[0].payload["tool_name"] == "docs__ask"
    assert sampled[1].payload["usage"]["output_tokens"] == 5
    assert record.usage == {"input_tokens": 18, "output_tokens": 9, "total_tokens": 27}
    assert events[-1].payload["cost"] == {"amount": 27.0, "currency": "USD"}


async def test_unconfigured_sampling_and_roots_are_not_declared_and_are_refused(
    sampling_server: Any, tmp_path: Path
) -> None:
    provider = create_mcp_tool_provider(sampling_server.url)
    context = ToolContext("run-1", "session-1", "assistant", "call-1", "docs__ask")
    async with provider:
        said = await provider.call_tool("ask", {"prompt": "Hi"}, context)
        listed = await provider.call_tool("roots", {}, context)

    assert sampling_server.log.capabilities == [{}, {}]
    assert said == "refused: Sampling not supported"
    assert listed == "refused: List roots not supported"


async def test_a_run_limit_stops_sampling_with_the_run_s_code(
    sampling_server: Any, tmp_path: Path
) -> None:
    helper = FakeModel(ANSWER, ANSWER, ANSWER)
    provider = create_mcp_tool_provider(sampling_server.url, sampling="helper")
    app = app_for(
        tmp_path, provider, calls("ask", prompt="Again?", times=3), helper, limits={"max_steps": 2}
    )
    record, events = await run(app)

    # Step 1 is the agent's, step 2 the first sampling; the second is over the limit,
    # and the call fails with it although the server carried on.
    assert record.status == "failed"
    assert record.error["code"] == "MAX_STEPS_EXCEEDED"
    assert len(helper.calls) == 1
    (failed,) = [event for event in events if event.type == "tool.failed"]
    assert failed.payload["error"]["code"] == "MAX_STEPS_EXCEEDED"


async def test_a_policy_that_denies_sampling_denies_it(
    sampling_server: Any, tmp_path: Path
) -> None:
    seen: list[PolicyRequest] = []

    def no_sampling(request: PolicyRequest) -> None:
        if request.stage == "completion":
            seen.append(request)
            raise PermissionError("not for this server")

    helper = FakeModel(ANSWER)
    provider = create_mcp_tool_provider(sampling_server.url, sampling="helper")
    app = app_for(tmp_path, provider, calls("ask", prompt="Hi"), helper, policies=[no_sampling])
    record, _ = await run(app)

    assert record.error["code"] == "POLICY_DENIED"
    assert helper.calls == []
    (request,) = seen
    assert (request.model, request.tool_name) == ("helper", "docs__ask")
    assert request.input["messages"][0]["content"][0]["text"] == "Hi"


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        ("flood", {"count": 20}, "MCP_SAMPLING_LIMIT"),
        ("huge", {}, "MCP_SAMPLING_TOO_LARGE"),
        ("picture", {}, "MCP_SAMPLING_UNSUPPORTED"),
    ],
)
async def test_a_hostile_server_s_sampling_is_bounded_with_a_stable_code(
    sampling_server: Any, tmp_path: Path, tool: str, arguments: Any, code: str
) -> None:
    helper = FakeModel(*[ANSWER] * 20)
    provider = create_mcp_tool_provider(
        sampling_server.url, sampling=MCPSampling("helper", max_requests=3)
    )
    record, events = await run(app_for(tmp_path, provider, calls(tool, **arguments), helper))

    assert record.error["code"] == code
    assert len(helper.calls) <= 3
    if tool != "flood":
        assert helper.calls == []
    steps = [event for event in events if event.type == "model.started"]
    assert len(steps) == 1 + len(helper.calls)


async def test_a_request_outside_any_call_is_refused(sampling_server: Any) -> None:
    provider = create_mcp_tool_provider(sampling_server.url, sampling="helper")
    context = ToolContext("run-1", "session-1", "assistant", "call-1", "docs__later")
    async with provider:
        assert await provider.call_tool("later", {}, context) == "asked later"
        await sampling_server.log.late_done.wait()

    assert sampling_server.log.late == ["fevex refused the request (MCP_SAMPLING_NO_CALL)."]


async def test_the_provider_s_secrets_reach_neither_the_model_nor_the_events(
    sampling_server: Any, tmp_path: Path
) -> None:
    def echo(model_input: ModelInput) -> dict[str, Any]:
        return {"output": model_input.messages[-1].text}

    helper = FakeModel(echo)
    provider = create_mcp_tool_provider(
        sampling_server.url,
        headers={"Authorization": f"Bearer {TOKEN}"},
        sampling="helper",
    )
    record, events = await run(app_for(tmp_path, provider, calls("leak"), helper))

    assert record.status == "completed"
    assert TOKEN not in helper.calls[0].messages[-1].text
    stored = json.dumps([event.to_json() for event in events])
    assert "Repeat: [redacted]" in stored
    assert TOKEN not in stored


# -- roots ----------------------------------------------------------------------------


async def test_roots_are_declared_and_listed_as_configured(
    sampling_server: Any, tmp_path: Path
) -> None:
    provider = create_mcp_tool_provider(
        sampling_server.url,
        roots=[MCPRoot(tmp_path / "work", name="Work"), "file:///srv/data%20set"],
    )
    context = ToolContext("run-1", "session-1", "assistant", "call-1", "docs__roots")
    async with provider:
        listed = json.loads(await provider.call_tool("roots", {}, context))

    assert listed == [
        {"uri": (tmp_path / "work").as_uri(), "name": "Work"},
        {"uri": "file:///srv/data%20set", "name": None},
    ]
    (declared,) = sampling_server.log.capabilities
    assert "roots" in declared
    assert "sampling" not in declared


@pytest.mark.parametrize(
    ("options", "code"),
    [
        ({"roots": ["relative/path"]}, "MCP_ROOTS_INVALID"),
        ({"roots": ["https://example.com/data"]}, "MCP_ROOTS_INVALID"),
        ({"roots": ["file://server/share"]}, "MCP_ROOTS_INVALID"),
        ({"roots": [MCPRoot("/srv", name="a\x1b[2Jb")]}, "MCP_ROOTS_INVALID"),
        ({"sampling": ""}, "MCP_SAMPLING_INVALID"),
        ({"sampling": MCPSampling("helper", max_requests=0)}, "MCP_SAMPLING_INVALID"),
        ({"sampling": 42}, "MCP_SAMPLING_INVALID"),
    ],
)
def test_bad_sampling_or_roots_configuration_has_a_stable_code(
    options: dict[str, Any], code: str
) -> None:
    with pytest.raises(FevexConfigurationError) as raised:
        create_mcp_tool_provider("http://127.0.0.1:9/mcp", **options)
    assert raised.value.code == code


# -- stdio ----------------------------------------------------------------------------


async def test_sampling_and_roots_over_stdio(python_server: Any, tmp_path: Path) -> None:
    helper = FakeModel(ANSWER)
    provider = create_mcp_tool_provider(
        command=python_server.command,
        args=python_server.args,
        inherit_env=["PATH"],
        sampling="helper",
        roots=[MCPRoot(tmp_path, name="Here")],
    )
    async with provider:
        record, events = await run(
            app_for(tmp_path, provider, calls("ask", prompt="What is a lease?"), helper)
        )
        context = ToolContext("run-1", "session-1", "assistant", "call-9", "docs__roots")
        listed = json.loads(await provider.call_tool("roots", {}, context))
        declared = json.loads(await provider.call_tool("capabilities", {}, context))

    assert record.status == "completed"
    assert json.loads(tool_output(events)) == {
        "text": "A lease is a claim.",
        "model": "helper",
        "stop": "endTurn",
    }
    assert [(m.role, m.text) for m in helper.calls[0].messages] == [
        ("system", "Be brief."),
        ("user", "What is a lease?"),
    ]
    assert record.usage["output_tokens"] == 9
    assert listed == [{"uri": tmp_path.as_uri(), "name": "Here"}]
    assert "sampling" in declared
    assert "roots" in declared


async def test_unconfigured_sampling_over_stdio_is_not_declared(
    python_server: Any, tmp_path: Path
) -> None:
    provider = create_mcp_tool_provider(
        command=python_server.command, args=python_server.args, inherit_env=["PATH"]
    )
    context = ToolContext("run-1", "session-1", "assistant", "call-1", "docs__ask")
    async with provider:
        declared = json.loads(await provider.call_tool("capabilities", {}, context))
        with pytest.raises(FevexRunError) as raised:
            await provider.call_tool("ask", {"prompt": "Hi"}, context)

    assert "sampling" not in declared
    assert "roots" not in declared
    assert raised.value.code in ("MCP_TOOL_ERROR", "MCP_PROTOCOL_ERROR")
