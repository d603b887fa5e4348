"""``cancel_run`` of a run another app executes: the request is recorded in the store, the
owner learns of it at its next lease renewal and cancels the run; a run whose owner cannot
obey is taken over and cancelled. Two apps sharing one in-memory store stand for two
processes (the cross-process tests in /tests run the same on SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel

from fevex import (
    Fevex,
    FevexRunError,
    RunCancelledError,
    RunPausedError,
    ToolContext,
    create_fevex,
    define_agent,
    define_tool,
)
from fevex.models import ModelInput, ModelStreamEvent
from fevex.runtime import AgentRun, InMemoryRunStore
from fevex.testing import FakeModel, ManualClock

pytestmark = pytest.mark.anyio

LEASE = 0.3  # seconds; the owner renews every 0.1 s
GUARD = 10.0  # seconds; a hang guard, never a timing assertion


class Amount(BaseModel):
    amount: int


class SlowTool:
    """A keyed tool that waits until cancelled (or released), noting what it saw."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled: list[bool] = []
        self.calls = 0

        async def slow(request: Amount, context: ToolContext) -> dict[str, int]:
            self.calls += 1
            self.entered.set()
            try:
                await self.release.wait()
            finally:
                self.cancelled.append(context.cancelled)
            return {"done": request.amount}

        self.tool = define_tool(name="slow", description="Slow.", idempotency="keyed")(slow)


@define_tool(name="refund", description="Refund.", approval="required")
async def refund(request: Amount) -> dict[str, int]:
    return {"refunded": request.amount}


class GatedModel:
    """Answers with ``FakeModel``'s responses once ``gate`` is open."""

    def __init__(self, *responses: Any) -> None:
        self.gate = asyncio.Event()
        self.asked = asyncio.Event()
        self._inner = FakeModel(*responses)

    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        self.asked.set()
        await self.gate.wait()
        async for event in self._inner.stream(input):
            yield event


