"""Traces, cost, redaction and logs of real runs, exported to real exporters: spans for runs,
model steps, tool calls, workflow steps and delegations, linked in one trace; cost live on
events, views and spans; content only when asked, redacted first; and exporters that fail,
hang or fall behind never touching a run."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

import fevex.observability
import fevex.testing
from fevex import (
    ApprovalDecision,
    Fevex,
    FevexConfigurationError,
    FevexRunError,
    RunPausedError,
    ToolContext,
    ToolRetry,
    WorkflowStep,
    create_fevex,
    define_agent,
    define_tool,
    define_workflow,
)
from fevex.events import RunEvent, project_run
from fevex.models import Usage
from fevex.observability import (
    REDACTED,
    ContentPolicy,
    Cost,
    InMemoryTraceExporter,
    Observability,
    Span,
)
from fevex.plugins import hookimpl, register_plugin
from fevex.teams import TeamStep, define_team
from fevex.testing import FakeModel, check_trace_exporter
from fevex.tools.definition import RetryPolicy

pytestmark = pytest.mark.anyio

QUESTION = "What is the status of account 42?"
ANSWER = "Account 42 is active."
USAGE_1 = {"input_tokens": 10, "output_tokens": 3, "total_tokens": 13}
USAGE_2 = {"input_tokens": 20, "output_tokens": 6, "total_tokens": 26}
CALL_42 = {"id": "call-1", "name": "accounts_get", "input": {"account_id": 42}}
ALL_CONTENT = ContentPolicy(include={"input", "output", "error_message"})


class AccountQuery(BaseModel):
    account_id: int


@define_tool(name="accounts_get", description="Get an account by ID.")
async def accounts_get(query: AccountQuery) -> dict[str, Any]:
    return {"id": query.account_id, "status": "active"}


def _tool_then_answer() -> FakeModel:
    return FakeModel(
        {"tool_calls": [CALL_42], "usage": USAGE_1}, {"output": ANSWER, "usage": USAGE_2}
    )


def _app(
    model: FakeModel,
    exporters: Sequence[Any],
    *,
    tools: Sequence[Any] = (accounts_get,),
    **observed: Any,
) -> Fevex:
    return create_fevex(
        models={"default": model},
        agents=[
            define_agent(
                name="support",
                instructions="Answer account questions.",
                tools=[tool.name for tool in tools],
            )
        ],
        tools=tools,
        observability=Observability(exporters=list(exporters), **observed),
    )


def _price(usage: Usage, model: str | None) -> Cost:
    # Binary fractions, so sums are exact.
    return Cost((usage.input_tokens or 0) * 0.25 + (usage.output_tokens or 0) * 1.0, "USD")


def _by_kind(spans: Sequence[Span]) -> dict[str, list[Span]]:
    found: dict[str, list[Span]] = {}
    for span in spans:
        found.setdefault(span.kind, []).append(span)
    return found


def _every_byte(spans: Sequence[Span]) -> str:
    """What an exporter could send anywhere: each span's repr and its JSON."""
    return "".join(repr(span) + json.dumps(dataclasses.asdict(span), default=str) for span in spans)


def _trace_of(run_id: str) -> str:
    return hashlib.sha256(run_id.encode()).hexdigest()[:32]


# -- spans of an agent run ---------------------------------------------------------------


async def test_an_agent_run_is_one_trace_of_its_execution_model_steps_and_tool_calls() -> None:
    exporter = InMemoryTraceExporter()
    app = _app(_tool_then_answer(), [exporter])

    result = await app.run_agent("support", QUESTION)
    report = await app.flush_observability()

    assert report.ok
    assert report.spans == 4
    spans = _by_kind(exporter.spans)
    (run,) = spans["run"]
    first_step, second_step = spans["model"]
    (tool,) = spans["tool"]
    assert {span.trace_id for span in exporter.spans} == {_trace_of(result.run_id)}
    assert run.parent_span_id is None
    assert [s.parent_span_id for s in (first_step, tool, second_step)] == [run.span_id] * 3
    assert len({span.span_id for span in exporter.spans}) == 4
    assert run.name == "invoke_agent support"
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == "support"
    assert run.attributes["fevex.run.id"] == result.run_id
    assert run.attributes["fevex.execution.end"] == "completed"
    assert (
        run.attributes["gen_ai.usage.input_tokens"],
        run.attributes["gen_ai.usage.output_tokens"],
    ) == (30, 9)
    assert first_step.name == "chat default"
    assert first_step.attributes["gen_ai.operation.name"] == "chat"
    assert first_step.attributes["gen_ai.request.model"] == "default"
    assert first_step.attributes["gen_ai.usage.input_tokens"] == 10
    assert second_step.attributes["gen_ai.usage.output_tokens"] == 6
    assert tool.name == "execute_tool accounts_get"
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "accounts_get"
    assert tool.attributes["gen_ai.tool.call.id"] == "call-1"
    assert all(span.status == "ok" for span in exporter.spans)
    assert run.start_ns <= first_step.start_ns <= first_step.end_ns <= tool.start_ns
    assert tool.end_ns <= second_step.start_ns <= second_step.end_ns <= run.end_ns
    # Metadata only by default: nothing the user or the model wrote.
    exported = _every_byte(exporter.spans)
    for content in (QUESTION, ANSWER, '"status": "active"', "account_id"):
        assert content not in exported
    assert not any(key.startswith("fevex.input") for s in exporter.spans for key in s.attributes)


