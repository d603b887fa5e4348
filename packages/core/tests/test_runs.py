"""The bounded loop: model, sequential tools, model; validation and limits."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic import BaseModel, Field

from fevex import (
    Fevex,
    FevexRunError,
    Limits,
    Message,
    ToolContext,
    create_fevex,
    define_agent,
    define_tool,
)
from fevex.messages import ImagePart, TextPart, ThinkingPart, ToolResultPart
from fevex.models import Completed, ModelInput, ModelResult, OutputDelta, Usage
from fevex.runtime import ExecutionContext, InMemoryRunStore
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio


class AccountQuery(BaseModel):
    account_id: int


class Account(BaseModel):
    id: int
    status: str


class Answer(BaseModel):
    answer: str


executed: list[int] = []


@define_tool(name="accounts_get", description="Get an account by ID.")
async def get_account(query: AccountQuery) -> Account:
    executed.append(query.account_id)
    return Account(id=query.account_id, status="active")


@pytest.fixture(autouse=True)
def _reset_executed() -> None:
    executed.clear()


def call(
    call_id: str = "call-1", account_id: Any = 42, name: str = "accounts_get"
) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "input": {"account_id": account_id}}]}


def make_app(model: Any, *, tools: list[Any] | None = None, **agent_fields: Any) -> Fevex:
    fields: dict[str, Any] = {
        "name": "support",
        "instructions": "Answer account questions clearly.",
        "tools": [t.name for t in (tools or [get_account])],
    }
    fields.update(agent_fields)
    return create_fevex(
        models={"default": model},
        agents=[define_agent(**fields)],
        tools=tools or [get_account],
        run_store=InMemoryRunStore(),
    )


async def failure(app: Fevex, input: Any = "question") -> tuple[FevexRunError, list[Any]]:
    seen: list[Any] = []
    with pytest.raises(FevexRunError) as caught:
        async for event in app.stream_agent("support", input):
            seen.append(event)
    return caught.value, seen


async def test_the_design_example_returns_the_validated_value() -> None:
    model = FakeModel(call(), {"output": {"answer": "Account 42 is active."}})
    app = make_app(model, output_schema=Answer)
    result = await app.run_agent("support", input="What is the status of account 42?")
    assert isinstance(result.output, Answer)
    assert result.output.answer == "Account 42 is active."
    assert [e.type for e in result.events] == [
        "run.started",
        "model.started",
        "model.completed",
        "tool.started",
        "tool.completed",
        "model.started",
        "model.output.delta",
        "model.completed",
        "run.completed",
    ]
    assert [e.sequence for e in result.events] == list(range(1, 10))
    assert len({e.id for e in result.events}) == 9
    assert {e.run_id for e in result.events} == {result.run_id}
    assert executed == [42]
    tool_completed = result.events[4].payload
    assert tool_completed == {
        "step": 1,
        "tool_call_id": "call-1",
        "tool_name": "accounts_get",
        "output": {"id": 42, "status": "active"},
    }
    second_input = model.calls[1]
    assert second_input.messages[-1].role == "tool"
    assert second_input.messages[-1].content == (
        ToolResultPart("call-1", "accounts_get", {"id": 42, "status": "active"}),
    )
    assert second_input.tools[0].input_schema["properties"]["account_id"]["type"] == "integer"
    assert second_input.tools[0].input_schema["additionalProperties"] is False
    assert second_input.output_schema is not None
    assert second_input.output_schema["required"] == ["answer"]
    run = await app.get_run(result.run_id)
    assert run.status == "completed"
    assert run.output == {"answer": "Account 42 is active."}


async def test_structured_output_may_arrive_as_json_text() -> None:
    model = FakeModel({"output": json.dumps({"answer": "yes"})}, chunk_size=3)
    result = await make_app(model, tools=[get_account], output_schema=Answer).run_agent(
        "support", "q"
    )
    assert result.output == Answer(answer="yes")


async def test_text_output_without_schema_is_the_streamed_text() -> None:
    model = FakeModel({"output": "Hello there", "usage": {"input_tokens": 3, "output_tokens": 2}})
    result = await make_app(model).run_agent("support", "hi")
    assert result.output == "Hello there"
    assert result.usage == Usage(input_tokens=3, output_tokens=2)


async def test_tool_input_is_validated_before_the_tool_runs() -> None:
    app = make_app(FakeModel(call(account_id="not a number")))
    error, events = await failure(app)
    assert error.code == "TOOL_INPUT_INVALID"
    assert executed == []
    assert [e.type for e in events][-2:] == ["tool.failed", "run.failed"]
    assert events[-2].payload["error"]["code"] == "TOOL_INPUT_INVALID"


async def test_tool_output_is_validated_before_it_reaches_the_model() -> None:
    @define_tool(name="broken", description="Returns the wrong shape.")
    async def broken(query: AccountQuery) -> Account:
        return {"id": "x"}  # type: ignore[return-value]

    model = FakeModel(call(name="broken"), {"output": "never"})
    error, _ = await failure(make_app(model, tools=[broken]))
    assert error.code == "TOOL_OUTPUT_INVALID"
    assert len(model.calls) == 1


async def test_a_tool_that_raises_fails_the_run_with_its_message() -> None:
    @define_tool(name="flaky", description="Fails.")
    def flaky(query: AccountQuery) -> Account:
        raise RuntimeError("backend down")

    error, events = await failure(make_app(FakeModel(call(name="flaky")), tools=[flaky]))
    assert error.code == "TOOL_FAILED"
    assert "backend down" in error.message
    run_failed = events[-1]
    assert run_failed.type == "run.failed"
    assert run_failed.payload["error"]["code"] == "TOOL_FAILED"


async def test_sync_tools_run_and_receive_their_context() -> None:
    contexts: list[ToolContext] = []

    @define_tool(name="ctx", description="Sees its context.")
    def ctx(query: AccountQuery, context: ToolContext) -> dict[str, Any]:
        contexts.append(context)
        return {"ok": True}

    app = make_app(FakeModel(call(name="ctx"), {"output": "done"}), tools=[ctx])
    result = await app.run_agent("support", "q")
    assert result.output == "done"
    (context,) = contexts
    assert (context.run_id, context.session_id, context.tool_call_id, context.tool_name) == (
        result.run_id,
        result.session_id,
        "call-1",
        "ctx",
    )
    assert context.agent_name == "support"
    assert context.cancelled is False


async def test_repeated_tool_call_ids_are_rejected_before_the_effect() -> None:
    model = FakeModel(call("same"), call("same", account_id=7))
    error, _ = await failure(make_app(model))
    assert error.code == "DUPLICATE_TOOL_CALL_ID"
    assert executed == [42]


async def test_a_tool_the_agent_does_not_have_is_refused() -> None:
    error, _ = await failure(make_app(FakeModel(call(name="delete_everything"))))
    assert error.code == "TOOL_NOT_AVAILABLE"


async def test_default_step_limit_is_eight_model_steps() -> None:
    model = FakeModel(*(call(f"c{i}") for i in range(20)))
    error, _ = await failure(make_app(model, limits=Limits(max_tool_calls=None)))
    assert error.code == "MAX_STEPS_EXCEEDED"
    assert len(model.calls) == 8


async def test_default_tool_call_limit_is_sixteen() -> None:
    many = {
        "tool_calls": [
            {"id": f"c{i}", "name": "accounts_get", "input": {"account_id": i}} for i in range(20)
        ]
    }
    error, _ = await failure(make_app(FakeModel(many)))
    assert error.code == "MAX_TOOL_CALLS_EXCEEDED"
    assert executed == list(range(16))


async def test_unlimited_steps_with_none() -> None:
    model = FakeModel(*(call(f"c{i}") for i in range(10)), {"output": "done"})
    app = make_app(model, limits={"max_steps": None, "max_tool_calls": None})
    assert (await app.run_agent("support", "q")).output == "done"
    assert len(model.calls) == 11


def usage(input_tokens: int | None, output_tokens: int | None) -> dict[str, int | None]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens}


async def test_input_token_budget_is_cumulative() -> None:
    model = FakeModel({**call(), "usage": usage(60, 1)}, {"output": "done", "usage": usage(60, 1)})
    error, events = await failure(make_app(model, limits={"max_input_tokens": 100}))
    assert error.code == "MAX_INPUT_TOKENS_EXCEEDED"
    assert events[-2].type == "model.completed"
    assert events[-2].payload["total_usage"]["input_tokens"] == 120


async def test_remaining_output_budget_is_sent_as_a_preventive_cap() -> None:
    model = FakeModel({**call(), "usage": usage(1, 30)}, {"output": "ok", "usage": usage(1, 5)})
    app = make_app(model, limits={"max_output_tokens": 100})
    assert (await app.run_agent("support", "q")).output == "ok"
    assert [c.max_output_tokens for c in model.calls] == [100, 70]


async def test_output_budget_exceeded() -> None:
    model = FakeModel({"output": "long answer", "usage": usage(1, 150)})
    error, _ = await failure(make_app(model, limits={"max_output_tokens": 100}))
    assert error.code == "MAX_OUTPUT_TOKENS_EXCEEDED"


async def test_a_limited_token_figure_must_be_reported() -> None:
    model = FakeModel({"output": "ok", "usage": usage(None, 3)})
    error, _ = await failure(make_app(model, limits={"max_input_tokens": 100}))
    assert error.code == "USAGE_NOT_REPORTED"
    unlimited = make_app(FakeModel({"output": "ok"}))
    assert (await unlimited.run_agent("support", "q")).output == "ok"


async def test_invalid_final_output_fails_the_run() -> None:
    error, events = await failure(
        make_app(FakeModel({"output": {"wrong": 1}}), output_schema=Answer)
    )
    assert error.code == "OUTPUT_INVALID"
    assert events[-1].payload["error"]["code"] == "OUTPUT_INVALID"


class Handle(BaseModel, arbitrary_types_allowed=True):
    callback: Callable[[], None]


class RejectsEverything:
    """A Schema-protocol object whose JSON Schema cannot be produced."""

    def validate(self, value: Any) -> Any:
        return value

    def json_schema(self) -> dict[str, Any]:
        raise ValueError("no JSON Schema for this")


async def test_schema_not_transportable_fails_before_the_model_is_called() -> None:
    model = FakeModel({"output": "never"})
    error, events = await failure(make_app(model, output_schema=RejectsEverything()))
    assert error.code == "SCHEMA_NOT_TRANSPORTABLE"
    assert model.calls == []
    assert [e.type for e in events] == ["run.started", "run.failed"]

    @define_tool(name="hook", description="Takes a callable.")
    async def hook(value: Handle) -> str:
        return "x"

    model = FakeModel({"output": "never"})
    error, _ = await failure(make_app(model, tools=[hook]))
    assert error.code == "SCHEMA_NOT_TRANSPORTABLE"
    assert model.calls == []


class Upper:
    """A Schema-protocol validator that transforms its value."""

    def validate(self, value: Any) -> Any:
        if not isinstance(value, str):
            raise ValueError("expected text")
        return value.upper()

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string"}


async def test_schema_protocol_objects_validate_and_transform() -> None:
    @define_tool(name="shout", description="Shout.", input_schema=Upper(), output_schema=Upper())
    async def shout(text: str) -> str:
        return f"{text}!"

    model = FakeModel(
        {"tool_calls": [{"id": "c", "name": "shout", "input": "hey"}]}, {"output": '"ok"'}
    )
    app = make_app(model, tools=[shout], output_schema=Upper())
    result = await app.run_agent("support", "q")
    assert result.output == "OK"
    assert model.calls[0].tools[0].input_schema == {"type": "string"}
    tool_completed = next(e for e in result.events if e.type == "tool.completed")
    assert tool_completed.payload["output"] == "HEY!"


async def test_provider_state_reaches_the_next_step_and_nowhere_else() -> None:
    secret_state = {"response_id": "resp_SENTINEL_STATE"}
    model = FakeModel({**call(), "provider_state": secret_state}, {"output": "done"})
    app = make_app(model)
    result = await app.run_agent("support", "q")
    assert model.calls[0].provider_state is None
    assert model.calls[1].provider_state is secret_state
    stored = [e.to_json() for e in await app.list_events(result.run_id)]
    stored.append((await app.get_run(result.run_id)).to_json())
    stored.append((await app.get_session(result.session_id)).to_json())
    stored.append([message.to_json() for message in model.calls[1].messages])
    stored.append(repr(result))
    assert "SENTINEL_STATE" not in json.dumps(stored, default=str)


async def test_images_and_files_reach_the_model_as_content_parts() -> None:
    model = FakeModel({"output": "a cat"})
    image = ImagePart(media_type="image/png", data="aGVsbG8=")
    result = await make_app(model).run_agent("support", [TextPart("What is this?"), image])
    assert model.calls[0].messages[-1] == Message("user", (TextPart("What is this?"), image))
    run = await make_app(FakeModel()).run_store.get_run(result.run_id)
    assert run is None  # a second app has its own store


async def test_reasoning_is_kept_as_thinking_in_the_conversation() -> None:
    model = FakeModel({**call(), "reasoning": "I should look it up."}, {"output": "done"})
    await make_app(model).run_agent("support", "q")
    assistant = model.calls[1].messages[-2]
    assert assistant.content[0] == ThinkingPart("I should look it up.")


async def test_invalid_input_is_rejected() -> None:
    app = make_app(FakeModel())
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("support", 42)  # type: ignore[arg-type]
    assert caught.value.code == "INVALID_INPUT"
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("nobody", "hi")
    assert caught.value.code == "AGENT_NOT_FOUND"


class Scripted:
    """A gateway that yields exactly the given events."""

    def __init__(self, *events: Any) -> None:
        self.events = events

    async def stream(self, input: ModelInput) -> AsyncIterator[Any]:
        for event in self.events:
            yield event


@pytest.mark.parametrize(
    ("events", "code"),
    [
        ((OutputDelta("hi"),), "MODEL_STREAM_MISSING_TERMINAL"),
        (
            (Completed(ModelResult()), Completed(ModelResult())),
            "MODEL_STREAM_DUPLICATE_TERMINAL",
        ),
        (
            (Completed(ModelResult(output="")), OutputDelta("late")),
            "MODEL_STREAM_EVENT_AFTER_TERMINAL",
        ),
        ((OutputDelta("hel"), Completed(ModelResult(output="hello"))), "MODEL_OUTPUT_MISMATCH"),
        ((Completed(ModelResult(output="unstreamed")),), "MODEL_OUTPUT_MISMATCH"),
        (({"type": "text"},), "MODEL_STREAM_INVALID_EVENT"),
        ((Completed({"output": "x"}),), "MODEL_STREAM_INVALID_EVENT"),  # type: ignore[arg-type]
        (
            (Completed(ModelResult(tool_calls=[{"id": "c", "name": "x"}])),),  # type: ignore[list-item]
            "MODEL_STREAM_INVALID_EVENT",
        ),
    ],
)
async def test_the_runtime_enforces_the_stream_contract(events: tuple[Any, ...], code: str) -> None:
    error, recorded = await failure(make_app(Scripted(*events)))
    assert error.code == code
    assert recorded[-1].type == "run.failed"


async def test_a_model_exception_becomes_a_model_error() -> None:
    error, _ = await failure(make_app(FakeModel(ConnectionError("reset by peer"))))
    assert error.code == "MODEL_ERROR"
    assert error.category == "model"


class Ticket(BaseModel):
    customer_id: int
    subject: str = Field(min_length=3)


async def test_an_agent_input_schema_validates_and_transforms_before_the_run_exists() -> None:
    model = FakeModel({"output": "ok"})
    store = InMemoryRunStore()
    app = create_fevex(
        models={"default": model},
        agents=[define_agent(name="triage", instructions="Triage.", input_schema=Ticket)],
        run_store=store,
    )
    result = await app.run_agent("triage", {"customer_id": "42", "subject": "Refund"})
    run = await app.get_run(result.run_id)
    assert run.input == {"customer_id": 42, "subject": "Refund"}  # coerced by the schema
    assert model.calls[0].messages[-1].text == '{"customer_id": 42, "subject": "Refund"}'
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("triage", {"customer_id": 1, "subject": "x"})
    assert caught.value.code == "INVALID_INPUT"
    assert "subject" in caught.value.message
    assert len(store._runs) == 1  # the refused input created nothing


async def test_a_run_keeps_the_context_it_was_started_with() -> None:
    app = create_fevex(
        models={"default": FakeModel({"output": "ok"}, {"output": "ok"})},
        agents=[define_agent(name="support", instructions="Help.")],
        run_store=InMemoryRunStore(),
    )
    context = ExecutionContext(actor={"id": "u-7", "type": "user"}, namespace="tenant-a")
    result = await app.run_agent("support", "hi", context=context)
    run = await app.get_run(result.run_id)
    assert ExecutionContext.from_json(run.context) == context
    assert (run.kind, run.name, run.root_run_id, run.parent_run_id) == (
        "agent",
        "support",
        run.id,
        None,
    )
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("support", "hi", context={"actor": {"type": "user"}})
    assert caught.value.code == "INVALID_CONTEXT"


async def test_list_runs_pages_the_runs_newest_first() -> None:
    app = create_fevex(
        models={"default": FakeModel(*[{"output": "ok"}] * 5)},
        agents=[define_agent(name="support", instructions="Help.")],
        run_store=InMemoryRunStore(),
    )
    started = [(await app.run_agent("support", f"q{i}")).run_id for i in range(5)]
    first = await app.list_runs(limit=2)
    rest = await app.list_runs(limit=10, after=first[-1].id)
    listed = [run.id for run in first + rest]
    assert sorted(listed) == sorted(started)
    assert len(set(listed)) == 5
    created = [run.created_at for run in first + rest]
    assert created == sorted(created, reverse=True)
    assert await app.list_runs(status="failed") == []
    with pytest.raises(FevexRunError) as caught:
        await app.list_runs(limit=0)
    assert caught.value.code == "INVALID_ARGUMENT"
