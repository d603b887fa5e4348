"""Parallel steps and compensations on every store: branches settled together, failures
reported in declaration order, pauses resolved one at a time from another app, and
compensations run in reverse completed order, journalled, resumed after a crash."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel

from fevex import (
    Fevex,
    FevexRunError,
    RunPausedError,
    WorkflowStep,
    create_fevex,
    define_tool,
    define_workflow,
)
from fevex.events import EVENT_TYPES

pytestmark = pytest.mark.anyio

LEASE = 1.0


class Crash(BaseException):
    """A process dying mid-step: nothing of fevex's handles it."""


ledger: Counter[str] = Counter()
undone: list[str] = []
crash_at: set[str] = set()
failing: set[str] = set()


def record(name: str, value: Any) -> Any:
    ledger[name] += 1
    if name in failing:
        raise ValueError(f"{name} is out of stock")
    return value


def undo(result: Any) -> None:
    name = f"undo-{result}"
    ledger[name] += 1
    undone.append(name)
    if name in crash_at:
        crash_at.discard(name)
        raise Crash(name)
    if name in failing:
        raise RuntimeError(f"{name} cannot reach the bank")


async def undo_async(result: Any) -> None:
    undo(result)


@define_tool(name="reserve", description="Reserve.", idempotency="keyed")
def reserve(item: str) -> str:
    ledger[f"reserve-{item}"] += 1
    return item


@define_workflow(name="fan", version="1")
async def fan(step: WorkflowStep, input: Any) -> dict[str, Any]:
    async def left() -> Any:
        return await step.run("left", record, "left", 1)

    async def right() -> Any:
        first = await step.run("right-1", record, "right-1", 2)
        return [first, await step.tool("right-2", "reserve", {"item": "r"})]

    return await step.parallel("both", {"left": left, "right": right})


@define_workflow(name="three-fail", version="1")
async def three_fail(step: WorkflowStep, input: Any) -> Any:
    late = asyncio.Event()

    async def ok() -> Any:
        return await step.run("ok", record, "ok", "ok", compensate=undo)

    async def first() -> Any:
        await late.wait()  # fails after the second: declaration order still wins
        return await step.run("first", record, "first", 1)

    async def second() -> Any:
        try:
            return await step.run("second", record, "second", 2)
        finally:
            late.set()

    return await step.parallel("all", {"ok": ok, "first": first, "second": second})


@define_workflow(name="two-waits", version="1", events={"x": None, "y": None})
async def two_waits(step: WorkflowStep, input: Any) -> dict[str, Any]:
    async def x() -> Any:
        return (await step.wait_for_event("wait-x", "x")).payload

    async def y() -> Any:
        return (await step.wait_for_event("wait-y", "y")).payload

    async def work() -> Any:
        return await step.run("work", record, "work", "done")

    return await step.parallel("waits", {"x": x, "y": y, "work": work})


class Approved(BaseModel):
    approved: bool


@define_workflow(name="deliveries", version="1", events={"x": Approved, "y": None})
async def deliveries(step: WorkflowStep, input: Any) -> dict[str, Any]:
    async def x() -> Any:
        return await step.wait_for_event("wait-x", "x")

    async def y() -> Any:
        return await step.wait_for_event("wait-y", "y")

    got = await step.parallel("both", {"x": x, "y": y})
    assert isinstance(got["x"].payload, Approved)
    return {"x": got["x"].payload.approved, "y": got["y"].payload, "by": got["x"].actor["id"]}


@define_workflow(name="saga", version="1")
async def saga(step: WorkflowStep, input: Any) -> str:
    await step.run("a", record, "a", "a", compensate=undo)
    await step.run("plain", record, "plain", "plain")
    await step.tool("b", "reserve", {"item": "b"}, compensate=undo_async)
    await step.run("c", record, "c", "c", compensate=undo)
    await step.run("boom", record, "boom", "boom")
    return "never"