def call(name: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": "c1", "name": name, "input": {"amount": 30}}]}


def make_app(
    model: Any, store: InMemoryRunStore, tools: list[Any], lease_seconds: float = LEASE
) -> Fevex:
    return create_fevex(
        models={"default": model},
        agents=[define_agent(name="billing", instructions="Bill.", tools=[t.name for t in tools])],
        tools=tools,
        run_store=store,
        lease_seconds=lease_seconds,
    )


async def only_run(store: InMemoryRunStore) -> AgentRun:
    (run,) = await store.list_runs()
    return run


async def assert_cancelled_and_free(app: Fevex, run_id: str) -> AgentRun:
    run = await app.get_run(run_id)
    assert run.status == "cancelled"
    assert run.cancel_requested
    events = await app.list_events(run_id)
    assert events[-1].type == "run.cancelled"
    assert events[-1].payload == {"reason": "aborted"}
    assert [e.type for e in events].count("run.cancelled") == 1
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    session = await app.get_session(run.session_id)
    assert session.active_run_id is None
    return run


async def test_another_app_cancels_a_run_this_app_executes() -> None:
    store = InMemoryRunStore()
    slow = SlowTool()
    owner = make_app(FakeModel(call("slow")), store, [slow.tool])
    other = make_app(FakeModel(), store, [slow.tool])
    running = asyncio.create_task(owner.run_agent("billing", "go"))
    await asyncio.wait_for(slow.entered.wait(), GUARD)
    run = await only_run(store)

    cancelled = await asyncio.wait_for(other.cancel_run(run.id), GUARD)

    assert cancelled.status == "cancelled"
    # The owner obeyed (a takeover would have ended it with LEASE_LOST): its run_agent
    # raises RunCancelledError, and its tool saw the cancellation.
    with pytest.raises(RunCancelledError) as caught:
        await asyncio.wait_for(running, GUARD)
    assert caught.value.reason == "aborted"
    assert slow.cancelled == [True]
    assert await assert_cancelled_and_free(other, run.id) == cancelled
    # Cancelling it again changes nothing.
    assert await other.cancel_run(run.id) == cancelled


async def test_a_stream_that_waits_for_its_consumer_is_cancelled_on_request() -> None:
    store = InMemoryRunStore()
    owner = make_app(FakeModel({"output": "never read"}), store, [refund])
    other = make_app(FakeModel(), store, [refund])
    stream = owner.stream_agent("billing", "hi")
    try:
        started = await anext(stream)  # the run now waits for its consumer to ask again

        cancelled = await asyncio.wait_for(other.cancel_run(started.run_id), GUARD)

        assert cancelled.status == "cancelled"
        with pytest.raises(RunCancelledError):
            await asyncio.wait_for(anext(stream), GUARD)
    finally:
        await stream.aclose()
    await assert_cancelled_and_free(other, started.run_id)
    assert "model.started" not in [e.type for e in await other.list_events(started.run_id)]


async def test_the_request_outlives_a_requester_that_stops_waiting() -> None:
    store = InMemoryRunStore()
    slow = SlowTool()
    owner = make_app(FakeModel(call("slow")), store, [slow.tool])
    other = make_app(FakeModel(), store, [slow.tool])
    running = asyncio.create_task(owner.run_agent("billing", "go"))
    await asyncio.wait_for(slow.entered.wait(), GUARD)
    run = await only_run(store)

    answered = await other.cancel_run(run.id, timeout=0.001)

    assert (answered.status, answered.cancel_requested) == ("running", True)
    with pytest.raises(RunCancelledError):
        await asyncio.wait_for(running, GUARD)
    await assert_cancelled_and_free(other, run.id)


async def test_a_run_whose_owner_froze_past_its_lease_is_taken_over_and_cancelled() -> None:
    clock = ManualClock()
    store = InMemoryRunStore(clock=clock)
    slow = SlowTool()
    # The owner would renew only after 10 s: it never learns of the request.
    owner = make_app(FakeModel(call("slow")), store, [slow.tool], lease_seconds=30.0)
    other = make_app(FakeModel(), store, [slow.tool])
    running = asyncio.create_task(owner.run_agent("billing", "go"))
    await asyncio.wait_for(slow.entered.wait(), GUARD)
    run = await only_run(store)
    clock.advance(60.0)  # by the store's clock, the owner's lease has expired

    cancelled = await asyncio.wait_for(other.cancel_run(run.id), GUARD)

    assert cancelled.status == "cancelled"
    await assert_cancelled_and_free(other, run.id)
    # The owner that was taken over writes nothing more.
    before = await other.list_events(run.id)
    slow.release.set()
    with pytest.raises(FevexRunError) as caught:
        await asyncio.wait_for(running, GUARD)
    assert caught.value.code == "LEASE_LOST"
    assert await other.list_events(run.id) == before


async def test_a_run_that_paused_before_obeying_is_cancelled_paused() -> None:
    store = InMemoryRunStore()
    model = GatedModel(call("refund"))
    # A long lease: the run pauses long before its owner's first renewal.
    owner = make_app(model, store, [refund], lease_seconds=30.0)
    other = make_app(FakeModel(), store, [refund], lease_seconds=30.0)
    running = asyncio.create_task(owner.run_agent("billing", "refund"))
    await asyncio.wait_for(model.asked.wait(), GUARD)
    run = await only_run(store)
    cancelling = asyncio.create_task(other.cancel_run(run.id))
    while not (await other.get_run(run.id)).cancel_requested:  # noqa: ASYNC110 - polled
        await asyncio.sleep(0.01)
    model.gate.set()
    with pytest.raises(RunPausedError):
        await asyncio.wait_for(running, GUARD)

    cancelled = await asyncio.wait_for(cancelling, GUARD)

    assert cancelled.status == "cancelled"
    await assert_cancelled_and_free(other, run.id)


async def test_resuming_a_paused_run_asked_to_cancel_cancels_it() -> None:
    store = InMemoryRunStore()
    model = GatedModel(call("refund"), {"output": "never"})
    owner = make_app(model, store, [refund], lease_seconds=30.0)
    running = asyncio.create_task(owner.run_agent("billing", "refund"))
    await asyncio.wait_for(model.asked.wait(), GUARD)
    run = await store.request_cancel((await only_run(store)).id)
    model.gate.set()
    with pytest.raises(RunPausedError) as paused:
        await asyncio.wait_for(running, GUARD)
    assert (await owner.get_run(run.id)).cancel_requested

    approval = paused.value.pause["approvals"][0]["id"]
    decision = {"approval_id": approval, "decision": "approve", "actor": {"id": "reviewer"}}
    with pytest.raises(RunCancelledError):
        await owner.resume_run(run.id, decision)

    await assert_cancelled_and_free(owner, run.id)
    assert "run.resumed" not in [e.type for e in await owner.list_events(run.id)]


async def orphan_asked_to_cancel(slow: SlowTool) -> tuple[InMemoryRunStore, AgentRun, Any]:
    """A run whose owner froze inside its tool past its lease, asked to cancel since; and
    the frozen owner's task, for the test to end."""
    clock = ManualClock()
    store = InMemoryRunStore(clock=clock)
    owner = make_app(FakeModel(call("slow")), store, [slow.tool], lease_seconds=30.0)
    frozen = asyncio.create_task(owner.run_agent("billing", "go"))
    await asyncio.wait_for(slow.entered.wait(), GUARD)
    run = await store.request_cancel((await only_run(store)).id)
    assert (run.status, run.cancel_requested) == ("running", True)
    clock.advance(60.0)
    return store, run, frozen


async def test_recovering_a_run_asked_to_cancel_cancels_it() -> None:
    slow = SlowTool()
    store, run, frozen = await orphan_asked_to_cancel(slow)
    rescuer = make_app(FakeModel({"output": "never"}), store, [slow.tool])

    with pytest.raises(RunCancelledError):
        await rescuer.recover_run(run.id, actor={"id": "operator"})

    await assert_cancelled_and_free(rescuer, run.id)
    assert slow.calls == 1  # the keyed tool was not retried
    assert "run.recovered" not in [e.type for e in await rescuer.list_events(run.id)]
    frozen.cancel()


async def test_a_recovery_sweep_cancels_a_run_asked_to_cancel(
    caplog: pytest.LogCaptureFixture,
) -> None:
    slow = SlowTool()
    store, run, frozen = await orphan_asked_to_cancel(slow)
    rescuer = make_app(FakeModel({"output": "never"}), store, [slow.tool])

    with caplog.at_level(logging.WARNING, logger="fevex"):
        sweep = await rescuer.recover_expired_runs(actor={"id": "sweeper"})

    assert [(r.id, r.status) for r in sweep.recovered] == [(run.id, "cancelled")]
    assert (sweep.skipped, sweep.unclaimed) == ((), ())
    assert not [r for r in caplog.records if run.id in r.getMessage()]
    await assert_cancelled_and_free(rescuer, run.id)
    assert slow.calls == 1
    frozen.cancel()


async def test_cancel_run_refuses_a_timeout_that_is_not_positive_seconds() -> None:
    app = make_app(FakeModel(), InMemoryRunStore(), [refund])
    timeout: Any
    for timeout in (0, -1, True, "1"):
        with pytest.raises(FevexRunError) as caught:
            await app.cancel_run("run_unknown", timeout=timeout)
        assert caught.value.code == "INVALID_ARGUMENT"
    with pytest.raises(FevexRunError) as caught:
        await app.cancel_run("run_unknown")
    assert caught.value.code == "RUN_NOT_FOUND"