async def test_a_failed_run_ends_its_spans_in_error_with_the_code_and_no_message() -> None:
    @define_tool(name="accounts_get", description="Get an account by ID.")
    async def broken(query: AccountQuery) -> dict[str, Any]:
        raise RuntimeError("ledger offline for account 42")

    exporter = InMemoryTraceExporter()
    app = _app(FakeModel({"tool_calls": [CALL_42]}), [exporter], tools=[broken])

    with pytest.raises(FevexRunError):
        await app.run_agent("support", QUESTION)
    await app.flush_observability()

    spans = _by_kind(exporter.spans)
    (run,), (tool,) = spans["run"], spans["tool"]
    assert (tool.status, tool.error_code, tool.attributes["error.type"]) == (
        "error",
        "TOOL_FAILED",
        "TOOL_FAILED",
    )
    assert (run.status, run.error_code, run.attributes["fevex.execution.end"]) == (
        "error",
        "TOOL_FAILED",
        "failed",
    )
    assert "ledger offline" not in _every_byte(exporter.spans)


async def test_error_messages_are_exported_when_the_policy_includes_them() -> None:
    @define_tool(name="accounts_get", description="Get an account by ID.")
    async def broken(query: AccountQuery) -> dict[str, Any]:
        raise RuntimeError("ledger offline")

    exporter = InMemoryTraceExporter()
    app = _app(
        FakeModel({"tool_calls": [CALL_42]}),
        [exporter],
        tools=[broken],
        content=ContentPolicy(include={"error_message"}),
    )

    with pytest.raises(FevexRunError):
        await app.run_agent("support", QUESTION)
    await app.flush_observability()

    (tool,) = exporter.of_kind("tool")
    assert "ledger offline" in str(tool.attributes["fevex.error.message"])
    assert "fevex.input" not in tool.attributes


async def test_a_paused_and_resumed_run_continues_its_trace_and_a_rejection_is_a_span() -> None:
    @define_tool(name="refund", description="Refund.", approval="required")
    async def refund(query: AccountQuery) -> str:
        return "refunded"

    exporter = InMemoryTraceExporter()
    model = FakeModel(
        {"tool_calls": [{"id": "call-r", "name": "refund", "input": {"account_id": 7}}]},
        {"output": "Not refunded."},
    )
    app = _app(model, [exporter], tools=[refund])

    with pytest.raises(RunPausedError) as paused:
        await app.run_agent("support", "Refund 7.")
    approval = paused.value.pause["approvals"][0]["id"]
    await app.resume_run(
        paused.value.run_id, ApprovalDecision(approval, "reject", {"id": "reviewer"})
    )
    await app.flush_observability()

    first, resumed = exporter.of_kind("run")
    assert first.attributes["fevex.execution.end"] == "paused"
    assert first.attributes["fevex.pause.reason"] == "approval"
    assert resumed.parent_span_id == first.span_id
    assert resumed.attributes["fevex.execution.opening"] == "resumed"
    assert resumed.trace_id == first.trace_id == _trace_of(paused.value.run_id)
    (rejected,) = exporter.of_kind("tool")
    assert (rejected.status, rejected.error_code) == ("error", "TOOL_REJECTED")
    assert rejected.parent_span_id == resumed.span_id
    assert rejected.start_ns == rejected.end_ns