@define_workflow(name="parallel-saga", version="1")
async def parallel_saga(step: WorkflowStep, input: Any) -> str:
    p_done = asyncio.Event()

    async def q() -> Any:
        await p_done.wait()
        return await step.run("q", record, "q", "q", compensate=undo)

    async def p() -> Any:
        try:
            return await step.run("p", record, "p", "p", compensate=undo)
        finally:
            p_done.set()

    await step.parallel("pq", {"q": q, "p": p})
    await step.run("boom", record, "boom", "boom")
    return "never"


WORKFLOWS = [fan, three_fail, two_waits, deliveries, saga, parallel_saga]


def make_app(store: Any) -> Fevex:
    return create_fevex(tools=[reserve], workflows=WORKFLOWS, run_store=store, lease_seconds=LEASE)


@pytest.fixture(autouse=True)
def clean_ledger() -> None:
    ledger.clear()
    undone.clear()
    crash_at.clear()
    failing.clear()


@pytest.fixture
async def apps(url: str | None) -> AsyncIterator[tuple[Fevex, Fevex]]:
    """Two apps sharing one store: two processes, as far as the store can tell."""
    first = make_app(url)
    second = make_app(url if url is not None else first.run_store)
    yield first, second
    if url is not None:
        await second.close()
    await first.close()


async def test_parallel_branches_return_their_results_by_name(apps: tuple[Fevex, Fevex]) -> None:
    app, _ = apps
    result = await app.run_workflow("fan")

    assert result.output == {"left": 1, "right": [2, "r"]}
    assert ledger == Counter({"left": 1, "right-1": 1, "reserve-r": 1})
    events = await app.list_events(result.run_id)
    assert {event.type for event in events} <= set(EVENT_TYPES)
    completed = {
        e.payload["step_id"]: e.payload for e in events if e.type == "workflow.step.completed"
    }
    assert set(completed) == {"left", "right-1", "right-2", "both"}
    assert completed["both"]["kind"] == "parallel"
    assert completed["both"]["output"] == {"left": 1, "right": [2, "r"]}
    assert [event.sequence for event in events] == list(range(1, len(events) + 1))


async def test_several_failed_branches_are_reported_in_declaration_order(
    apps: tuple[Fevex, Fevex],
) -> None:
    app, _ = apps
    failing.update({"first", "second"})

    with pytest.raises(FevexRunError) as failed:
        await app.run_workflow("three-fail")

    assert failed.value.code == "WORKFLOW_PARALLEL_FAILED"
    failures = failed.value.details["failures"]
    assert [failure["branch"] for failure in failures] == ["first", "second"]
    assert [failure["error"]["code"] for failure in failures] == ["WORKFLOW_STEP_FAILED"] * 2
    assert "first is out of stock" in failures[0]["error"]["message"]
    # The branch that succeeded was settled and journalled, and its compensation ran.
    assert ledger == Counter({"ok": 1, "first": 1, "second": 1, "undo-ok": 1})
    run = await app.get_run(failed.value.run_id or "")
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["code"] == "WORKFLOW_PARALLEL_FAILED"
    events = await app.list_events(run.id)
    ended = [e.payload["step_id"] for e in events if e.type.startswith("workflow.step.")]
    assert "ok" in ended
    assert [e.payload["step_id"] for e in events if e.type == "workflow.step.failed"][-1] == "all"


async def test_one_failed_branch_is_raised_as_it_is(apps: tuple[Fevex, Fevex]) -> None:
    app, _ = apps
    failing.add("second")

    with pytest.raises(FevexRunError) as failed:
        await app.run_workflow("three-fail")

    assert failed.value.code == "WORKFLOW_STEP_FAILED"
    assert "second is out of stock" in failed.value.message
    assert ledger == Counter({"ok": 1, "first": 1, "second": 1, "undo-ok": 1})


