"""Durable workflows on every store: steps journalled and replayed, events sent from
another app, timers fired by wake-up passes, child agent runs (paused for an approval and
continued), recovery after a crash, version and replay checks, definitions refused."""

from __future__ import annotations

import asyncio
import types
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel

from fevex import (
    EventDelivery,
    Fevex,
    FevexConfigurationError,
    FevexRunError,
    Limits,
    RunPausedError,
    WorkflowStep,
    create_fevex,
    define_agent,
    define_tool,
    define_workflow,
)
from fevex.events import EVENT_TYPES
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio

LEASE = 1.0


class Approved(BaseModel):
    approved: bool


class Order(BaseModel):
    item: str
    quantity: int = 1


class Crash(BaseException):
    """A process dying mid-step: nothing of fevex's handles it."""


ledger: Counter[str] = Counter()
crash_at: set[str] = set()


def record(name: str, value: Any) -> Any:
    ledger[name] += 1
    if name in crash_at:
        crash_at.discard(name)
        raise Crash(name)
    return value


async def record_async(name: str, value: Any) -> Any:
    return record(name, value)


@define_workflow(
    name="review",
    version="2",
    events={"review.approved": Approved},
    require_actor={"review.approved"},
)
async def review(step: WorkflowStep, order: Order) -> str:
    first = await step.run("first", record, "first", order.item)
    second = await step.run("second", record_async, "second", order.quantity)
    approval: EventDelivery = await step.wait_for_event("approval", "review.approved")
    assert isinstance(approval.payload, Approved)
    third = await step.run("third", record, "third", "x")
    assert approval.actor is not None
    return f"{first}:{second}:{third}:{approval.actor['id']}"


@define_workflow(name="five", version="1")
async def five(step: WorkflowStep, input: Any) -> list[int]:
    return [await step.run(f"s{n}", record, f"s{n}", n) for n in range(1, 6)]


@define_workflow(name="napper", version="1")
async def napper(step: WorkflowStep, input: Any) -> str:
    await step.sleep("nap", 0.3)
    return str(await step.run("after", record, "after", "woke"))


@define_workflow(name="fails", version="1")
async def fails(step: WorkflowStep, input: Any) -> str:
    await step.run("boom", boom)
    return "never"


def boom() -> None:
    ledger["boom"] += 1
    raise ValueError("no stock")


@define_tool(name="charge", description="Charge.", approval="required")
def charge(amount: int) -> dict[str, int]:
    ledger["charge"] += 1
    return {"charged": amount}


@define_tool(name="lookup", description="Look up.", idempotency="keyed")
def lookup(key: str) -> dict[str, str]:
    ledger["lookup"] += 1
    return {"key": key}


writer = define_agent(name="writer", instructions="Write.", tools=["charge"])


@define_workflow(name="delegating", version="1")
async def delegating(step: WorkflowStep, input: Any) -> dict[str, Any]:
    found = await step.tool("look", "lookup", {"key": "k1"})
    written = await step.agent("draft", "writer", input="Charge 3")
    return {"found": found, "output": written.output, "child": written.run_id}


WORKFLOWS = [review, five, napper, fails, delegating]


def make_app(store: Any, *responses: Any, workflows: Any = WORKFLOWS) -> Fevex:
    return create_fevex(
        models={"default": FakeModel(*responses)},
        agents=[writer],
        tools=[charge, lookup],
        workflows=workflows,
        run_store=store,
        lease_seconds=LEASE,
    )


@pytest.fixture(autouse=True)
def clean_ledger() -> None:
    ledger.clear()
    crash_at.clear()


@pytest.fixture
async def apps(url: str | None) -> AsyncIterator[tuple[Fevex, Fevex]]:
    """Two apps sharing one store: two processes, as far as the store can tell."""
    first = make_app(url)
    second = make_app(url if url is not None else first.run_store)
    yield first, second
    if url is not None:
        await second.close()
    await first.close()