async def test_retries_are_events_on_the_tool_span_and_warnings_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    attempts = []

    @define_tool(
        name="accounts_get",
        description="Get an account by ID.",
        retry=RetryPolicy(max_attempts=3, backoff=0.001),
    )
    async def flaky(query: AccountQuery) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("ledger busy")
        return {"id": query.account_id}

    caplog.set_level(logging.DEBUG, logger="fevex")
    exporter = InMemoryTraceExporter()
    app = _app(_tool_then_answer(), [exporter], tools=[flaky])

    result = await app.run_agent("support", QUESTION)
    await app.flush_observability()

    (tool,) = exporter.of_kind("tool")
    assert tool.status == "ok"
    assert [(e.name, e.attributes["fevex.tool.attempt"]) for e in tool.events] == [
        ("fevex.tool.retry", 1),
        ("fevex.tool.retry", 2),
    ]
    assert all(e.attributes["error.type"] == "TOOL_FAILED" for e in tool.events)
    assert tool.start_ns <= tool.events[0].time_ns <= tool.events[1].time_ns <= tool.end_ns
    retries = [r for r in caplog.records if getattr(r, "retry", False)]
    assert [(r.levelno, r.run_id, r.attempt) for r in retries] == [
        (logging.WARNING, result.run_id, 2),
        (logging.WARNING, result.run_id, 3),
    ]


async def test_a_failure_handed_back_to_the_model_ends_its_tool_span_and_the_run_goes_on() -> None:
    @define_tool(name="accounts_get", description="Get an account by ID.")
    async def asks_again(query: AccountQuery) -> dict[str, Any]:
        raise ToolRetry("Use an account id above 100.")

    exporter = InMemoryTraceExporter()
    app = _app(_tool_then_answer(), [exporter], tools=[asks_again])

    await app.run_agent("support", QUESTION)
    await app.flush_observability()

    (tool,) = exporter.of_kind("tool")
    assert (tool.status, tool.error_code) == ("error", "TOOL_FAILED")
    assert tool.attributes["fevex.tool.handed_to_model"] is True
    (run,) = exporter.of_kind("run")
    assert run.status == "ok"


# -- workflows and teams -----------------------------------------------------------------


@define_workflow(name="review", version="1")
async def review(step: WorkflowStep, draft: str) -> str:
    written = await step.agent("write", "support", input=draft)
    checked = await step.run("check", len, str(written.output))
    return f"{written.output} ({checked})"


@define_team(name="desk", version="1", supervisor="support")
async def desk(team: TeamStep, request: str) -> str:
    answer = await team.delegate("ask", agent="support", task=request)
    checked = await team.handoff(
        "check", from_agent="support", to_agent="support", reason="Check it", task="Check."
    )
    return f"{answer.output} {checked.output}"


def _parents(spans: Sequence[Span]) -> dict[str, Span]:
    return {span.span_id: span for span in spans}


async def test_a_workflow_step_is_the_parent_of_its_child_agent_run() -> None:
    exporter = InMemoryTraceExporter()
    app = create_fevex(
        models={"default": FakeModel({"output": "Written."})},
        agents=[define_agent(name="support", instructions="Write.")],
        workflows=[review],
        observability=Observability(exporters=[exporter]),
    )

    result = await app.run_workflow("review", "a draft")
    await app.flush_observability()

    spans = exporter.spans
    by_id = _parents(spans)
    assert {span.trace_id for span in spans} == {_trace_of(result.run_id)}
    workflow = next(
        s for s in spans if s.kind == "run" and s.attributes["fevex.run.kind"] == "workflow"
    )
    child = next(s for s in spans if s.kind == "run" and s.attributes["fevex.run.kind"] == "agent")
    write, check = exporter.of_kind("workflow_step")
    (model,) = exporter.of_kind("model")
    assert workflow.parent_span_id is None
    assert workflow.name == "workflow review"
    assert (write.name, write.attributes["fevex.workflow.step.kind"]) == (
        "fevex.workflow.step write",
        "agent",
    )
    assert check.attributes["fevex.workflow.step.kind"] == "run"
    assert write.parent_span_id == check.parent_span_id == workflow.span_id
    assert child.parent_span_id == write.span_id
    assert by_id[model.parent_span_id] is child
    assert child.attributes["fevex.parent_run.id"] == result.run_id
    assert write.attributes["fevex.child_run.id"] == child.attributes["fevex.run.id"]
    assert child.end_ns <= write.end_ns