async def test_several_pauses_are_resolved_one_at_a_time_without_rerunning_branches(
    apps: tuple[Fevex, Fevex],
) -> None:
    app, other = apps
    with pytest.raises(RunPausedError) as paused:
        await app.run_workflow("two-waits")
    run_id = paused.value.run_id
    run = await other.get_run(run_id)
    assert run.pause is not None
    assert (run.pause["step_id"], run.pause["event"]) == ("wait-x", "x")
    with pytest.raises(FevexRunError) as early:
        await other.send_event(run_id, "y", "why")
    assert early.value.code == "EVENT_NOT_EXPECTED"

    with pytest.raises(RunPausedError):
        await other.send_event(run_id, "x", "ex")
    run = await app.get_run(run_id)
    assert run.pause is not None
    assert (run.pause["step_id"], run.pause["event"]) == ("wait-y", "y")

    result = await app.send_event(run_id, "y", "why")

    assert result.output == {"x": "ex", "y": "why", "work": "done"}
    assert ledger == Counter({"work": 1})
    events = await app.list_events(run_id)
    waiting = [e.payload["step_id"] for e in events if e.type == "workflow.waiting"]
    assert waiting == ["wait-x", "wait-y"]
    received = [e.payload["step_id"] for e in events if e.type == "workflow.event.received"]
    assert received == ["wait-x", "wait-y"]
    assert [event.sequence for event in events] == list(range(1, len(events) + 1))


async def test_a_failure_runs_compensations_in_reverse_completed_order(
    apps: tuple[Fevex, Fevex],
) -> None:
    app, _ = apps
    failing.add("boom")

    with pytest.raises(FevexRunError) as failed:
        await app.run_workflow("saga")

    assert failed.value.code == "WORKFLOW_STEP_FAILED"
    assert undone == ["undo-c", "undo-b", "undo-a"]
    assert ledger["reserve-b"] == 1
    events = await app.list_events(failed.value.run_id or "")
    assert {event.type for event in events} <= set(EVENT_TYPES)
    compensations = [
        (e.type, e.payload["step_id"]) for e in events if e.type.startswith("workflow.comp")
    ]
    assert compensations == [
        ("workflow.compensation.started", "c"),
        ("workflow.compensation.completed", "c"),
        ("workflow.compensation.started", "b"),
        ("workflow.compensation.completed", "b"),
        ("workflow.compensation.started", "a"),
        ("workflow.compensation.completed", "a"),
    ]
    assert events[-1].type == "run.failed"
    assert events[-1].payload["error"]["code"] == "WORKFLOW_STEP_FAILED"


async def test_a_branch_may_return_the_event_delivery_it_waited_for(
    apps: tuple[Fevex, Fevex],
) -> None:
    app, other = apps
    ada = {"id": "ada", "type": "user"}
    with pytest.raises(RunPausedError) as paused:
        await app.run_workflow("deliveries")
    run_id = paused.value.run_id
    with pytest.raises(RunPausedError):
        await other.send_event(run_id, "x", {"approved": True}, actor=ada)

    result = await app.send_event(run_id, "y", "why")

    assert result.output == {"x": True, "y": "why", "by": "ada"}
    events = await app.list_events(run_id)
    completed = {
        e.payload["step_id"]: e.payload for e in events if e.type == "workflow.step.completed"
    }
    # Journalled as the deliveries' JSON: the payload as it was sent, actor and time.
    both = completed["both"]["output"]
    assert both["x"]["payload"] == {"approved": True}
    assert both["x"]["actor"] == ada
    assert both["y"]["payload"] == "why"
    received = {
        e.payload["step_id"]: e.payload for e in events if e.type == "workflow.event.received"
    }
    assert both["y"]["received_at"] == received["wait-y"]["received_at"]


