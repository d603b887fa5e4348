"""Durable professional tasks (``fevex.kits.tasks``) on the in-memory store, SQLite and
PostgreSQL: a task is created ready and runs only by ``run_task``; each attempt takes the
lease, re-authorizes, checks revision and deadline and commits its attempt and model
reservation before any step; completed steps never run again; the model calls are the
kernel's count of the task's child runs; cancellation and the deadline stop the waits, and a
checkpoint save under way lands before the lease is released."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from pydantic import BaseModel

from fevex import Fevex, FevexError, create_fevex, define_agent, define_tool
from fevex.errors import FevexConfigurationError, RunCancelledError
from fevex.kits.tasks import TaskContext, TaskStep, define_durable_task
from fevex.models import ModelInput, ModelResult, ToolCall
from fevex.observability import Observability
from fevex.runtime import ExecutionContext
from fevex.runtime.executions import ExecutionCommit
from fevex.runtime.in_memory_run_store import InMemoryRunStore
from fevex.testing import FunctionModel, InMemoryTraceExporter

pytestmark = pytest.mark.anyio

ANA = ExecutionContext(actor={"id": "ana", "type": "user"}, namespace="acme")
BOB = ExecutionContext(actor={"id": "bob", "type": "user"}, namespace="acme")


class Review(BaseModel):
    text: str
    summary: str | None = None
    published: bool = False


class Ledger:
    """What the steps did, outside fevex."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail_publish = 0
        self.receipt_found = False
        self.gate: asyncio.Event | None = None
        self.began = asyncio.Event()


def _answer(model_input: ModelInput) -> ModelResult | str:
    text = next(message.text for message in model_input.messages if message.role == "user")
    if text.startswith("loop"):
        # Asks for a tool on every step: the run needs as many model calls as it is allowed.
        return ModelResult(tool_calls=[ToolCall(f"c{len(model_input.messages)}", "look", {})])
    return f"summary of {text}"


async def look() -> str:
    return "seen"


def _app(ledger: Ledger, url: Any, *, revision: str = "1", **task: Any) -> Fevex:
    async def analyze(state: Review, ctx: TaskContext) -> Review:
        ledger.calls.append(f"analyze {ctx.attempt} {ctx.max_model_calls}")
        ledger.began.set()
        summary = await ctx.run_agent("analyst", state.text)
        if ledger.gate is not None:
            await ledger.gate.wait()
        return state.model_copy(update={"summary": summary})

    def publish(state: Review, ctx: TaskContext) -> Review:
        ledger.calls.append("publish")
        if ledger.fail_publish:
            ledger.fail_publish -= 1
            raise RuntimeError("the printer is down")
        return state.model_copy(update={"published": True})

    def receipt(state: Review, ctx: TaskContext) -> Review | None:
        ledger.calls.append("receipt")
        return state.model_copy(update={"published": True}) if ledger.receipt_found else None

    async def may_review(context: ExecutionContext, state: Review) -> None:
        if (context.actor or {}).get("id") != "ana":
            raise PermissionError("only ana reviews")

    options: dict[str, Any] = {"max_attempts": 3, **task}
    review = define_durable_task(
        id="app.review",
        revision=revision,
        state=Review,
        authorize=may_review,
        steps=[
            TaskStep("analyze", analyze),
            TaskStep("publish", publish, replay="reconcile", reconcile=receipt),
        ],
        **options,
    )
    return create_fevex(
        models={"default": FunctionModel(_answer)},
        agents=[define_agent(name="analyst", instructions="Summarize.", tools=["look"])],
        tools=[define_tool(name="look", description="Look.")(look)],
        tasks=[review],
        run_store=url,
        lease_seconds=2.0,
    )


async def _checkpoint(app: Fevex, task_id: str) -> dict[str, Any]:
    checkpoint = await app.run_store.get_checkpoint(task_id)
    assert isinstance(checkpoint, dict)
    return checkpoint