async def test_a_team_delegation_is_the_parent_of_its_child_run() -> None:
    exporter = InMemoryTraceExporter()
    app = create_fevex(
        models={"default": FakeModel({"output": "Answered."}, {"output": "Checked."})},
        agents=[define_agent(name="support", instructions="Answer.")],
        teams=[desk],
        observability=Observability(exporters=[exporter]),
    )

    result = await app.run_team("desk", "a question")
    await app.flush_observability()

    delegation, handoff = exporter.of_kind("team_delegation")
    assert handoff.name == "fevex.team.delegation check"
    assert [(e.name, dict(e.attributes)) for e in handoff.events] == [
        (
            "fevex.team.handoff",
            {"fevex.team.from_agent": "support", "fevex.team.to_agent": "support"},
        )
    ]
    team = next(
        s for s in exporter.spans if s.kind == "run" and s.attributes["fevex.run.kind"] == "team"
    )
    child, checking = (
        s for s in exporter.spans if s.kind == "run" and s.attributes["fevex.run.kind"] == "agent"
    )
    assert checking.parent_span_id == handoff.span_id
    assert result.output == "Answered. Checked."
    assert {span.trace_id for span in exporter.spans} == {_trace_of(result.run_id)}
    assert delegation.name == "fevex.team.delegation ask"
    assert delegation.attributes["gen_ai.agent.name"] == "support"
    assert delegation.parent_span_id == team.span_id
    assert child.parent_span_id == delegation.span_id


# -- cost ----------------------------------------------------------------------------------


async def test_cost_is_live_on_the_events_the_turn_and_the_spans() -> None:
    priced: list[tuple[Usage, str | None]] = []

    def price(usage: Usage, model: str | None) -> Cost:
        priced.append((usage, model))
        return _price(usage, model)

    exporter = InMemoryTraceExporter()
    app = _app(_tool_then_answer(), [exporter], calculate_cost=price)

    result = await app.run_agent("support", QUESTION)
    await app.flush_observability()

    assert priced == [(Usage(10, 3, 13), "default"), (Usage(20, 6, 26), "default")]
    completed = [e for e in result.events if e.type == "model.completed"]
    assert [e.payload["cost"] for e in completed] == [
        {"amount": 5.5, "currency": "USD"},
        {"amount": 11.0, "currency": "USD"},
    ]
    assert result.events[-1].payload["cost"] == {"amount": 16.5, "currency": "USD"}
    turn = project_run(await app.list_events(result.run_id)).turn
    assert turn is not None
    assert turn.cost == Cost(16.5, "USD")
    first, second = exporter.of_kind("model")
    assert (first.attributes["fevex.cost.amount"], second.attributes["fevex.cost.amount"]) == (
        5.5,
        11.0,
    )
    (run,) = exporter.of_kind("run")
    assert (run.attributes["fevex.run.cost.amount"], run.attributes["fevex.run.cost.currency"]) == (
        16.5,
        "USD",
    )


async def test_a_step_that_reports_input_and_output_only_is_priced_by_its_total() -> None:
    def price(usage: Usage, model: str | None) -> Cost:  # the README's price function
        return Cost((usage.total_tokens or 0) * 0.5, "USD")

    model = FakeModel(
        {"tool_calls": [CALL_42], "usage": {"input_tokens": 100, "output_tokens": 44}},
        {"output": ANSWER, "usage": {"input_tokens": 150, "output_tokens": 6}},
    )
    app = _app(model, [], calculate_cost=price)

    result = await app.run_agent("support", QUESTION)

    assert result.usage.total_tokens == 300
    assert result.events[-1].payload["cost"] == {"amount": 150.0, "currency": "USD"}
    assert Usage(input_tokens=3, output_tokens=4) == Usage(3, 4, 7)
    assert Usage(input_tokens=3).total_tokens is None
    assert Usage(1, 2, 10).total_tokens == 10  # a reported total is kept


async def test_a_runs_cost_adds_up_across_a_pause() -> None:
    @define_tool(name="refund", description="Refund.", approval="required")
    async def refund(query: AccountQuery) -> str:
        return "refunded"

    model = FakeModel(
        {
            "tool_calls": [{"id": "c", "name": "refund", "input": {"account_id": 7}}],
            "usage": USAGE_1,
        },
        {"output": "Refunded.", "usage": USAGE_2},
    )
    app = _app(model, [], tools=[refund], calculate_cost=_price)

    with pytest.raises(RunPausedError) as paused:
        await app.run_agent("support", "Refund 7.")
    approval = paused.value.pause["approvals"][0]["id"]
    result = await app.resume_run(
        paused.value.run_id, ApprovalDecision(approval, "approve", {"id": "reviewer"})
    )

    assert result.events[-1].payload["cost"] == {"amount": 16.5, "currency": "USD"}


