"""ToolContext.complete: a tool asks an app model for an answer, as a model step of its run,
checked by the app's policies and the run's limits, counted in its usage and cost, and
recorded in its events and traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fevex import (
    FevexRunError,
    ToolContext,
    create_fevex,
    define_agent,
    define_tool,
)
from fevex.events import project_run
from fevex.messages import Message
from fevex.models import ModelInput, Usage
from fevex.observability import Cost, InMemoryTraceExporter, Observability
from fevex.policies import PolicyRequest
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel
from fevex.tools import Completion

pytestmark = pytest.mark.anyio

CALL = {"id": "call-1", "name": "summarize", "input": {"text": "A lease is a claim."}}
USAGE = {"input_tokens": 10, "output_tokens": 4}
HELPER_USAGE = {"input_tokens": 7, "output_tokens": 3}


class Seen:
    completions: list[Completion]
    errors: list[str]

    def __init__(self) -> None:
        self.completions = []
        self.errors = []


def summarize_tool(seen: Seen, *, times: int = 1, swallow: bool = False) -> Any:
    @define_tool(name="summarize", description="Summarise a text.")
    async def summarize(text: str, context: ToolContext) -> str:
        answers = []
        for _ in range(times):
            try:
                completion = await context.complete(
                    [Message.user(f"Summarise: {text}")],
                    model="helper",
                    system="You summarise.",
                    max_output_tokens=50,
                    options={"temperature": 0.2},
                )
            except FevexRunError as error:
                seen.errors.append(error.code)
                if swallow:
                    return "swallowed"
                raise
            seen.completions.append(completion)
            answers.append(completion.text)
        return " / ".join(answers)

    return summarize


def app_for(
    tmp_path: Path,
    agent_model: FakeModel,
    helper: FakeModel,
    tool: Any,
    **options: Any,
) -> Any:
    limits = options.pop("limits", None)
    return create_fevex(
        models={"default": agent_model, "helper": helper},
        agents=[
            define_agent(
                name="writer",
                instructions="Write.",
                tools=["summarize"],
                **({"limits": limits} if limits else {}),
            )
        ],
        tools=[tool],
        run_store=InMemoryRunStore(),
        **options,
    )


def price(usage: Usage, model: str | None) -> Cost:
    rate = 2.0 if model == "helper" else 1.0
    return Cost(((usage.input_tokens or 0) + (usage.output_tokens or 0)) * rate, "USD")


async def test_a_completion_is_a_model_step_of_the_run_counted_priced_and_in_its_events(
    tmp_path: Path,
) -> None:
    seen = Seen()
    agent_model = FakeModel(
        {"tool_calls": [CALL], "usage": USAGE}, {"output": "Done.", "usage": USAGE}
    )
    helper = FakeModel({"output": "A claim.", "usage": HELPER_USAGE})
    exporter = InMemoryTraceExporter()
    app = app_for(
        tmp_path,
        agent_model,
        helper,
        summarize_tool(seen),
        observability=Observability(exporters=[exporter], calculate_cost=price),
    )
    async with app:
        streamed = [event async for event in app.stream_agent("writer", "Summarise it.")]
        run_id = streamed[0].run_id
        stored = await app.list_events(run_id)
        run = await app.get_run(run_id)
        await app.flush_observability()

    assert [completion.text for completion in seen.completions] == ["A claim."]
    (asked,) = helper.calls
    assert isinstance(asked, ModelInput)
    assert [message.role for message in asked.messages] == ["system", "user"]
    assert asked.messages[0].text == "You summarise."
    assert asked.tools == ()
    assert asked.max_output_tokens == 50
    assert dict(asked.options) == {"temperature": 0.2}
    # The stream carries every event, in sequence, the call's model step before its end.
    assert [event.sequence for event in streamed] == list(range(1, len(streamed) + 1))
    assert [event.to_json() for event in streamed] == [event.to_json() for event in stored]
    kinds = [event.type for event in stored]
    at = kinds.index("tool.started")
    assert kinds[at : at + 4] == [
        "tool.started",
        "model.started",
        "model.completed",
        "tool.completed",
    ]
    started, completed = stored[at + 1], stored[at + 2]
    assert started.payload == {
        "step": 2,
        "model": "helper",
        "tool_call_id": "call-1",
        "tool_name": "summarize",
    }
    assert completed.payload["output"] == "A claim."
    assert completed.payload["usage"] == {**HELPER_USAGE, "total_tokens": 10}
    assert completed.payload["cost"] == {"amount": 20.0, "currency": "USD"}
    # The run's usage and cost count it; the agent's next step is step 3.
    assert run.usage == {"input_tokens": 27, "output_tokens": 11, "total_tokens": 38}
    assert stored[-1].payload["cost"] == {"amount": 48.0, "currency": "USD"}
    assert [e.payload["step"] for e in stored if e.type == "model.started"] == [1, 2, 3]
    # The conversation holds the agent's steps only.
    view = project_run(stored)
    assert [message.role for message in view.messages] == ["user", "assistant", "tool", "assistant"]
    assert [message.text for message in view.messages if message.role == "assistant"] == [
        "",
        "Done.",
    ]
    assert view.turn is not None
    assert view.turn.usage.total_tokens == 38
    # Its span is a child of the tool call's.
    tool_span = next(span for span in exporter.spans if span.kind == "tool")
    helper_span = next(
        span for span in exporter.spans if span.attributes.get("fevex.model.step") == 2
    )
    assert helper_span.parent_span_id == tool_span.span_id
    assert helper_span.attributes["gen_ai.usage.output_tokens"] == 3


async def test_the_run_s_step_limit_stops_a_completion_and_fails_the_call_even_if_caught(
    tmp_path: Path,
) -> None:
    seen = Seen()
    agent_model = FakeModel({"tool_calls": [CALL], "usage": USAGE}, {"output": "Done."})
    helper = FakeModel(*[{"output": "A claim.", "usage": HELPER_USAGE}] * 3)
    app = app_for(
        tmp_path,
        agent_model,
        helper,
        summarize_tool(seen, times=3, swallow=True),
        limits={"max_steps": 2},
    )
    async with app:
        with pytest.raises(FevexRunError) as raised:
            await app.run_agent("writer", "Summarise it.")
        events = await app.list_events(raised.value.run_id or "")

    assert raised.value.code == "MAX_STEPS_EXCEEDED"
    assert seen.errors == ["MAX_STEPS_EXCEEDED"]
    assert len(helper.calls) == 1
    failed = next(event for event in events if event.type == "tool.failed")
    assert failed.payload["error"]["code"] == "MAX_STEPS_EXCEEDED"


async def test_the_output_token_budget_caps_a_completion_and_then_stops_it(
    tmp_path: Path,
) -> None:
    seen = Seen()
    agent_model = FakeModel({"tool_calls": [CALL], "usage": USAGE}, {"output": "Done."})
    helper = FakeModel({"output": "A claim.", "usage": {"input_tokens": 1, "output_tokens": 4}})
    app = app_for(
        tmp_path,
        agent_model,
        helper,
        summarize_tool(seen, times=2),
        limits={"max_output_tokens": 8},
    )
    async with app:
        with pytest.raises(FevexRunError) as raised:
            await app.run_agent("writer", "Summarise it.")

    # 4 of 8 spent by the agent's first step: the completion may use the other 4.
    assert helper.calls[0].max_output_tokens == 4
    assert raised.value.code == "MAX_OUTPUT_TOKENS_EXCEEDED"
    assert seen.errors == ["MAX_OUTPUT_TOKENS_EXCEEDED"]


async def test_a_policy_sees_the_completion_and_its_denial_fails_the_call(tmp_path: Path) -> None:
    seen = Seen()
    asked: list[PolicyRequest] = []

    def no_helper(request: PolicyRequest) -> None:
        if request.stage == "completion":
            asked.append(request)
            raise PermissionError("no completions here")

    agent_model = FakeModel({"tool_calls": [CALL], "usage": USAGE}, {"output": "Done."})
    helper = FakeModel({"output": "A claim."})
    app = app_for(
        tmp_path, agent_model, helper, summarize_tool(seen, swallow=True), policies=[no_helper]
    )
    async with app:
        with pytest.raises(FevexRunError) as raised:
            await app.run_agent("writer", "Summarise it.")

    assert raised.value.code == "POLICY_DENIED"
    assert helper.calls == []
    (request,) = asked
    assert (request.model, request.tool_name, request.tool_call_id) == (
        "helper",
        "summarize",
        "call-1",
    )
    assert request.input["system"] == "You summarise."
    assert request.input["messages"][0]["content"][0]["text"].startswith("Summarise:")


async def test_an_unknown_model_or_a_malformed_request_is_the_tool_s_error(tmp_path: Path) -> None:
    @define_tool(name="summarize", description="Summarise a text.")
    async def summarize(text: str, context: ToolContext) -> list[str]:
        codes = []
        for ask in (
            context.complete("Hi", model="nowhere"),
            context.complete([Message.system("Obey.")], model="helper"),
            context.complete("Hi", model="helper", max_output_tokens=0),
        ):
            try:
                await ask
            except FevexRunError as error:
                codes.append(error.code)
        return codes

    agent_model = FakeModel({"tool_calls": [CALL]}, {"output": "Done."})
    app = app_for(tmp_path, agent_model, FakeModel(), summarize)
    async with app:
        result = await app.run_agent("writer", "Summarise it.")
        events = await app.list_events(result.run_id)

    completed = next(event for event in events if event.type == "tool.completed")
    assert completed.payload["output"] == [
        "MISSING_MODEL",
        "COMPLETION_INVALID",
        "COMPLETION_INVALID",
    ]


async def test_outside_an_agent_run_a_context_cannot_complete() -> None:
    context = ToolContext("run", "session", "agent", "call", "tool")
    with pytest.raises(FevexRunError) as raised:
        await context.complete("Hi")
    assert raised.value.code == "COMPLETION_UNAVAILABLE"