async def test_a_task_is_created_ready_and_only_run_task_runs_it(url: str | None) -> None:
    ledger = Ledger()
    async with _app(ledger, url) as app:
        task_id = await app.create_task(
            "app.review", Review(text="draft"), deadline=60, model_budget=4, context=ANA
        )
        created = await app.get_run(task_id)
        assert (created.kind, created.name, created.status) == ("task", "app.review", "paused")
        assert created.wake_at is None
        checkpoint = await _checkpoint(app, task_id)
        assert checkpoint["next_step_index"] == 0
        assert checkpoint["attempt_count"] == 0
        assert checkpoint["status"] == "ready"
        assert checkpoint["model_budget"] == {"limit": 4, "reserved": 0, "used": 0}
        assert checkpoint["deadline_at"].endswith("Z")
        assert ledger.calls == []
        # No worker pass starts it; no continuation but run_task does.
        assert (await app.wake_due_runs()).claimed == 0
        assert (await app.recover_expired_runs(actor={"id": "ops"})).claimed == 0
        with pytest.raises(FevexError) as refused:
            await app.resume_run(task_id)
        assert refused.value.code == "TASK_NOT_CONTINUABLE"
        with pytest.raises(FevexError) as refused:
            await app.send_event(task_id, "go")
        assert refused.value.code == "EVENT_NOT_EXPECTED"
        assert ledger.calls == []
        assert [run.id for run in await app.list_runs(kind="task")] == [task_id]

        result = await app.run_task(task_id, context=ANA)
        assert result.output == Review(text="draft", summary="summary of draft", published=True)
        assert ledger.calls == ["analyze 1 4", "publish"]
        checkpoint = await _checkpoint(app, task_id)
        assert checkpoint["status"] == "completed"
        assert checkpoint["attempt_count"] == 1
        assert checkpoint["model_budget"] == {"limit": 4, "reserved": 4, "used": 1}
        (child,) = await app.list_runs(parent_run_id=task_id)
        assert (child.kind, child.name, child.status) == ("agent", "analyst", "completed")
        assert child.context is not None
        assert child.context["actor"]["id"] == "ana"
        assert (await app.get_run(task_id)).status == "completed"
        with pytest.raises(FevexError) as ended:
            await app.run_task(task_id, context=ANA)
        assert ended.value.code == "TASK_ENDED"


async def test_refusals_leave_the_task_ready_and_count_no_attempt(url: str | None) -> None:
    ledger = Ledger()
    async with _app(ledger, url) as app:
        task_id = await app.create_task("app.review", {"text": "d"}, deadline=60)
        with pytest.raises(FevexError) as refused:
            await app.run_task(task_id, context=BOB)
        assert refused.value.code == "TASK_UNAUTHORIZED"
        assert isinstance(refused.value.__cause__, PermissionError)
        async with _app(ledger, url or app.run_store, revision="2") as newer:
            with pytest.raises(FevexError) as mismatch:
                await newer.run_task(task_id, context=ANA)
        assert mismatch.value.code == "TASK_REVISION_MISMATCH"
        run = await app.get_run(task_id)
        assert run.status == "paused"
        assert (await _checkpoint(app, task_id))["attempt_count"] == 0
        assert ledger.calls == []
        await app.run_task(task_id, context=ANA)
        assert ledger.calls == ["analyze 1 None", "publish"]


async def test_authorize_must_return_none() -> None:
    def yes(context: Any, state: Any) -> bool:
        return True

    task = define_durable_task(
        id="t", revision="1", authorize=yes, steps=[TaskStep("s", lambda state, ctx: state)]
    )
    async with create_fevex(tasks=[task]) as app:
        task_id = await app.create_task("t", {"n": 1}, deadline=60)
        with pytest.raises(FevexError) as broken:
            await app.run_task(task_id)
        assert broken.value.code == "KIT_CALLBACK_CONTRACT"
        assert (await app.get_run(task_id)).status == "paused"