@pytest.mark.parametrize(
    "price",
    [
        pytest.param(lambda usage, model: 1 / 0, id="raises"),
        pytest.param(lambda usage, model: 3.5, id="not-a-cost"),
        pytest.param(lambda usage, model: Cost(float("nan"), "USD"), id="nan"),
    ],
)
async def test_a_price_function_that_fails_leaves_the_run_as_it_was(
    price: Any, caplog: pytest.LogCaptureFixture
) -> None:
    exporter = InMemoryTraceExporter()
    app = _app(_tool_then_answer(), [exporter], calculate_cost=price)

    result = await app.run_agent("support", QUESTION)
    await app.flush_observability()

    assert result.output == ANSWER
    assert all("cost" not in event.payload for event in result.events)
    assert not any("fevex.cost.amount" in span.attributes for span in exporter.spans)
    warnings = [r for r in caplog.records if "calculate_cost" in r.getMessage()]
    assert len(warnings) == 2
    assert all(r.run_id == result.run_id for r in warnings)


# -- content and redaction -----------------------------------------------------------------


class Lookup(BaseModel):
    account_id: int
    api_key: str


HOSTILE_OUTPUT = {
    "id": 42,
    "headers": {"Authorization": "Bearer hostile-bearer", "X-Api-Key": "hostile-header-key"},
    "users": [
        {"name": "ann", "password": "hostile-password"},
        {"session_cookie": "hostile-cookie"},
    ],
    "nested": [[{"refresh_token": "hostile-token", "clientSecret": "hostile-secret"}]],
}


@define_tool(name="lookup", description="Look an account up.")
async def hostile_lookup(query: Lookup) -> dict[str, Any]:
    return HOSTILE_OUTPUT


def _hostile_model() -> FakeModel:
    call = {"id": "call-h", "name": "lookup", "input": {"account_id": 42, "api_key": "input-key-9"}}
    return FakeModel({"tool_calls": [call]}, {"output": "Looked up."})


async def test_sensitive_keys_are_redacted_at_any_depth_before_the_applications_redact() -> None:
    seen: list[Any] = []

    def redact(value: Any) -> Any:
        seen.append(value)
        return value

    exporter = InMemoryTraceExporter()
    app = _app(
        _hostile_model(), [exporter], tools=[hostile_lookup], content=ALL_CONTENT, redact=redact
    )

    await app.run_agent("support", "Look 42 up.")
    await app.flush_observability()

    exported = _every_byte(exporter.spans) + repr(seen)
    assert "hostile" not in exported
    assert "input-key-9" not in exported
    (tool,) = exporter.of_kind("tool")
    assert json.loads(str(tool.attributes["fevex.input"])) == {
        "account_id": 42,
        "api_key": REDACTED,
    }
    output = json.loads(str(tool.attributes["fevex.output"]))
    assert output["headers"] == {"Authorization": REDACTED, "X-Api-Key": REDACTED}
    assert output["users"] == [{"name": "ann", "password": REDACTED}, {"session_cookie": REDACTED}]
    assert output["nested"] == [[{"refresh_token": REDACTED, "clientSecret": REDACTED}]]
    assert {"account_id": 42, "api_key": REDACTED} in seen


async def test_long_content_is_cut_at_the_policys_length() -> None:
    exporter = InMemoryTraceExporter()
    policy = ContentPolicy(include={"output"}, max_length=40)
    app = _app(_hostile_model(), [exporter], tools=[hostile_lookup], content=policy)

    await app.run_agent("support", "Look 42 up.")
    await app.flush_observability()

    (tool,) = exporter.of_kind("tool")
    output = str(tool.attributes["fevex.output"])
    assert len(output) == 40
    assert output.endswith("…[truncated]")
    assert "hostile" not in output


async def test_content_the_applications_redact_cannot_handle_is_dropped_and_counted() -> None:
    def redact(value: Any) -> Any:
        raise ValueError("cannot redact")

    exporter = InMemoryTraceExporter()
    app = _app(
        _hostile_model(), [exporter], tools=[hostile_lookup], content=ALL_CONTENT, redact=redact
    )

    result = await app.run_agent("support", "Look 42 up.")
    report = await app.flush_observability()

    assert result.output == "Looked up."
    assert report.content_dropped >= 4
    assert not report.ok
    assert not any(
        key in span.attributes
        for span in exporter.spans
        for key in ("fevex.input", "fevex.output", "fevex.tool_calls")
    )


class Charge(BaseModel):
    amount: int
    api_key: str


SENTINEL = "sk-live-SENTINEL-31f7c2"
INPUT_SENTINEL = "sk-input-SENTINEL-8a0d41"