async def test_an_event_from_another_app_continues_the_workflow_without_rerunning_steps(
    apps: tuple[Fevex, Fevex],
) -> None:
    app, other = apps
    with pytest.raises(RunPausedError) as paused:
        await app.run_workflow("review", {"item": "book", "quantity": 2})
    run_id = paused.value.run_id
    run = await other.get_run(run_id)
    assert (run.kind, run.name, run.version, run.status) == ("workflow", "review", "2", "paused")
    assert run.input == {"item": "book", "quantity": 2}
    assert run.pause == {
        "reason": "event",
        "step_id": "approval",
        "event": "review.approved",
        "wake_at": None,
    }

    result = await other.send_event(
        run_id, "review.approved", {"approved": True}, actor={"id": "ada", "type": "user"}
    )

    assert result.output == "book:2:x:ada"
    assert ledger == Counter({"first": 1, "second": 1, "third": 1})
    events = await app.list_events(run_id)
    types = [event.type for event in events]
    assert set(types) <= set(EVENT_TYPES)
    assert types == [
        "run.started",
        "workflow.step.started",
        "workflow.step.completed",
        "workflow.step.started",
        "workflow.step.completed",
        "workflow.step.started",
        "workflow.waiting",
        "run.paused",
        "run.resumed",
        "workflow.event.received",
        "workflow.step.started",
        "workflow.step.completed",
        "run.completed",
    ]
    received = events[9].payload
    assert (received["event"], received["actor"]) == (
        "review.approved",
        {"id": "ada", "type": "user"},
    )
    assert [event.sequence for event in events] == list(range(1, len(events) + 1))


async def test_events_the_definition_refuses_change_nothing(apps: tuple[Fevex, Fevex]) -> None:
    app, other = apps
    with pytest.raises(RunPausedError) as paused:
        await app.run_workflow("review", {"item": "book"})
    run_id = paused.value.run_id
    before = await app.get_run(run_id)
    for name, payload, actor, code in (
        ("review.rejected", {}, {"id": "ada"}, "EVENT_NOT_EXPECTED"),
        ("review.approved", {"approved": "perhaps"}, {"id": "ada"}, "EVENT_PAYLOAD_INVALID"),
        ("review.approved", {"approved": True}, None, "EVENT_ACTOR_REQUIRED"),
    ):
        with pytest.raises(FevexRunError) as refused:
            await other.send_event(run_id, name, payload, actor=actor)
        assert refused.value.code == code
    assert await app.get_run(run_id) == before
    assert ledger == Counter({"first": 1, "second": 1})


async def test_a_misspelt_event_names_the_event_the_run_waits_for(
    apps: tuple[Fevex, Fevex],
) -> None:
    app, other = apps
    with pytest.raises(RunPausedError) as paused:
        await app.run_workflow("review", {"item": "book"})
    with pytest.raises(FevexRunError) as refused:
        await other.send_event(paused.value.run_id, "review.aproved", {"approved": True})
    assert refused.value.code == "EVENT_NOT_EXPECTED"
    assert refused.value.message.endswith(
        "It waits for the event 'review.approved'. Did you mean 'review.approved'?"
    )


async def test_a_sleep_is_fired_by_a_wake_up_pass_once_due(apps: tuple[Fevex, Fevex]) -> None:
    app, worker = apps
    run = await app.start_workflow("napper")
    await asyncio.sleep(0.05)
    paused = await app.get_run(run.id)
    while paused.status == "running":
        await asyncio.sleep(0.05)
        paused = await app.get_run(run.id)
    assert paused.status == "paused"
    assert paused.pause is not None
    assert paused.pause["reason"] == "timer"
    assert paused.wake_at is not None
    await asyncio.sleep(0.5)

    sweep = await worker.wake_due_runs()

    assert [woken.id for woken in sweep.woken] == [run.id]
    ended = await app.get_run(run.id)
    assert (ended.status, ended.output) == ("completed", "woke")
    assert ledger["after"] == 1


async def test_a_failed_step_fails_the_workflow_with_its_code(apps: tuple[Fevex, Fevex]) -> None:
    app, _ = apps
    with pytest.raises(FevexRunError) as failed:
        await app.run_workflow("fails")
    assert failed.value.code == "WORKFLOW_STEP_FAILED"
    assert "no stock" in failed.value.message
    run = await app.get_run(failed.value.run_id or "")
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["code"] == "WORKFLOW_STEP_FAILED"
    types = [event.type for event in await app.list_events(run.id)]
    assert types[-2:] == ["workflow.step.failed", "run.failed"]