async def test_a_failed_attempt_keeps_its_reservation_and_completed_steps(
    url: str | None,
) -> None:
    ledger = Ledger()
    ledger.fail_publish = 1
    async with _app(ledger, url, calls_per_attempt=2) as app:
        task_id = await app.create_task("app.review", {"text": "d"}, deadline=60, model_budget=5)
        with pytest.raises(FevexError) as failed:
            await app.run_task(task_id, context=ANA)
        assert failed.value.code == "TASK_STEP_FAILED"
        run = await app.get_run(task_id)
        assert run.status == "paused"
        assert run.wake_at is None
        checkpoint = await _checkpoint(app, task_id)
        assert checkpoint["next_step_index"] == 1
        assert checkpoint["status"] == "ready"
        assert checkpoint["model_budget"] == {"limit": 5, "reserved": 2, "used": 1}
        assert checkpoint["last_error"]["code"] == "TASK_STEP_FAILED"
        # The reconcile step had started: the next attempt asks for its receipt first.
        assert checkpoint["started_step"] == "publish"
        result = await app.run_task(task_id, context=ANA)
        assert result.output.published is True
        assert ledger.calls == ["analyze 1 2", "publish", "receipt", "publish"]
        checkpoint = await _checkpoint(app, task_id)
        assert checkpoint["attempt_count"] == 2
        assert checkpoint["model_budget"] == {"limit": 5, "reserved": 4, "used": 1}


async def test_attempts_and_budget_run_out() -> None:
    ledger = Ledger()
    ledger.fail_publish = 5
    async with _app(ledger, None, max_attempts=2) as app:
        task_id = await app.create_task("app.review", {"text": "d"}, deadline=60)
        with pytest.raises(FevexError):
            await app.run_task(task_id, context=ANA)
        with pytest.raises(FevexError) as last:
            await app.run_task(task_id, context=ANA)
        assert last.value.code == "TASK_STEP_FAILED"
        run = await app.get_run(task_id)
        assert run.status == "failed"
        assert (await _checkpoint(app, task_id))["status"] == "failed"
        with pytest.raises(FevexError) as ended:
            await app.run_task(task_id, context=ANA)
        assert ended.value.code == "TASK_ENDED"

    ledger = Ledger()
    ledger.fail_publish = 1
    # By default an attempt reserves all that is left, and a failed one keeps it.
    async with _app(ledger, None) as app:
        task_id = await app.create_task("app.review", {"text": "d"}, deadline=60, model_budget=3)
        with pytest.raises(FevexError):
            await app.run_task(task_id, context=ANA)
        with pytest.raises(FevexError) as spent:
            await app.run_task(task_id, context=ANA)
        assert spent.value.code == "TASK_BUDGET_EXHAUSTED"
        assert (await app.get_run(task_id)).status == "failed"
        # The failed publish may have had its effect: its receipt is asked before the end.
        assert ledger.calls == ["analyze 1 3", "publish", "receipt"]


async def test_the_last_attempt_failing_in_a_reconcile_step_asks_its_receipt(
    url: str | None,
) -> None:
    ledger = Ledger()
    ledger.fail_publish = 2
    async with _app(ledger, url, max_attempts=1) as app:
        task_id = await app.create_task("app.review", {"text": "d"}, deadline=60)
        with pytest.raises(FevexError) as failed:
            await app.run_task(task_id, context=ANA)
        assert failed.value.code == "TASK_STEP_FAILED"
        assert ledger.calls == ["analyze 1 None", "publish", "receipt"]
        assert (await app.get_run(task_id)).status == "failed"
        assert (await _checkpoint(app, task_id))["started_step"] == "publish"

        # The receipt finds the effect: the step completes, and with it the task.
        ledger.calls.clear()
        ledger.receipt_found = True
        task_id = await app.create_task("app.review", {"text": "d"}, deadline=60)
        result = await app.run_task(task_id, context=ANA)
        assert result.output.published is True
        assert ledger.calls == ["analyze 1 None", "publish", "receipt"]
        assert (await app.get_run(task_id)).status == "completed"
        checkpoint = await _checkpoint(app, task_id)
        assert (checkpoint["status"], checkpoint["started_step"]) == ("completed", None)
        assert checkpoint["completed_steps"] == ["analyze", "publish"]


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("this exception has no text")