async def test_no_credential_and_no_sensitive_input_reaches_a_span_or_a_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    attempts = []

    @define_tool(
        name="charge",
        description="Charge.",
        credentials=["payments-api-key"],
        idempotency="keyed",
        retry=RetryPolicy(max_attempts=2, backoff=0.001),
    )
    async def charge(request: Charge, context: ToolContext) -> dict[str, Any]:
        key = await context.get_credential("payments-api-key")
        attempts.append(key)
        if len(attempts) == 1:
            raise ConnectionError(f"gateway refused Bearer {key}")
        return {"charged": request.amount}

    caplog.set_level(logging.DEBUG, logger="fevex")
    exporter = InMemoryTraceExporter()
    call = {"id": "call-c", "name": "charge", "input": {"amount": 30, "api_key": INPUT_SENTINEL}}
    app = create_fevex(
        models={"default": FakeModel({"tool_calls": [call]}, {"output": "Charged."})},
        agents=[define_agent(name="billing", instructions="Bill.", tools=["charge"])],
        tools=[charge],
        credentials={"payments-api-key": SENTINEL},
        observability=Observability(exporters=[exporter], content=ALL_CONTENT),
    )

    result = await app.run_agent("billing", "Charge 30.")
    await app.flush_observability()

    assert attempts == [SENTINEL, SENTINEL]
    assert result.output == "Charged."
    (tool,) = exporter.of_kind("tool")
    assert len(tool.events) == 1  # the retry is traced, without what it failed with
    assert "fevex.input" in tool.attributes
    assert "fevex.output" in tool.attributes
    exported = _every_byte(exporter.spans)
    logged = caplog.text + "".join(str(record.__dict__) for record in caplog.records)
    assert "gateway refused Bearer" in logged  # the scan sees the failure's text
    for sentinel in (SENTINEL, INPUT_SENTINEL):
        assert sentinel not in exported
        assert sentinel not in logged


# -- exporters off the run path ------------------------------------------------------------


class RaisingExporter:
    def export(self, spans: Sequence[Span]) -> None:
        raise RuntimeError("collector unreachable")


class HangingAsyncExporter:
    """Never returns, and ignores being cancelled once."""

    def __init__(self) -> None:
        self.calls = 0

    async def export(self, spans: Sequence[Span]) -> None:
        self.calls += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.Event().wait()


class HangingSyncExporter:
    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def export(self, spans: Sequence[Span]) -> None:
        self.calls += 1
        self.release.wait()


async def test_an_exporter_that_raises_is_reported_and_the_others_still_get_every_span() -> None:
    healthy = InMemoryTraceExporter()
    app = _app(_tool_then_answer(), [RaisingExporter(), healthy])

    result = await app.run_agent("support", QUESTION)
    report = await app.flush_observability()

    assert result.output == ANSWER
    assert len(healthy.spans) == 4
    assert report.failed_exports >= 1
    assert not report.ok
    failure = report.failures[0]
    assert (failure.exporter, failure.error_type) == ("RaisingExporter", "RuntimeError")
    assert "collector unreachable" in failure.message
    assert (await app.flush_observability()).failed_exports == 0  # reported once


async def test_exporters_that_hang_are_abandoned_after_their_timeout() -> None:
    stuck_async, stuck_sync = HangingAsyncExporter(), HangingSyncExporter()
    healthy = InMemoryTraceExporter()
    app = _app(
        _tool_then_answer().respond({"output": "Again."}),
        [stuck_async, stuck_sync, healthy],
        export_timeout=0.05,
    )
    try:
        result = await app.run_agent("support", QUESTION)
        async with asyncio.timeout(60):  # a guard against a hang, not a measurement
            report = await app.flush_observability()
            assert result.output == ANSWER
            assert sorted(f.exporter for f in report.failures) == [
                "HangingAsyncExporter",
                "HangingSyncExporter",
            ]
            assert {f.error_type for f in report.failures} == {"TimeoutError"}
            assert len(healthy.spans) == 4

            # The sync exporter still holds its thread: its next batches fail at once.
            again = await app.run_agent("support", "Again?")
            report = await app.flush_observability()
            assert again.output == "Again."
            assert stuck_sync.calls == 1
            assert any("has not returned" in f.message for f in report.failures)
            assert len(healthy.spans) == 6
    finally:
        stuck_sync.release.set()
    async with asyncio.timeout(60):
        await app.close()


async def test_a_full_queue_drops_and_counts_events_and_runs_are_unaffected() -> None:
    exporter = InMemoryTraceExporter()
    app = _app(_tool_then_answer(), [exporter], queue_size=2)

    result = await app.run_agent("support", QUESTION)
    report = await app.flush_observability()

    assert result.output == ANSWER
    # The last commit alone hands over four events at once (model.started to run.completed).
    assert report.dropped_events >= 2
    assert not report.ok
    assert (await app.flush_observability()).dropped_events == 0