async def test_a_crashed_workflow_is_recovered_without_repeating_completed_steps(
    apps: tuple[Fevex, Fevex],
) -> None:
    app, recoverer = apps
    crash_at.add("s3")
    with pytest.raises(Crash):
        await app.run_workflow("five")
    (run,) = await app.list_runs(kind="workflow", name="five")
    assert run.status == "running"
    await asyncio.sleep(LEASE + 0.3)

    result = await recoverer.recover_run(run.id, actor={"id": "worker", "type": "service"})

    assert result.output == [1, 2, 3, 4, 5]
    # The interrupted step runs again (at least once); those before it never do.
    assert ledger == Counter({"s1": 1, "s2": 1, "s3": 2, "s4": 1, "s5": 1})
    events = await app.list_events(run.id)
    assert [event.sequence for event in events] == list(range(1, len(events) + 1))
    completed = [e.payload["step_id"] for e in events if e.type == "workflow.step.completed"]
    assert completed == ["s1", "s2", "s3", "s4", "s5"]


async def test_a_child_agent_paused_for_approval_pauses_the_workflow_until_it_ends(
    apps: tuple[Fevex, Fevex], url: str | None
) -> None:
    app = make_app(
        url if url is not None else apps[0].run_store,
        {"tool_calls": [{"id": "call-1", "name": "charge", "input": {"amount": 3}}]},
        {"output": "charged"},
    )
    worker = apps[1]
    context = {"actor": {"id": "ada", "type": "user"}, "namespace": "acme"}
    with pytest.raises(RunPausedError) as paused:
        await app.run_workflow("delegating", context=context)
    parent_id = paused.value.run_id
    parent = await app.get_run(parent_id)
    assert parent.pause is not None
    assert parent.pause["reason"] == "children"
    (child,) = await app.list_runs(parent_run_id=parent_id)
    assert (child.kind, child.name, child.status) == ("agent", "writer", "paused")
    assert child.root_run_id == parent_id
    assert child.context is not None
    assert child.context["actor"] == {"id": "ada", "type": "user"}
    assert child.context["namespace"] == "acme"
    assert child.pause is not None
    approval = child.pause["approvals"][0]

    await app.resume_run(
        child.id, {"approval_id": approval["id"], "decision": "approve", "actor": {"id": "r"}}
    )
    sweep = await worker.wake_due_runs()

    assert [woken.id for woken in sweep.woken] == [parent_id]
    ended = await app.get_run(parent_id)
    assert ended.status == "completed"
    assert ended.output == {"found": {"key": "k1"}, "output": "charged", "child": child.id}
    assert ledger == Counter({"lookup": 1, "charge": 1})
    await app.close()


class PauseGate:
    """The run store of one app, which runs ``before`` (once) just before committing the
    first pause of a workflow: what happens elsewhere between a run's last read and its
    pause."""

    def __init__(self, store: Any, before: Any) -> None:
        self.store = store
        self.before = before
        self.paused: str | None = None  # the run it stopped before

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def commit_execution(self, commit: Any) -> None:
        types = {event.type for event in commit.events}
        if self.before is not None and {"workflow.waiting", "run.paused"} <= types:
            before, self.before, self.paused = self.before, None, commit.run_id
            await before()
        await self.store.commit_execution(commit)


async def test_a_child_that_ends_while_its_recovered_workflow_pauses_still_wakes_it(
    apps: tuple[Fevex, Fevex],
) -> None:
    """The workflow's process dies as it pauses for its child (paused for an approval).
    Recovery replays it to the same pause; just before that pause is committed, the child
    is approved elsewhere and ends, setting the workflow's wake-up. The pause keeps it (the
    take-over's opening, committed with the pause, used to clear it), so the next wake-up
    pass ends the workflow instead of leaving it paused for good."""
    store, worker = apps[0].run_store, apps[1]

    async def die() -> None:
        raise Crash("before the pause")

    gate = PauseGate(store, die)
    crashing = make_app(
        gate, {"tool_calls": [{"id": "call-1", "name": "charge", "input": {"amount": 3}}]}
    )
    with pytest.raises(Crash):
        await crashing.run_workflow("delegating")
    assert gate.paused is not None
    parent = await worker.get_run(gate.paused)
    assert parent.status == "running"
    (child,) = await worker.list_runs(parent_run_id=parent.id)
    assert child.status == "paused"
    assert child.pause is not None
    approval = child.pause["approvals"][0]["id"]
    await asyncio.sleep(LEASE + 0.3)

    approver = make_app(store, {"output": "charged"})

    async def approve_the_child() -> None:
        decision = {"approval_id": approval, "decision": "approve", "actor": {"id": "r"}}
        finished = await approver.resume_run(child.id, decision)
        assert finished.output == "charged"

    recoverer = make_app(PauseGate(store, approve_the_child))
    with pytest.raises(RunPausedError):
        await recoverer.recover_run(parent.id, actor={"id": "worker", "type": "service"})
    assert (await worker.get_run(child.id)).status == "completed"

    sweep = await worker.wake_due_runs()
    assert [woken.id for woken in sweep.woken] == [parent.id]
    ended = await worker.get_run(parent.id)
    assert ended.status == "completed"
    assert ended.output == {"found": {"key": "k1"}, "output": "charged", "child": child.id}
    assert ledger == Counter({"lookup": 1, "charge": 1})