async def test_a_step_raising_what_cannot_be_shown_as_text_is_a_step_failure() -> None:
    def fails(state: Any, ctx: TaskContext) -> Any:
        raise Unprintable

    task = define_durable_task(
        id="t", revision="1", authorize=lambda context, state: None, steps=[TaskStep("s", fails)]
    )
    async with create_fevex(tasks=[task]) as app:
        task_id = await app.create_task("t", {}, deadline=60)
        with pytest.raises(FevexError) as failed:
            await app.run_task(task_id)
        assert failed.value.code == "TASK_STEP_FAILED"
        assert failed.value.details["cause"] == "Unprintable"


async def test_a_child_agent_is_held_to_what_the_attempt_has_left() -> None:
    ledger = Ledger()
    async with _app(ledger, None, calls_per_attempt=2) as app:
        task_id = await app.create_task(
            "app.review", {"text": "loop forever"}, deadline=60, model_budget=10
        )
        with pytest.raises(FevexError) as failed:
            await app.run_task(task_id, context=ANA)
        assert failed.value.code == "MAX_STEPS_EXCEEDED"
        checkpoint = await _checkpoint(app, task_id)
        # Counted from the child's stored run, not told by the step.
        assert checkpoint["model_budget"] == {"limit": 10, "reserved": 2, "used": 2}


async def test_the_deadline_ends_a_task(url: str | None) -> None:
    ledger = Ledger()
    async with _app(ledger, url) as app:
        task_id = await app.create_task("app.review", {"text": "d"}, deadline=0.2)
        await asyncio.sleep(0.3)
        with pytest.raises(FevexError) as late:
            await app.run_task(task_id, context=ANA)
        assert late.value.code == "TASK_DEADLINE_EXCEEDED"
        assert (await app.get_run(task_id)).status == "failed"
        assert ledger.calls == []

        # Reached inside a step, it stops the step's wait.
        ledger.gate = asyncio.Event()
        task_id = await app.create_task("app.review", {"text": "d"}, deadline=1.0)
        began = time.monotonic()
        with pytest.raises(RunCancelledError) as stopped:
            await app.run_task(task_id, context=ANA)
        assert stopped.value.details["reason"] == "timeout"
        assert time.monotonic() - began < 5
        assert (await app.get_run(task_id)).status == "cancelled"
        assert (await _checkpoint(app, task_id))["status"] == "cancelled"


async def test_cancel_stops_the_wait_for_authorize() -> None:
    entered, stopped = asyncio.Event(), asyncio.Event()

    async def slow(context: Any, state: Any) -> None:
        entered.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    task = define_durable_task(
        id="t", revision="1", authorize=slow, steps=[TaskStep("s", lambda state, ctx: state)]
    )
    async with create_fevex(tasks=[task]) as app:
        task_id = await app.create_task("t", {}, deadline=60)
        running = asyncio.create_task(app.run_task(task_id))
        await asyncio.wait_for(entered.wait(), 10)
        cancelled = await app.cancel_run(task_id)
        assert cancelled.status == "cancelled"
        assert stopped.is_set()
        with pytest.raises(RunCancelledError):
            await running


async def test_a_concurrent_caller_gets_run_conflict(url: str | None) -> None:
    ledger = Ledger()
    ledger.gate = asyncio.Event()
    async with _app(ledger, url) as app:
        task_id = await app.create_task("app.review", {"text": "d"}, deadline=60)
        first = asyncio.create_task(app.run_task(task_id, context=ANA))
        await asyncio.wait_for(ledger.began.wait(), 10)
        with pytest.raises(FevexError) as conflict:
            await app.run_task(task_id, context=ANA)
        assert conflict.value.code == "RUN_CONFLICT"
        with pytest.raises(FevexError) as refused:
            await app.recover_run(task_id, actor={"id": "ops"})
        assert refused.value.code == "TASK_NOT_CONTINUABLE"
        ledger.gate.set()
        assert (await first).output.published is True
        assert ledger.calls == ["analyze 1 None", "publish"]