def test_a_script_flushes_with_the_blocking_twin() -> None:
    exporter = InMemoryTraceExporter()
    with _app(_tool_then_answer(), [exporter]) as app:
        app.run_agent_sync("support", QUESTION)
        report = app.flush_observability_sync()

    assert report.ok
    assert report.spans == 4 == len(exporter.spans)


async def test_an_app_without_exporters_reports_nothing() -> None:
    app = _app(_tool_then_answer(), [], calculate_cost=_price)

    result = await app.run_agent("support", QUESTION)

    assert result.events[-1].payload["cost"] == {"amount": 16.5, "currency": "USD"}
    assert await app.flush_observability() == fevex.observability.ObservabilityReport()


async def test_close_flushes_what_is_pending() -> None:
    exporter = InMemoryTraceExporter()
    app = _app(_tool_then_answer(), [exporter])

    await app.run_agent("support", QUESTION)
    await app.close()

    assert len(exporter.spans) == 4


async def test_observers_and_exporters_together_see_every_event() -> None:
    seen: list[RunEvent] = []
    exporter = InMemoryTraceExporter()
    app = create_fevex(
        models={"default": _tool_then_answer()},
        agents=[define_agent(name="support", instructions="A.", tools=["accounts_get"])],
        tools=[accounts_get],
        on_event=seen.append,
        observability=Observability(exporters=[exporter]),
    )

    result = await app.run_agent("support", QUESTION)
    await app.flush_observability()

    assert seen == list(result.events)
    assert len(exporter.spans) == 4


# -- configuration and plugins -------------------------------------------------------------


def test_observability_problems_are_reported_with_the_compositions_others() -> None:
    with pytest.raises(FevexConfigurationError) as raised:
        create_fevex(
            agents=[define_agent(name="support", instructions="A.", model="missing")],
            observability=Observability(
                exporters=[object()],  # type: ignore[list-item]
                queue_size=0,
                export_timeout=float("inf"),
                calculate_cost="free",  # type: ignore[arg-type]
            ),
        )
    codes = [problem.code for problem in raised.value.problems]
    assert codes.count("INVALID_OBSERVABILITY") == 4
    assert "MISSING_MODEL" in codes


@pytest.mark.parametrize(
    "policy",
    [
        {"include": {"inputs"}},
        {"include": "input"},
        {"sensitive_keys": ["_"]},
        {"max_length": 3},
    ],
)
def test_a_content_policy_refuses_what_it_cannot_mean(policy: dict[str, Any]) -> None:
    with pytest.raises(FevexConfigurationError) as raised:
        ContentPolicy(**policy)
    assert raised.value.code == "INVALID_OBSERVABILITY"


def test_observability_must_be_an_observability() -> None:
    with pytest.raises(FevexConfigurationError) as raised:
        create_fevex(observability={"exporters": []})  # type: ignore[arg-type]
    assert raised.value.code == "INVALID_OBSERVABILITY"


class NamedExporters:
    """A plugin that registers a trace exporter by name, as fevex-opentelemetry does."""

    def __init__(self) -> None:
        self.built: list[InMemoryTraceExporter] = []

    @hookimpl
    def fevex_register_trace_exporters(self, register: Any) -> None:
        def build(**options: Any) -> InMemoryTraceExporter:
            exporter = InMemoryTraceExporter()
            self.built.append(exporter)
            return exporter

        register("collector", build)


@pytest.mark.usefixtures("fresh_plugins")
async def test_exporters_named_in_the_environment_are_opened_through_plugins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plugin = NamedExporters()
    register_plugin(plugin, name="collector-plugin")
    monkeypatch.setenv("FEVEX_TRACE_EXPORTERS", " collector , ")
    app = create_fevex(
        models={"default": _tool_then_answer()},
        agents=[define_agent(name="support", instructions="A.", tools=["accounts_get"])],
        tools=[accounts_get],
    )

    await app.run_agent("support", QUESTION)
    await app.flush_observability()

    (exporter,) = plugin.built
    assert len(exporter.spans) == 4
    # Exporters given in code are the app's whole list: the environment adds none.
    own = InMemoryTraceExporter()
    create_fevex(observability=Observability(exporters=[own]))
    assert len(plugin.built) == 1


