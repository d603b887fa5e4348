"""Opt-in model recovery: tool failures handed back to the model, within a retry budget."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from fevex import (
    ApprovalDecision,
    Fevex,
    FevexConfigurationError,
    FevexRunError,
    Limits,
    Message,
    RunPausedError,
    ToolContext,
    ToolRetry,
    create_fevex,
    define_agent,
    define_tool,
)
from fevex.events import project_run
from fevex.messages import ToolResultPart
from fevex.models import Completed, ModelInput, ModelResult, ModelStreamEvent, ToolCall
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio

SECRET = "sk-SENTINEL-77a1c9"


class Query(BaseModel):
    account_id: int


ran: list[int] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


@define_tool(name="lookup", description="Look up an account.", retry={"max_attempts": 3})
def lookup(query: Query) -> dict[str, Any]:
    ran.append(query.account_id)
    if query.account_id != 42:
        raise ToolRetry(f"No account {query.account_id}; the known account is 42.")
    return {"status": "active"}


def call(account_id: Any, call_id: str = "c1", name: str = "lookup") -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "input": {"account_id": account_id}}]}


def make_app(
    model: Any, tools: list[Any], store: Any = None, limits: Any = None, **options: Any
) -> Fevex:
    return create_fevex(
        models={"default": model},
        agents=[
            define_agent(
                name="support",
                instructions="Help.",
                tools=[t.name for t in tools],
                limits=limits,
            )
        ],
        tools=tools,
        run_store=store or InMemoryRunStore(),
        **options,
    )


def tool_results(messages: Sequence[Message]) -> list[ToolResultPart]:
    return [p for m in messages for p in m.content if isinstance(p, ToolResultPart)]


# -- ToolRetry -------------------------------------------------------------------------


async def test_a_tool_retry_goes_back_to_the_model_and_the_run_continues() -> None:
    model = FakeModel(call(7), call(42, "c2"), {"output": "Account 42 is active."})
    result = await make_app(model, [lookup]).run_agent("support", "status?")
    assert result.output == "Account 42 is active."
    # Asked again by the model, never by the tool's own retry policy.
    assert ran == [7, 42]
    (retry,) = tool_results(model.calls[1].messages)
    assert retry.is_error
    assert retry.output == {
        "code": "TOOL_FAILED",
        "message": "No account 7; the known account is 42.",
    }
    failed = next(e for e in result.events if e.type == "tool.failed")
    assert failed.payload["retry"] is True
    assert failed.payload["retries_left"] == 2
    assert failed.payload["error"] == retry.output
    types = [e.type for e in result.events]
    assert types.count("tool.failed") == 1
    assert types[-1] == "run.completed"
    # The message view shows what the model read.
    view = project_run(result.events)
    assert tool_results(view.messages)[0] == retry


async def test_the_retry_budget_ends_the_run_with_the_original_code() -> None:
    model = FakeModel(call(1), call(2, "c2"), {"output": "never"})
    app = make_app(model, [lookup], limits={"max_tool_retries": 1})
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("support", "status?")
    error = caught.value
    assert error.code == "TOOL_FAILED"
    assert "max_tool_retries" in error.message
    assert "No account 2" in error.message
    assert isinstance(error.__cause__, ToolRetry)
    assert ran == [1, 2]
    assert len(model.calls) == 2
    (run,) = [r for r in await app.list_runs()]
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["code"] == "TOOL_FAILED"


async def test_no_retries_at_all_with_a_budget_of_zero() -> None:
    model = FakeModel(call(1), {"output": "never"})
    app = make_app(model, [lookup], limits=Limits(max_tool_retries=0))
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("support", "status?")
    assert caught.value.code == "TOOL_FAILED"
    assert len(model.calls) == 1


async def test_a_retry_message_is_scrubbed_of_credentials() -> None:
    @define_tool(name="secretive", description="Leaks.", credentials=["api"])
    async def secretive(query: Query, context: ToolContext) -> dict[str, Any]:
        key = await context.get_credential("api")
        raise ToolRetry(f"Bad request with key {key}; use account 42.")

    model = FakeModel(call(1, name="secretive"), {"output": "ok"})
    app = make_app(model, [secretive], credentials={"api": SECRET})
    result = await app.run_agent("support", "go")
    (retry,) = tool_results(model.calls[1].messages)
    assert SECRET not in str(retry.output)
    assert "[redacted]" in retry.output["message"]
    assert SECRET not in str([e.payload for e in result.events])


# -- errors_to_model --------------------------------------------------------------------


async def test_without_opting_in_invalid_arguments_fail_the_run() -> None:
    model = FakeModel(call("not a number"), {"output": "never"})
    with pytest.raises(FevexRunError) as caught:
        await make_app(model, [lookup]).run_agent("support", "go")
    assert caught.value.code == "TOOL_INPUT_INVALID"
    assert ran == []


async def test_invalid_arguments_go_back_to_the_model_when_the_tool_opts_in() -> None:
    @define_tool(name="find", description="Find.", errors_to_model="input")
    def find(query: Query) -> dict[str, Any]:
        ran.append(query.account_id)
        return {"found": query.account_id}

    model = FakeModel(call("forty-two", name="find"), call(42, "c2", "find"), {"output": "ok"})
    result = await make_app(model, [find]).run_agent("support", "go")
    assert result.output == "ok"
    assert ran == [42]
    (retry, _) = tool_results(model.calls[2].messages)
    assert retry.is_error
    assert retry.output["code"] == "TOOL_INPUT_INVALID"
    assert "account_id" in retry.output["message"]
    # The rejected input is not echoed back.
    assert "forty-two" not in retry.output["message"]


async def test_input_mode_still_fails_the_run_when_the_function_fails() -> None:
    @define_tool(name="find", description="Find.", errors_to_model="input")
    def find(query: Query) -> dict[str, Any]:
        raise RuntimeError("backend down")

    model = FakeModel(call(1, name="find"), {"output": "never"})
    with pytest.raises(FevexRunError) as caught:
        await make_app(model, [find]).run_agent("support", "go")
    assert caught.value.code == "TOOL_FAILED"
    assert len(model.calls) == 1


def test_handing_back_every_failure_needs_a_keyed_tool() -> None:
    def send(query: Query) -> dict[str, Any]:
        return {}

    for value in (True, "always"):
        with pytest.raises(FevexConfigurationError) as caught:
            define_tool(name="send", description="Send.", errors_to_model=value)(send)
        assert caught.value.code == "INVALID_TOOL"
        assert "idempotency='keyed'" in caught.value.message
    with pytest.raises(FevexConfigurationError) as caught:
        define_tool(name="send", description="Send.", errors_to_model="sometimes")(send)  # type: ignore[call-overload]
    assert caught.value.code == "INVALID_TOOL"
    keyed = define_tool(name="send", description="Send.", idempotency="keyed", errors_to_model=True)
    assert keyed(send).errors_to_model == "always"


async def test_a_keyed_tool_hands_its_failure_back_after_its_own_retries() -> None:
    keys: list[str | None] = []

    @define_tool(
        name="charge",
        description="Charge.",
        idempotency="keyed",
        errors_to_model="always",
        retry={"max_attempts": 2, "backoff": 0},
    )
    def charge(query: Query, context: ToolContext) -> dict[str, Any]:
        keys.append(context.idempotency_key)
        if query.account_id == 1:
            raise ValueError("card declined")
        return {"charged": query.account_id}

    model = FakeModel(call(1, name="charge"), call(2, "c2", "charge"), {"output": "ok"})
    result = await make_app(model, [charge]).run_agent("support", "go")
    assert result.output == "ok"
    run_id = result.run_id
    # Two attempts of c1 under one key, then the model's new call under its own.
    assert keys == [f"fevex:{run_id}:c1", f"fevex:{run_id}:c1", f"fevex:{run_id}:c2"]
    (retry, _) = tool_results(model.calls[2].messages)
    assert retry.output == {
        "code": "TOOL_FAILED",
        "message": "Tool charge failed: ValueError: card declined",
    }


async def test_policy_denials_never_go_back_to_the_model() -> None:
    @define_tool(name="charge", description="Charge.", idempotency="keyed", errors_to_model=True)
    def charge(query: Query) -> dict[str, Any]:
        return {}

    def deny(request: Any) -> None:
        raise PermissionError("not today")

    model = FakeModel(call(1, name="charge"), {"output": "never"})
    with pytest.raises(FevexRunError) as caught:
        await make_app(model, [charge], policies=[deny]).run_agent("support", "go")
    assert caught.value.code == "POLICY_DENIED"
    assert len(model.calls) == 1


# -- durability ---------------------------------------------------------------------------


@define_tool(name="approve_me", description="Needs a person.", approval="required")
def approve_me(query: Query) -> dict[str, Any]:
    ran.append(-query.account_id)
    return {"approved": True}


def two_calls() -> dict[str, Any]:
    return {
        "tool_calls": [
            {"id": "c1", "name": "lookup", "input": {"account_id": 7}},
            {"id": "c2", "name": "approve_me", "input": {"account_id": 1}},
        ]
    }


async def test_a_handed_back_failure_is_never_run_again_after_a_pause() -> None:
    store = InMemoryRunStore()
    first = make_app(FakeModel(two_calls()), [lookup, approve_me], store, {"max_tool_retries": 1})
    with pytest.raises(RunPausedError) as caught:
        await first.run_agent("support", "go")
    approval = caught.value.pause["approvals"][0]
    run_id = caught.value.run_id
    assert run_id is not None
    assert ran == [7]
    # Another process continues it; the budget spent before the pause stays spent.
    model = FakeModel(call(8, "c3"), {"output": "never"})
    second = make_app(model, [lookup, approve_me], store, {"max_tool_retries": 1})
    decision = ApprovalDecision(approval["id"], "approve", {"id": "reviewer"})
    with pytest.raises(FevexRunError) as failed:
        await second.resume_run(run_id, decision)
    assert failed.value.code == "TOOL_FAILED"
    assert "max_tool_retries" in failed.value.message
    assert ran == [7, -1, 8]
    retry, approved = tool_results(model.calls[0].messages)
    assert retry.is_error
    assert "No account 7" in retry.output["message"]
    assert approved.output == {"approved": True}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class StallingModel:
    """Asks for one call of ``lookup`` with a wrong id, then stalls in its next step."""

    def __init__(self) -> None:
        self.inputs: list[ModelInput] = []
        self.stalled = asyncio.Event()

    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        self.inputs.append(input)
        if len(self.inputs) == 1:
            yield Completed(ModelResult(tool_calls=[ToolCall("c1", "lookup", {"account_id": 7})]))
            return
        self.stalled.set()
        await asyncio.Event().wait()
        yield Completed(ModelResult(output="never"))  # pragma: no cover


async def test_recovery_continues_after_a_handed_back_failure_without_running_it() -> None:
    clock = Clock()
    store = InMemoryRunStore(clock=clock)
    stalling = StallingModel()
    worker = make_app(stalling, [lookup], store)
    task = asyncio.create_task(worker.run_agent("support", "go"))
    await stalling.stalled.wait()
    clock.now += 120  # the worker froze past its lease
    (run_id,) = [run.id for run in await worker.list_runs()]
    model = FakeModel({"output": "recovered"})
    result = await make_app(model, [lookup], store).recover_run(run_id, actor={"id": "r"})
    assert result.output == "recovered"
    assert ran == [7]
    (retry,) = tool_results(model.calls[0].messages)
    assert retry.is_error
    assert "No account 7" in retry.output["message"]
    task.cancel()
    with pytest.raises((FevexRunError, asyncio.CancelledError)):
        await task


# -- errors and logs ------------------------------------------------------------------------


async def test_tool_failed_keeps_its_cause_and_logs_the_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @define_tool(name="broken", description="Breaks.")
    def broken(query: Query) -> dict[str, Any]:
        raise KeyError("missing-field")

    model = FakeModel(call(1, name="broken"), {"output": "never"})
    with caplog.at_level(logging.WARNING, logger="fevex"), pytest.raises(FevexRunError) as caught:
        await make_app(model, [broken]).run_agent("support", "go")
    error = caught.value
    assert error.code == "TOOL_FAILED"
    assert isinstance(error.__cause__, KeyError)
    (record,) = [
        r
        for r in caplog.records
        if getattr(r, "tool_name", None) == "broken" and r.levelno == logging.WARNING
    ]
    assert record.run_id.startswith("run_")  # type: ignore[attr-defined]
    assert record.exc_info is not None
    assert record.exc_info[1] is error.__cause__


async def test_a_logged_traceback_is_scrubbed_of_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @define_tool(name="leaky", description="Leaks.", credentials=["api"])
    async def leaky(query: Query, context: ToolContext) -> dict[str, Any]:
        key = await context.get_credential("api")
        raise RuntimeError(f"rejected key {key}")

    model = FakeModel(call(1, name="leaky"), {"output": "never"})
    app = make_app(model, [leaky], credentials={"api": SECRET})
    with caplog.at_level(logging.DEBUG, logger="fevex"), pytest.raises(FevexRunError):
        await app.run_agent("support", "go")
    (record,) = [
        r
        for r in caplog.records
        if getattr(r, "tool_name", None) == "leaky" and r.levelno == logging.WARNING
    ]
    text = record.getMessage()
    assert "Traceback" in text
    assert "RuntimeError" in text
    assert SECRET not in caplog.text
    assert record.exc_info is None


async def test_the_loop_logs_steps_and_retries_with_the_run_id_and_no_content(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = FakeModel(call(7), call(42, "c2"), {"output": "The private answer."})
    with caplog.at_level(logging.DEBUG, logger="fevex"):
        result = await make_app(model, [lookup]).run_agent("support", "my private question")
    mine = [r for r in caplog.records if getattr(r, "run_id", None) == result.run_id]
    debug = [r.getMessage() for r in mine if r.levelno == logging.DEBUG]
    assert sum("model step" in m and "started" in m for m in debug) == 3
    assert sum("tool lookup started" in m for m in debug) == 2
    (warning,) = [r for r in mine if r.levelno == logging.WARNING]
    assert "goes back to the model" in warning.getMessage()
    assert warning.retries_left == 2  # type: ignore[attr-defined]
    for text in ("private", "No account 7", "active"):
        assert text not in " ".join(r.getMessage() for r in mine)


# -- limits ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "said"),
    [
        ({"model_steps": -1}, "Did you mean 'max_steps'?"),
        ({"max_steps": -1}, "max_steps must be a positive integer"),
        ({"max_tool_calls": 2.5}, "max_tool_calls must be a positive integer"),
        ({"max_steps": True}, "max_steps must be a positive integer"),
        ({"max_tool_retries": -1}, "max_tool_retries must be an integer of 0 or more"),
    ],
)
def test_limits_name_the_valid_keys(limits: dict[str, Any], said: str) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        Limits.from_mapping(limits)
    assert caught.value.code == "INVALID_AGENT"
    assert said in caught.value.message
    assert "max_steps, max_tool_calls" in caught.value.message
    assert "max_tool_retries" in caught.value.message


def test_limits_values_are_checked_at_definition() -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        define_agent(name="a", instructions="Help.", limits={"max_steps": -1})
    assert caught.value.code == "INVALID_AGENT"
    assert "max_steps" in caught.value.message
    assert Limits.from_mapping({"max_tool_retries": 0}).max_tool_retries == 0
    with pytest.raises(FevexConfigurationError) as named:
        Limits.from_mapping({"max_steps": 0}, agent="support")
    assert named.value.message.startswith("Agent 'support': Limit max_steps")
    assert Limits().max_tool_retries == 3
