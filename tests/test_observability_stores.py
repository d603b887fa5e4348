"""Traces that outlive the process that started them, on SQLite and PostgreSQL: a run
resumed by another app, a workflow whose child finishes elsewhere, and a run recovered
after its worker process was killed all continue the trace their first execution began,
with nothing stored for it."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from fevex import (
    ApprovalDecision,
    Fevex,
    FevexRunError,
    RunPausedError,
    WorkflowStep,
    create_fevex,
    define_agent,
    define_tool,
    define_workflow,
)
from fevex.models import Completed, ModelInput, ModelResult, OutputDelta, ToolCall
from fevex.observability import InMemoryTraceExporter, Observability, Span
from fevex.plugins import hookimpl, register_plugin, reset_plugins

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent / "durable"


class Refund(BaseModel):
    account_id: int


@define_tool(name="refund", description="Refund an account.", approval="required")
async def refund(request: Refund) -> str:
    return "refunded"


@define_workflow(name="settle", version="1")
async def settle(step: WorkflowStep, account: str) -> str:
    settled = await step.agent("refund", "support", input=f"Refund {account}.")
    return str(settled.output)


class RefundModel:
    """Asks for the refund, and answers once its result is in the conversation: every app
    (and every process) gets the same answer to the same conversation."""

    async def stream(self, input: ModelInput) -> AsyncIterator[Any]:
        if input.messages[-1].role == "tool":
            yield OutputDelta("Refunded.")
            yield Completed(ModelResult(output="Refunded."))
        else:
            call = ToolCall("call-r", "refund", {"account_id": 7})
            yield Completed(ModelResult(tool_calls=[call]))


def _app(store_url: str, exporter: InMemoryTraceExporter) -> Fevex:
    return create_fevex(
        models={"default": RefundModel()},
        agents=[define_agent(name="support", instructions="Refund.", tools=["refund"])],
        tools=[refund],
        workflows=[settle],
        run_store=store_url,
        observability=Observability(exporters=[exporter]),
    )


def _trace_of(run_id: str) -> str:
    return hashlib.sha256(run_id.encode()).hexdigest()[:32]


def _runs(spans: Sequence[Span], run_id: str) -> list[Span]:
    return [s for s in spans if s.kind == "run" and s.attributes.get("fevex.run.id") == run_id]


async def _approve(app: Fevex, run_id: str) -> Any:
    run = await app.get_run(run_id)
    assert run.pause is not None
    approval = run.pause["approvals"][0]["id"]
    return await app.resume_run(run_id, ApprovalDecision(approval, "approve", {"id": "ops"}))


async def test_a_run_resumed_by_another_app_continues_its_trace(store_url: str) -> None:
    first_exporter, second_exporter = InMemoryTraceExporter(), InMemoryTraceExporter()
    first = _app(store_url, first_exporter)
    with pytest.raises(RunPausedError) as paused:
        await first.run_agent("support", "Refund 7.")
    run_id = paused.value.run_id
    await first.close()

    second = _app(store_url, second_exporter)
    result = await _approve(second, run_id)
    await second.close()

    assert result.output == "Refunded."
    (opened,) = first_exporter.of_kind("run")
    assert opened.kind == "run"
    assert opened.attributes["fevex.execution.end"] == "paused"
    resumed = _runs(second_exporter.spans, run_id)
    assert [s.attributes["fevex.execution.opening"] for s in resumed] == ["resumed"]
    assert resumed[0].parent_span_id == opened.span_id
    assert {s.trace_id for s in (*first_exporter.spans, *second_exporter.spans)} == {
        _trace_of(run_id)
    }
    (tool,) = second_exporter.of_kind("tool")
    assert tool.parent_span_id == resumed[0].span_id
    assert tool.attributes["gen_ai.tool.call.id"] == "call-r"


async def test_a_workflows_child_finished_by_another_app_stays_under_its_step(
    store_url: str,
) -> None:
    first_exporter, second_exporter = InMemoryTraceExporter(), InMemoryTraceExporter()
    first = _app(store_url, first_exporter)
    with pytest.raises(RunPausedError) as paused:
        await first.run_workflow("settle", "7")
    workflow_id = paused.value.run_id
    (child,) = await first.list_runs(parent_run_id=workflow_id)
    await first.close()

    second = _app(store_url, second_exporter)
    await _approve(second, child.id)
    result = await second.resume_run(workflow_id)
    await second.close()

    assert result.output == "Refunded."
    spans = [*first_exporter.spans, *second_exporter.spans]
    assert {s.trace_id for s in spans} == {_trace_of(workflow_id)}
    (step,) = second_exporter.of_kind("workflow_step")
    assert step.attributes["fevex.workflow.step.id"] == "refund"
    assert step.attributes["fevex.workflow.step.continued"] is True
    assert step.attributes["fevex.child_run.id"] == child.id
    child_first, child_resumed = _runs(spans, child.id)
    # The child's first execution (in the first app) hangs under the step the second app
    # finished: its id was derived, never stored.
    assert child_first.parent_span_id == step.span_id
    assert child_resumed.parent_span_id == child_first.span_id
    workflow_first, workflow_woken = _runs(spans, workflow_id)
    assert workflow_first.parent_span_id is None
    assert [e.name for e in workflow_first.events] == ["fevex.workflow.waiting"]
    assert workflow_first.events[0].attributes["fevex.pause.reason"] == "children"
    assert workflow_woken.parent_span_id == workflow_first.span_id
    assert step.parent_span_id == workflow_woken.span_id


class CollectorPlugin:
    """Registers the ``collector`` trace exporter the environment names."""

    def __init__(self) -> None:
        self.exporter = InMemoryTraceExporter()

    @hookimpl
    def fevex_register_trace_exporters(self, register: Any) -> None:
        register("collector", lambda: self.exporter)


@pytest.fixture
def collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[CollectorPlugin]:
    plugin = CollectorPlugin()
    reset_plugins()
    register_plugin(plugin, name="collector-plugin")
    yield plugin
    reset_plugins()


def _start_and_kill_a_worker(environment: dict[str, str]) -> str:
    """Start a run in a worker process and kill it (SIGKILL) once the run exists."""
    worker = subprocess.Popen(
        [sys.executable, str(HERE / "durable_app.py")],
        env={**environment, "FEVEX_TEST_TOOL_DELAY": "2"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    run_id = worker.stdout.readline().strip()
    worker.send_signal(signal.SIGKILL)
    worker.communicate(timeout=10)
    assert run_id.startswith("run_")
    return run_id


def _load_durable_app() -> Any:
    spec = importlib.util.spec_from_file_location("durable_app", HERE / "durable_app.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_a_run_recovered_after_its_worker_was_killed_continues_its_trace(
    environment: dict[str, str],
    collector: CollectorPlugin,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_id = await asyncio.to_thread(_start_and_kill_a_worker, environment)
    # The app is configured without code: its exporter comes from the environment.
    monkeypatch.setenv("FEVEX_TRACE_EXPORTERS", "collector")
    monkeypatch.setenv("FEVEX_TEST_TOOL_DELAY", "0")
    app = _load_durable_app().build_app()

    deadline = time.monotonic() + 30
    while True:
        try:
            result = await app.recover_run(run_id, actor={"id": "ops"})
            break
        except FevexRunError as error:
            # RUN_CONFLICT: the killed worker's lease has not lapsed yet.
            if error.code != "RUN_CONFLICT" or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
    await app.close()

    assert result.output == "Charged."
    spans = collector.exporter.spans
    (recovered,) = _runs(spans, run_id)
    assert recovered.attributes["fevex.execution.opening"] == "recovered"
    assert recovered.trace_id == _trace_of(run_id)
    # The killed process's first execution: never exported, still the parent by its id.
    first = hashlib.blake2b(f"{run_id}\x1frun".encode(), digest_size=8).hexdigest()
    assert recovered.parent_span_id == first
    assert {s.trace_id for s in spans} == {recovered.trace_id}
    assert [s.attributes["gen_ai.operation.name"] for s in spans if s.kind == "model"] != []