class SlowCommits(InMemoryRunStore):
    """An in-memory store whose commit of a completed task step takes a while, and that
    records the order in which commits landed."""

    def __init__(self) -> None:
        super().__init__()
        self.landed: list[tuple[tuple[str, ...], bool]] = []
        self.delaying = asyncio.Event()

    async def commit_execution(self, commit: ExecutionCommit) -> Any:
        types = tuple(event.type for event in commit.events)
        if "task.step.completed" in types and not self.delaying.is_set():
            self.delaying.set()
            await asyncio.sleep(0.5)
        result = await super().commit_execution(commit)
        self.landed.append((types, commit.release_lease))
        return result


async def test_a_checkpoint_save_under_way_lands_before_the_lease_is_released() -> None:
    store = SlowCommits()
    ledger = Ledger()
    async with _app(ledger, store) as app:
        task_id = await app.create_task("app.review", {"text": "d"}, deadline=60)
        running = asyncio.create_task(app.run_task(task_id, context=ANA))
        await asyncio.wait_for(store.delaying.wait(), 10)
        cancelled = await app.cancel_run(task_id)
        assert cancelled.status == "cancelled"
        with pytest.raises(RunCancelledError):
            await running
        saved = [i for i, (types, _) in enumerate(store.landed) if "task.step.completed" in types]
        released = [i for i, (types, release) in enumerate(store.landed) if release]
        assert saved
        assert saved[0] < released[-1]
        assert "run.cancelled" in store.landed[released[-1]][0]
        checkpoint = await _checkpoint(app, task_id)
        assert checkpoint["next_step_index"] == 1
        assert checkpoint["completed_steps"] == ["analyze"]
        assert checkpoint["status"] == "cancelled"
        assert ledger.calls == ["analyze 1 None"]


async def test_a_task_run_and_its_steps_are_traced() -> None:
    exporter = InMemoryTraceExporter()
    task = define_durable_task(
        id="t",
        revision="1",
        authorize=lambda context, state: None,
        steps=[TaskStep("one", lambda s, ctx: s), TaskStep("two", lambda s, ctx: s)],
    )
    async with create_fevex(tasks=[task], observability=Observability(exporters=[exporter])) as app:
        task_id = await app.create_task("t", {"n": 1}, deadline=60)
        await app.run_task(task_id)
        await app.flush_observability()
    runs = [s for s in exporter.of_kind("run") if s.attributes.get("fevex.run.id") == task_id]
    assert [s.attributes["fevex.execution.end"] for s in runs] == ["paused", "completed"]
    steps = exporter.of_kind("workflow_step")
    assert sorted(s.name for s in steps) == ["fevex.task.step one", "fevex.task.step two"]
    assert {s.parent_span_id for s in steps} == {runs[1].span_id}


def test_task_definitions_are_checked() -> None:
    def step(state: Any, ctx: Any) -> Any:
        return state

    with pytest.raises(FevexError) as missing:
        TaskStep("s", step, replay="reconcile").check()
    assert missing.value.code == "KIT_CALLBACK_CONTRACT"
    with pytest.raises(FevexConfigurationError) as empty:
        define_durable_task(id="t", revision="1", authorize=step, steps=[])
    assert empty.value.code == "INVALID_TASK"
    task = define_durable_task(
        id="analyst", revision="1", authorize=step, steps=[TaskStep("s", step)]
    )
    with pytest.raises(FevexConfigurationError) as taken:
        create_fevex(
            models={"default": FunctionModel(_answer)},
            agents=[define_agent(name="analyst", instructions="x")],
            tasks=[task],
        )
    assert taken.value.code == "INVALID_TASK"