async def test_cancelling_a_workflow_cancels_its_paused_child_first(
    apps: tuple[Fevex, Fevex], url: str | None
) -> None:
    app = make_app(
        url if url is not None else apps[0].run_store,
        {"tool_calls": [{"id": "call-1", "name": "charge", "input": {"amount": 3}}]},
    )
    with pytest.raises(RunPausedError) as paused:
        await app.run_workflow("delegating")
    (child,) = await app.list_runs(parent_run_id=paused.value.run_id)

    cancelled = await apps[1].cancel_run(paused.value.run_id)

    assert cancelled.status == "cancelled"
    assert (await app.get_run(child.id)).status == "cancelled"
    await app.close()


async def test_replays_check_version_and_steps(apps: tuple[Fevex, Fevex], url: str | None) -> None:
    app, _ = apps
    store = url if url is not None else app.run_store
    with pytest.raises(RunPausedError) as paused:
        await app.run_workflow("review", {"item": "book"})
    run_id = paused.value.run_id

    @define_workflow(name="review", version="3", events={"review.approved": Approved})
    async def review_v3(step: WorkflowStep, order: Order) -> str:
        return "v3"

    newer = make_app(store, workflows=[review_v3])
    with pytest.raises(FevexRunError) as mismatch:
        await newer.send_event(run_id, "review.approved", {"approved": True}, actor={"id": "a"})
    assert mismatch.value.code == "WORKFLOW_VERSION_MISMATCH"

    @define_workflow(name="review", version="2", events={"review.approved": Approved})
    async def changed(step: WorkflowStep, order: Order) -> str:
        await step.run("first", record, "first", "another input")
        return "changed"

    changed_app = make_app(store, workflows=[changed])
    with pytest.raises(FevexRunError) as replay:
        await changed_app.send_event(
            run_id, "review.approved", {"approved": True}, actor={"id": "a"}
        )
    assert replay.value.code == "STEP_MISMATCH"
    assert (await app.get_run(run_id)).status == "failed"
    if url is not None:
        await newer.close()
        await changed_app.close()


async def test_input_output_and_limits_are_checked() -> None:
    @define_workflow(name="typed", version="1", limits={"max_steps": 2})
    async def typed(step: WorkflowStep, order: Order) -> int:
        for n in range(int(order.item)):
            await step.run(f"s{n}", record, f"s{n}", n)
        return "not an int" if order.quantity == 0 else order.quantity  # type: ignore[return-value]

    app = make_app(None, workflows=[typed])
    with pytest.raises(FevexRunError) as invalid:
        await app.run_workflow("typed", {"quantity": 1})
    assert invalid.value.code == "INVALID_INPUT"
    assert await app.list_runs() == []
    with pytest.raises(FevexRunError) as output:
        await app.run_workflow("typed", {"item": "0", "quantity": 0})
    assert output.value.code == "OUTPUT_INVALID"
    with pytest.raises(FevexRunError) as too_many:
        await app.run_workflow("typed", {"item": "3"})
    assert too_many.value.code == "MAX_STEPS_EXCEEDED"
    assert ledger == Counter({"s0": 1, "s1": 1})
    with pytest.raises(FevexRunError) as narrowed:
        await app.run_workflow("typed", {"item": "2"}, limits=Limits(max_steps=1))
    assert narrowed.value.code == "MAX_STEPS_EXCEEDED"
    assert (await app.run_workflow("typed", {"item": "2", "quantity": 7})).output == 7