async def test_compensations_follow_the_completed_order_of_parallel_branches(
    apps: tuple[Fevex, Fevex],
) -> None:
    app, _ = apps
    failing.add("boom")

    with pytest.raises(FevexRunError):
        await app.run_workflow("parallel-saga")

    # q is declared first but completed last: it is undone first.
    assert undone == ["undo-q", "undo-p"]


async def test_a_failing_compensation_fails_the_run_with_both_errors(
    apps: tuple[Fevex, Fevex],
) -> None:
    app, _ = apps
    failing.update({"boom", "undo-b"})

    with pytest.raises(FevexRunError) as failed:
        await app.run_workflow("saga")

    assert failed.value.code == "WORKFLOW_COMPENSATION_FAILED"
    details = failed.value.details
    assert details["step_id"] == "b"
    assert details["error"]["code"] == "WORKFLOW_STEP_FAILED"
    assert "boom is out of stock" in details["error"]["message"]
    assert "cannot reach the bank" in details["compensation_error"]["message"]
    # The chain stops at the failed compensation.
    assert undone == ["undo-c", "undo-b"]
    run = await app.get_run(failed.value.run_id or "")
    assert run.error is not None
    assert run.error["code"] == "WORKFLOW_COMPENSATION_FAILED"
    types = [event.type for event in await app.list_events(run.id)]
    assert types[-2:] == ["workflow.compensation.failed", "run.failed"]


async def test_a_crash_mid_compensation_resumes_the_chain_without_repeating_it(
    apps: tuple[Fevex, Fevex],
) -> None:
    app, recoverer = apps
    failing.add("boom")
    crash_at.add("undo-b")
    marker = uuid.uuid4().hex
    with pytest.raises(Crash):
        await app.run_workflow("saga", marker)
    (run,) = [r for r in await app.list_runs(kind="workflow", name="saga") if r.input == marker]
    assert run.status == "running"
    await asyncio.sleep(LEASE + 0.3)

    with pytest.raises(FevexRunError) as failed:
        await recoverer.recover_run(run.id, actor={"id": "worker", "type": "service"})

    assert failed.value.code == "WORKFLOW_STEP_FAILED"
    # c was undone before the crash and is not undone again; b is (at least once).
    assert undone == ["undo-c", "undo-b", "undo-b", "undo-a"]
    assert ledger["a"] == ledger["c"] == ledger["reserve-b"] == 1
    ended = await app.get_run(run.id)
    assert ended.status == "failed"
    events = await app.list_events(run.id)
    assert [event.sequence for event in events] == list(range(1, len(events) + 1))
    done = [e.payload["step_id"] for e in events if e.type == "workflow.compensation.completed"]
    assert done == ["c", "b", "a"]


@define_workflow(name="fan_agents", version="1")
async def fan_agents(step: WorkflowStep, input: Any) -> dict[str, Any]:
    results = await step.parallel(
        "agents",
        {
            "one": lambda: step.agent("one", "echo", input="one"),
            "two": lambda: step.agent("two", "echo", input="two"),
        },
    )
    return {name: result.output for name, result in results.items()}


async def test_parallel_agent_steps_are_journalled_as_json(url: str | None) -> None:
    """Branches return ``AgentStepResult`` values: the journal and the step's event keep
    their JSON, which every store accepts, and the function gets the values."""
    from fevex import define_agent
    from fevex.testing import FakeModel

    app = create_fevex(
        models={"default": FakeModel({"output": "a"}, {"output": "b"})},
        agents=[define_agent(name="echo", instructions="Echo.")],
        workflows=[fan_agents],
        run_store=url,
    )
    result = await app.run_workflow("fan_agents")
    assert sorted(result.output.values()) == ["a", "b"]
    (completed,) = [
        e
        for e in await app.list_events(result.run_id)
        if e.type == "workflow.step.completed" and e.payload["step_id"] == "agents"
    ]
    assert set(completed.payload["output"]) == {"one", "two"}
    assert {value["output"] for value in completed.payload["output"].values()} == {"a", "b"}
    await app.close()