@pytest.mark.usefixtures("fresh_plugins")
def test_an_exporter_plugin_that_builds_no_exporter_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Broken:
        @hookimpl
        def fevex_register_trace_exporters(self, register: Any) -> None:
            register("broken", lambda: object())

    register_plugin(Broken(), name="broken-plugin")
    monkeypatch.setenv("FEVEX_TRACE_EXPORTERS", "broken")

    with pytest.raises(FevexConfigurationError) as raised:
        create_fevex()

    assert raised.value.code == "INVALID_OBSERVABILITY"
    assert "'broken'" in raised.value.message


@pytest.mark.usefixtures("fresh_plugins")
def test_a_missing_exporter_plugin_names_its_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # As on a machine where fevex-opentelemetry is not installed.
    monkeypatch.setattr("fevex.plugins.install_hints.installed_entry_points", list)
    monkeypatch.setenv("FEVEX_TRACE_EXPORTERS", "opentelemetry")

    with pytest.raises(FevexConfigurationError) as raised:
        create_fevex()

    assert raised.value.code == "MISSING_PLUGIN"
    # The suite runs on an install from the checkout, so the hint names its folder.
    assert "pip install -e ./packages/opentelemetry" in raised.value.message


# -- the exporter contract -----------------------------------------------------------------


class SyncListExporter:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self._lock = threading.Lock()

    def export(self, spans: Sequence[Span]) -> None:
        with self._lock:
            self.spans.extend(spans)


class RefusesEmptyBatches:
    def export(self, spans: Sequence[Span]) -> None:
        if not spans:
            raise ValueError("nothing to send")


class NotReentrant:
    """Breaks when two calls overlap, as an exporter sharing one connection would."""

    def __init__(self) -> None:
        self.busy = False

    async def export(self, spans: Sequence[Span]) -> None:
        if self.busy:
            raise RuntimeError("connection in use")
        self.busy = True
        await asyncio.sleep(0.01)
        self.busy = False


class ReturnsStatus:
    def export(self, spans: Sequence[Span]) -> bool:
        return True


async def test_check_trace_exporter_passes_conforming_exporters() -> None:
    memory, plain = InMemoryTraceExporter(), SyncListExporter()

    sent = await check_trace_exporter(memory)
    await check_trace_exporter(plain)

    assert {span.kind for span in sent} == {
        "run",
        "model",
        "tool",
        "workflow_step",
        "team_delegation",
    }
    assert memory.spans.count(sent[0]) == 1 + 1 + 8  # a batch, alone, concurrently
    assert len(plain.spans) == len(memory.spans)


@pytest.mark.parametrize(
    "exporter", [RefusesEmptyBatches(), NotReentrant(), ReturnsStatus(), object()]
)
async def test_check_trace_exporter_refuses_broken_exporters(exporter: Any) -> None:
    with pytest.raises(FevexRunError) as raised:
        await check_trace_exporter(exporter, timeout=5)
    assert raised.value.code == "TRACE_EXPORTER_CONTRACT_VIOLATION"


# -- logs and the public face --------------------------------------------------------------


async def test_steps_are_logged_at_debug_with_the_run_id(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="fevex")
    app = create_fevex(
        models={"default": FakeModel({"output": "Written."})},
        agents=[define_agent(name="support", instructions="Write.")],
        workflows=[review],
    )

    result = await app.run_workflow("review", "a secret draft")

    steps = [
        (record.step_id, record.step_status)
        for record in caplog.records
        if getattr(record, "run_id", None) == result.run_id and hasattr(record, "step_id")
    ]
    assert steps == [
        ("write", "started"),
        ("write", "completed"),
        ("check", "started"),
        ("check", "completed"),
    ]
    model_steps = [r for r in caplog.records if r.getMessage().endswith("model step 1 started")]
    assert len(model_steps) == 1
    assert model_steps[0].levelno == logging.DEBUG
    text = caplog.text + "".join(str(record.__dict__) for record in caplog.records)
    assert "secret" not in text
    assert "Written." not in text


def test_the_public_names_of_observability_and_testing() -> None:
    assert set(fevex.observability.__all__) == {
        "DEFAULT_SENSITIVE_KEYS",
        "REDACTED",
        "AttributeValue",
        "ContentKind",
        "ContentPolicy",
        "Cost",
        "CostCalculator",
        "ExportFailure",
        "InMemoryTraceExporter",
        "Observability",
        "ObservabilityReport",
        "Span",
        "SpanEvent",
        "SpanKind",
        "TraceExporter",
        "redact_sensitive_keys",
    }
    for name in fevex.observability.__all__:
        assert hasattr(fevex.observability, name)
    assert {"InMemoryTraceExporter", "check_trace_exporter", "contract_spans"} <= set(
        fevex.testing.__all__
    )
    from fevex.events import Cost as EventsCost

    assert EventsCost is Cost