def test_definitions_are_checked() -> None:
    async def untyped(step: WorkflowStep, input: Any) -> None:
        return None

    with pytest.raises(FevexConfigurationError) as bad_name:
        define_workflow(name="bad name", run=untyped)
    assert bad_name.value.code == "INVALID_WORKFLOW"
    with pytest.raises(FevexConfigurationError) as bad_actor:
        define_workflow(name="w", require_actor={"nope"}, run=untyped)
    assert bad_actor.value.code == "INVALID_WORKFLOW"
    with pytest.raises(FevexConfigurationError) as bad_limit:
        define_workflow(name="w", limits={"max_tool_retries": 1}, run=untyped)
    assert bad_limit.value.code == "INVALID_WORKFLOW"
    one = define_workflow(name="w", version="1", run=untyped)
    two = define_workflow(name="w", version="2", run=untyped)
    app = create_fevex(workflows=[one, two])
    assert app.run_workflow_sync("w").output is None
    with pytest.raises(FevexConfigurationError) as duplicate:
        create_fevex(workflows=[one, one])
    assert duplicate.value.code == "DUPLICATE_WORKFLOW"
    with pytest.raises(FevexConfigurationError) as not_one:
        create_fevex(workflows=[untyped])  # type: ignore[list-item]
    assert not_one.value.code == "INVALID_WORKFLOW"


async def test_a_stream_holds_the_workflow_events_and_its_childs() -> None:
    seen: list[str] = []
    app = create_fevex(
        models={"default": FakeModel({"output": "drafted"})},
        agents=[writer],
        tools=[charge, lookup],
        workflows=WORKFLOWS,
        on_event=lambda event: seen.append(event.id),
    )
    events = [event async for event in app.stream_workflow("delegating")]

    (workflow_id,) = {event.run_id for event in events if event.type == "workflow.step.started"}
    (child,) = await app.list_runs(parent_run_id=workflow_id)
    assert {event.run_id for event in events} == {workflow_id, child.id}
    assert [event.type for event in events if event.run_id == child.id] == [
        event.type for event in await app.list_events(child.id)
    ]
    assert events[-1].type == "run.completed"
    assert events[-1].payload["output"]["output"] == "drafted"
    # Observers see each event once, the child's relayed ones included.
    assert sorted(seen) == sorted(event.id for event in events)


gate = asyncio.Event()


async def behind_gate(name: str) -> str:
    await gate.wait()
    return str(record(name, name))


@define_workflow(name="gated", version="1")
async def gated(step: WorkflowStep, input: Any) -> list[str]:
    first = await step.run("a", record, "a", "a")
    return [first, await step.run("b", behind_gate, "b"), await step.run("c", record, "c", "c")]


async def test_a_stream_yields_each_step_as_it_is_committed(url: str | None) -> None:
    """Step ``b`` waits until the consumer has seen ``a`` complete: a stream that held the
    events back until the pass ended would never open the gate."""
    gate.clear()
    app = make_app(url, workflows=[gated])
    seen: list[str] = []
    async with asyncio.timeout(30):  # a hang guard, not a measurement
        async for event in app.stream_workflow("gated"):
            seen.append(event.type)
            if event.type == "workflow.step.completed" and event.payload["step_id"] == "a":
                assert ledger == Counter({"a": 1})
                gate.set()
    await app.close()
    assert seen[-1] == "run.completed"
    assert ledger == Counter({"a": 1, "b": 1, "c": 1})


async def test_closing_a_stream_early_cancels_the_workflow_before_its_next_step(
    url: str | None,
) -> None:
    gate.set()
    app = make_app(url, workflows=[gated])
    stream = app.stream_workflow("gated")
    async for event in stream:
        if event.type == "workflow.step.completed":
            break
    await stream.aclose()
    run = await app.get_run(event.run_id)
    assert run.status == "cancelled"
    # The function waited for the consumer to take step a's end: b never ran.
    assert ledger == Counter({"a": 1})
    types = [event.type for event in await app.list_events(run.id)]
    assert types[-1] == "run.cancelled"
    await app.close()


reader = define_agent(name="reader", instructions="Read.", limits={"max_output_tokens": 50})


@define_workflow(name="budgeted", version="1", limits={"max_output_tokens": 10})
async def budgeted(step: WorkflowStep, input: Any) -> list[Any]:
    first = await step.agent("first", "reader", input="one")
    second = await step.agent("second", "reader", input="two")
    return [first.output, second.output]


async def test_agent_steps_run_within_the_workflows_remaining_token_budget(
    url: str | None,
) -> None:
    model = FakeModel(
        {"output": "a", "usage": {"input_tokens": 1, "output_tokens": 6}},
        {"output": "b", "usage": {"input_tokens": 1, "output_tokens": 6}},
    )
    app = create_fevex(
        models={"default": model}, agents=[reader], workflows=[budgeted], run_store=url
    )
    with pytest.raises(FevexRunError) as over:
        await app.run_workflow("budgeted")
    # The second step's child ran under the 4 tokens the workflow had left, not under the
    # agent's 50: the model was told so, and the child itself failed over it.
    assert [call.max_output_tokens for call in model.calls] == [10, 4]
    assert over.value.code == "MAX_OUTPUT_TOKENS_EXCEEDED"
    children = await app.list_runs(parent_run_id=over.value.run_id)
    second = next(child for child in children if child.input == "two")
    assert second.status == "failed"
    assert second.error is not None
    assert second.error["code"] == "MAX_OUTPUT_TOKENS_EXCEEDED"
    checkpoint = await app.run_store.get_checkpoint(second.id)
    assert checkpoint is not None
    assert checkpoint["limits"]["max_output_tokens"] == 4
    await app.close()


async def test_a_used_up_token_budget_refuses_the_next_agent_step() -> None:
    model = FakeModel({"output": "a", "usage": {"input_tokens": 1, "output_tokens": 10}})
    app = create_fevex(models={"default": model}, agents=[reader], workflows=[budgeted])
    with pytest.raises(FevexRunError) as over:
        await app.run_workflow("budgeted")
    assert over.value.code == "MAX_OUTPUT_TOKENS_EXCEEDED"
    assert len(model.calls) == 1  # no child was started for the second step
    assert len(await app.list_runs(parent_run_id=over.value.run_id)) == 1


async def test_resume_run_without_a_decision_continues_a_run_once_its_wait_is_over(
    apps: tuple[Fevex, Fevex], url: str | None
) -> None:
    app, other = apps
    with pytest.raises(RunPausedError) as napping:
        await app.run_workflow("napper")
    nap_id = napping.value.run_id
    before = await app.get_run(nap_id)
    with pytest.raises(FevexRunError) as early:
        await other.resume_run(nap_id)
    assert (early.value.code, early.value.details["reason"]) == ("RUN_NOT_DUE", "timer")
    assert await app.get_run(nap_id) == before  # nothing written

    # A child that pauses for an approval: the parent waits for it, and an approval is
    # never given by a call without a decision.
    approving = make_app(
        url if url is not None else app.run_store,
        {"tool_calls": [{"id": "call-1", "name": "charge", "input": {"amount": 3}}]},
        {"output": "charged"},
    )
    with pytest.raises(RunPausedError) as delegating_paused:
        await approving.run_workflow("delegating")
    parent_id = delegating_paused.value.run_id
    (child,) = await app.list_runs(parent_run_id=parent_id)
    for waiting in (child.id, parent_id):
        with pytest.raises(FevexRunError) as still:
            await other.resume_run(waiting)
        assert still.value.code == "RUN_NOT_DUE"
    assert child.pause is not None
    approval = child.pause["approvals"][0]
    await approving.resume_run(
        child.id, {"approval_id": approval["id"], "decision": "approve", "actor": {"id": "r"}}
    )

    # Once its child has ended, the parent continues at once, without a worker.
    delegated = await other.resume_run(parent_id)
    assert delegated.output == {"found": {"key": "k1"}, "output": "charged", "child": child.id}
    await asyncio.sleep(0.35)
    assert (await other.resume_run(nap_id)).output == "woke"
    assert ledger == Counter({"after": 1, "lookup": 1, "charge": 1})
    with pytest.raises(FevexRunError) as ended:
        await other.resume_run(nap_id)
    assert ended.value.code == "RUN_NOT_PAUSED"
    await approving.close()


def as_module(module: str) -> Any:
    """``record`` as the module ``module`` defines it: a script run as ``__main__``, or the
    same file imported by a worker."""
    copy = types.FunctionType(record.__code__, record.__globals__, "record")
    copy.__module__ = module
    return copy


def scripted(module: str) -> Any:
    function = as_module(module)

    @define_workflow(name="scripted", version="1", events={"go": None})
    async def run(step: WorkflowStep, input: Any) -> Any:
        before = await step.run("before", function, "before", 1)
        await step.wait_for_event("go", "go")
        return [before, await step.run("after", function, "after", 2)]

    return run


async def test_a_run_step_is_known_by_its_qualified_name_not_its_module(
    url: str | None,
) -> None:
    script = make_app(url, workflows=[scripted("__main__")])
    with pytest.raises(RunPausedError) as paused:
        await script.run_workflow("scripted")
    worker = make_app(url if url is not None else script.run_store, workflows=[scripted("app")])

    result = await worker.send_event(paused.value.run_id, "go")

    assert result.output == [1, 2]
    assert ledger == Counter({"before": 1, "after": 1})
    await worker.close()
    await script.close()
