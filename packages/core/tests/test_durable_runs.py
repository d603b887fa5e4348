"""Approvals, credentials, policies, retries, leases and recovery on the in-memory store."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from fevex import (
    ApprovalDecision,
    Fevex,
    FevexConfigurationError,
    FevexRunError,
    RunPausedError,
    ToolContext,
    create_fevex,
    define_agent,
    define_tool,
)
from fevex.events import EVENT_TYPES
from fevex.policies import PolicyRequest
from fevex.runtime import InMemoryRunStore, RecoverySweep, RunLease
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio

SECRET = "sk-SENTINEL-9f2c41"


class Charge(BaseModel):
    amount: int


class Receipt(BaseModel):
    charged: int
    key: str | None = None


effects: list[tuple[str | None, int]] = []


@pytest.fixture(autouse=True)
def _clear_effects() -> None:
    effects.clear()


@define_tool(
    name="charge",
    description="Charge the customer.",
    risk="sensitive",
    approval="required",
    idempotency="keyed",
    credentials=["payments-api-key"],
)
async def charge(request: Charge, context: ToolContext) -> Receipt:
    key = await context.get_credential("payments-api-key")
    assert key == SECRET
    effects.append((context.idempotency_key, request.amount))
    return Receipt(charged=request.amount, key=context.idempotency_key)


def charge_call(call_id: str = "call-1", amount: int = 30) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": "charge", "input": {"amount": amount}}]}


def make_app(
    model: Any,
    store: Any,
    *,
    tools: list[Any] | None = None,
    **options: Any,
) -> Fevex:
    tools = tools or [charge]
    options.setdefault("credentials", {"payments-api-key": SECRET})
    return create_fevex(
        models={"default": model},
        agents=[define_agent(name="billing", instructions="Bill.", tools=[t.name for t in tools])],
        tools=tools,
        run_store=store,
        **options,
    )


async def pause(app: Fevex, input: str = "charge 30") -> RunPausedError:
    with pytest.raises(RunPausedError) as caught:
        await app.run_agent("billing", input)
    return caught.value


async def test_approval_pauses_before_credentials_and_effect() -> None:
    store = InMemoryRunStore()
    resolved: list[str] = []

    def credentials(name: str, context: ToolContext) -> str:
        resolved.append(name)
        return SECRET

    app = make_app(FakeModel(charge_call(), {"output": "done"}), store, credentials=credentials)
    paused = await pause(app)
    (approval,) = paused.pause["approvals"]
    assert approval["tool_name"] == "charge"
    assert approval["tool_call_id"] == "call-1"
    assert approval["input"] == {"amount": 30}
    assert effects == []
    assert resolved == []
    run = await app.get_run(paused.run_id)
    assert run.status == "paused"
    assert run.pause == paused.pause
    events = await app.list_events(paused.run_id)
    assert events[-1].type == "run.paused"


async def test_another_process_resumes_an_approved_run() -> None:
    store = InMemoryRunStore()
    first = make_app(FakeModel(charge_call()), store)
    paused = await pause(first)
    approval_id = paused.pause["approvals"][0]["id"]
    second_model = FakeModel({"output": "Charged 30."})
    second = make_app(second_model, store)
    result = await second.resume_run(
        paused.run_id,
        {
            "type": "approval",
            "approval_id": approval_id,
            "decision": "approve",
            "actor": {"id": "reviewer-42"},
        },
    )
    assert result.output == "Charged 30."
    assert effects == [(f"fevex:{paused.run_id}:call-1", 30)]
    types = [e.type for e in await second.list_events(paused.run_id)]
    assert set(types) <= set(EVENT_TYPES)
    assert types[types.index("run.paused") :] == [
        "run.paused",
        "run.resumed",
        "tool.started",
        "tool.completed",
        "model.started",
        "model.output.delta",
        "model.completed",
        "run.completed",
    ]
    sequences = [e.sequence for e in await second.list_events(paused.run_id)]
    assert sequences == list(range(1, len(sequences) + 1))
    tool_result = second_model.calls[0].messages[-1].content[0]
    assert tool_result.output == {"charged": 30, "key": f"fevex:{paused.run_id}:call-1"}
    session = await second.get_session(result.session_id)
    assert session.active_run_id is None
    assert [m["role"] for m in session.history] == ["user", "assistant", "tool", "assistant"]


async def test_a_rejected_call_reaches_the_model_as_an_error() -> None:
    store = InMemoryRunStore()
    model = FakeModel(charge_call(), {"output": "The charge was rejected."})
    app = make_app(model, store)
    paused = await pause(app)
    decision = ApprovalDecision(paused.pause["approvals"][0]["id"], "reject", {"id": "r"})
    result = await app.resume_run(paused.run_id, decision)
    assert result.output == "The charge was rejected."
    assert effects == []
    rejected = model.calls[1].messages[-1].content[0]
    assert rejected.is_error
    assert rejected.output["code"] == "TOOL_REJECTED"


async def test_unknown_approvals_fail_closed() -> None:
    store = InMemoryRunStore()
    app = make_app(FakeModel(charge_call()), store)
    paused = await pause(app)
    with pytest.raises(FevexRunError) as caught:
        await app.resume_run(
            paused.run_id,
            {"approval_id": "apr_forged", "decision": "approve", "actor": {"id": "x"}},
        )
    assert caught.value.code == "APPROVAL_NOT_FOUND"
    assert (await app.get_run(paused.run_id)).status == "paused"
    assert effects == []
    with pytest.raises(FevexRunError) as caught:
        await app.resume_run(
            paused.run_id,
            {"approval_id": paused.pause["approvals"][0]["id"], "decision": "maybe", "actor": {}},
        )
    assert caught.value.code == "INVALID_ARGUMENT"


async def test_streams_and_background_runs_pause_too() -> None:
    store = InMemoryRunStore()
    app = make_app(FakeModel(charge_call(), charge_call("call-2")), store)
    events = [event async for event in app.stream_agent("billing", "charge")]
    assert events[-1].type == "run.paused"
    started = await app.start_agent("billing", "charge again")
    for _ in range(20):
        await asyncio.sleep(0)
    assert (await app.get_run(started.id)).status == "paused"


async def test_a_paused_run_holds_its_session_until_cancelled() -> None:
    store = InMemoryRunStore()
    app = make_app(FakeModel(charge_call(), {"output": "hi"}), store)
    paused = await pause(app)
    run = await app.get_run(paused.run_id)
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("billing", "other", session_id=run.session_id)
    assert caught.value.code == "RUN_CONFLICT"
    other_app = make_app(FakeModel(), store)
    cancelled = await other_app.cancel_run(paused.run_id)
    assert cancelled.status == "cancelled"
    result = await app.run_agent("billing", "other", session_id=run.session_id)
    assert result.output == "hi"


@define_tool(name="leak", description="Returns its key.", credentials=["payments-api-key"])
async def leak(request: Charge, context: ToolContext) -> dict[str, Any]:
    return {"echo": await context.get_credential("payments-api-key")}


@define_tool(name="boom", description="Fails loudly.", credentials=["payments-api-key"])
async def boom(request: Charge, context: ToolContext) -> dict[str, Any]:
    key = await context.get_credential("payments-api-key")
    raise RuntimeError(f"gateway refused key {key}")


@define_tool(name="greedy", description="Asks for more.", credentials=["payments-api-key"])
async def greedy(request: Charge, context: ToolContext) -> dict[str, Any]:
    return {"other": await context.get_credential("admin-password")}


def call_of(name: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": "c1", "name": name, "input": {"amount": 1}}]}


@pytest.mark.parametrize(
    ("tool", "code"),
    [
        (leak, "TOOL_OUTPUT_CONTAINS_CREDENTIAL"),
        (boom, "TOOL_FAILED"),
        (greedy, "CREDENTIAL_NOT_DECLARED"),
    ],
)
async def test_credentials_never_leave_the_tool_call(tool: Any, code: str) -> None:
    store = InMemoryRunStore()

    async def credentials(name: str, context: ToolContext) -> str:
        return SECRET

    model = FakeModel(call_of(tool.name), {"output": "never"})
    app = make_app(model, store, tools=[tool], credentials=credentials)
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("billing", "go")
    assert caught.value.code == code
    assert SECRET not in str(caught.value)
    run = await app.get_run(model_run_id(store))
    stored = [e.to_json() for e in await app.list_events(run.id)]
    stored += [run.to_json(), await store.get_checkpoint(run.id)]
    assert SECRET not in json.dumps(stored)
    assert SECRET not in repr([c.messages for c in model.calls])


def model_run_id(store: InMemoryRunStore) -> str:
    (run_id,) = store._runs
    return run_id


async def test_a_missing_credential_is_reported() -> None:
    app = make_app(FakeModel(call_of("leak")), InMemoryRunStore(), tools=[leak], credentials={})
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("billing", "go")
    assert caught.value.code == "CREDENTIAL_NOT_FOUND"


async def test_policies_run_before_approval_credentials_and_each_effect() -> None:
    seen: list[tuple[str, int]] = []

    def record(request: PolicyRequest) -> None:
        seen.append((request.stage, request.attempt))

    store = InMemoryRunStore()
    app = make_app(FakeModel(charge_call(), {"output": "ok"}), store, policies=[record])
    paused = await pause(app)
    assert seen == [("approval", 1)]
    decision = {
        "approval_id": paused.pause["approvals"][0]["id"],
        "decision": "approve",
        "actor": {"id": "r"},
    }
    await app.resume_run(paused.run_id, decision)
    assert seen == [("approval", 1), ("effect", 1), ("credentials", 1)]


async def test_a_policy_that_raises_denies_before_the_effect() -> None:
    def deny_sensitive(request: PolicyRequest) -> None:
        if request.stage == "effect" and request.risk == "sensitive":
            raise PermissionError("sensitive tools are off today")

    app = make_app(FakeModel(charge_call()), InMemoryRunStore(), policies=[deny_sensitive])
    paused = await pause(app)
    with pytest.raises(FevexRunError) as caught:
        await app.resume_run(
            paused.run_id,
            {
                "approval_id": paused.pause["approvals"][0]["id"],
                "decision": "approve",
                "actor": {"id": "r"},
            },
        )
    assert caught.value.code == "POLICY_DENIED"
    assert "sensitive tools are off today" in caught.value.message
    assert effects == []


async def test_a_policy_must_return_none() -> None:
    app = make_app(FakeModel(charge_call()), InMemoryRunStore(), policies=[lambda request: False])
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("billing", "go")
    assert caught.value.code == "POLICY_CONTRACT_VIOLATION"
    with pytest.raises(FevexConfigurationError) as config:
        make_app(FakeModel(), InMemoryRunStore(), policies=["allow"])
    assert config.value.code == "INVALID_POLICY"


async def test_retries_follow_the_tool_policy() -> None:
    attempts: list[int] = []

    @define_tool(
        name="flaky",
        description="Fails twice.",
        retry={"max_attempts": 3, "backoff": 0.001, "max_backoff": 0.002},
    )
    async def flaky(request: Charge, context: ToolContext) -> dict[str, int]:
        attempts.append(context.attempt)
        if len(attempts) < 3:
            raise ConnectionError("try again")
        return {"ok": request.amount}

    stages: list[str] = []
    app = make_app(
        FakeModel(call_of("flaky"), {"output": "ok"}),
        InMemoryRunStore(),
        tools=[flaky],
        policies=[lambda request: stages.append(request.stage)],
    )
    assert (await app.run_agent("billing", "go")).output == "ok"
    assert attempts == [1, 2, 3]
    assert stages == ["effect", "retry", "retry"]


async def test_exhausted_retries_fail_the_run() -> None:
    @define_tool(name="down", description="Always down.", retry={"max_attempts": 2, "backoff": 0})
    async def down(request: Charge) -> dict[str, int]:
        raise ConnectionError("down")

    app = make_app(FakeModel(call_of("down")), InMemoryRunStore(), tools=[down])
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("billing", "go")
    assert caught.value.code == "TOOL_FAILED"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Hanging:
    """A keyed tool whose first call hangs until released; counts effects by key."""

    def __init__(self, keyed: bool = True) -> None:
        self.release = asyncio.Event()
        self.entered = asyncio.Event()
        self.effects: dict[str | None, int] = {}

        async def work(request: Charge, context: ToolContext) -> dict[str, int]:
            self.entered.set()
            if len(self.effects) == 0 and not self.release.is_set():
                self.effects[context.idempotency_key] = 0
                await self.release.wait()
            self.effects[context.idempotency_key] = 1
            return {"done": request.amount}

        self.tool = define_tool(
            name="work",
            description="Slow work.",
            idempotency="keyed" if keyed else "none",
        )(work)


async def crashed_run(keyed: bool) -> tuple[InMemoryRunStore, Clock, Hanging, asyncio.Task[Any]]:
    clock = Clock()
    store = InMemoryRunStore(clock=clock)
    hanging = Hanging(keyed)
    worker = make_app(FakeModel(call_of("work")), store, tools=[hanging.tool])
    task = asyncio.create_task(worker.run_agent("billing", "go"))
    await hanging.entered.wait()
    clock.now += 120  # the worker froze past its lease
    return store, clock, hanging, task


async def test_recovery_retries_an_in_flight_keyed_tool_with_the_same_key() -> None:
    store, _, hanging, frozen = await crashed_run(keyed=True)
    (run_id,) = store._runs
    rescuer = make_app(FakeModel({"output": "recovered"}), store, tools=[hanging.tool])
    result = await rescuer.recover_run(run_id, actor={"id": "recovery-worker"})
    assert result.output == "recovered"
    assert list(hanging.effects) == [f"fevex:{run_id}:c1"]
    # The frozen worker continues and cannot write any more.
    hanging.release.set()
    with pytest.raises(FevexRunError) as caught:
        await frozen
    assert caught.value.code == "LEASE_LOST"
    events = await rescuer.list_events(run_id)
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert [e.type for e in events].count("run.completed") == 1
    assert "run.recovered" in [e.type for e in events]
    assert {e.type for e in events} <= set(EVENT_TYPES)
    assert (await rescuer.get_run(run_id)).status == "completed"


def as_version_1(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint as the fevex before the step journal wrote it: the in-flight call
    named in ``pending``, no journal."""
    old = {key: value for key, value in checkpoint.items() if key != "journal"}
    old["version"] = 1
    started = [
        step for step, entry in checkpoint["journal"].items() if entry["status"] == "started"
    ]
    old["pending"] = {**checkpoint["pending"], "in_flight": started[0].removeprefix("tool:")}
    return old


@pytest.mark.parametrize("keyed", [True, False])
async def test_a_run_stored_by_the_previous_checkpoint_version_recovers(keyed: bool) -> None:
    store, _, hanging, frozen = await crashed_run(keyed=keyed)
    (run_id,) = store._runs
    store._checkpoints[run_id] = as_version_1(store._checkpoints[run_id])
    rescuer = make_app(FakeModel({"output": "recovered"}), store, tools=[hanging.tool])
    if keyed:
        result = await rescuer.recover_run(run_id, actor={"id": "recovery-worker"})
        assert result.output == "recovered"
        assert list(hanging.effects) == [f"fevex:{run_id}:c1"]
    else:
        with pytest.raises(FevexRunError) as caught:
            await rescuer.recover_run(run_id, actor={"id": "recovery-worker"})
        assert caught.value.code == "TOOL_EFFECT_UNCERTAIN"
    frozen.cancel()


async def test_a_replayed_step_with_other_input_is_a_step_mismatch() -> None:
    store, _, hanging, frozen = await crashed_run(keyed=True)
    (run_id,) = store._runs
    # The journal says the call started with one input; the replay asks with another.
    store._checkpoints[run_id]["pending"]["calls"][0]["input"] = {"amount": 31}
    rescuer = make_app(FakeModel({"output": "recovered"}), store, tools=[hanging.tool])
    with pytest.raises(FevexRunError) as caught:
        await rescuer.recover_run(run_id, actor={"id": "recovery-worker"})
    assert caught.value.code == "STEP_MISMATCH"
    assert hanging.effects == {f"fevex:{run_id}:c1": 0}  # only the frozen first attempt
    assert (await rescuer.get_run(run_id)).status == "failed"
    frozen.cancel()


async def test_recovery_refuses_to_repeat_a_non_idempotent_effect() -> None:
    store, _, hanging, frozen = await crashed_run(keyed=False)
    (run_id,) = store._runs
    rescuer = make_app(FakeModel(), store, tools=[hanging.tool])
    with pytest.raises(FevexRunError) as caught:
        await rescuer.recover_run(run_id, actor={"id": "recovery-worker"})
    assert caught.value.code == "TOOL_EFFECT_UNCERTAIN"
    assert (await rescuer.get_run(run_id)).status == "failed"
    hanging.release.set()
    with pytest.raises(FevexRunError):
        await frozen


async def test_a_live_lease_cannot_be_recovered() -> None:
    store = InMemoryRunStore()
    hanging = Hanging()
    worker = make_app(FakeModel(call_of("work"), {"output": "ok"}), store, tools=[hanging.tool])
    task = asyncio.create_task(worker.run_agent("billing", "go"))
    await hanging.entered.wait()
    (run_id,) = store._runs
    with pytest.raises(FevexRunError) as caught:
        await make_app(FakeModel(), store).recover_run(run_id, actor={"id": "x"})
    assert caught.value.code == "RUN_CONFLICT"
    hanging.release.set()
    assert (await task).output == "ok"


async def test_recover_expired_runs_finds_orphans() -> None:
    store, _, hanging, frozen = await crashed_run(keyed=True)
    rescuer = make_app(FakeModel({"output": "ok"}), store, tools=[hanging.tool])
    sweep = await rescuer.recover_expired_runs(actor={"id": "sweeper"})
    assert [run.status for run in sweep.recovered] == ["completed"]
    assert sweep.skipped == sweep.unclaimed == ()
    assert await rescuer.recover_expired_runs(actor={"id": "sweeper"}) == RecoverySweep()
    frozen.cancel()


class RenewalFails(InMemoryRunStore):
    async def renew_lease(self, run_id: str, lease: RunLease, seconds: float) -> RunLease:
        raise ConnectionError("store unreachable")


async def test_a_failed_renewal_stops_local_work_and_writes_nothing() -> None:
    store = RenewalFails()
    cancelled: list[bool] = []

    @define_tool(name="slow", description="Slow.")
    async def slow(request: Charge, context: ToolContext) -> dict[str, int]:
        try:
            await asyncio.sleep(5)
        finally:
            cancelled.append(context.cancelled)
        return {"late": 1}

    app = make_app(FakeModel(call_of("slow")), store, tools=[slow], lease_seconds=0.15)
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("billing", "go")
    assert caught.value.code == "LEASE_LOST"
    assert cancelled == [True]
    (run_id,) = store._runs
    events = await app.list_events(run_id)
    assert events[-1].type == "tool.started"
    assert (await app.get_run(run_id)).status == "running"


async def test_recovery_repeats_an_interrupted_model_step() -> None:
    clock = Clock()
    store = InMemoryRunStore(clock=clock)
    gate = asyncio.Event()

    class Stuck:
        async def stream(self, input: Any) -> Any:
            await gate.wait()
            yield  # pragma: no cover - never reached

    worker = make_app(Stuck(), store, tools=[leak])
    task = asyncio.create_task(worker.run_agent("billing", "go"))
    for _ in range(10):
        await asyncio.sleep(0)
    clock.now += 120
    (run_id,) = store._runs
    model = FakeModel({"output": "second try"})
    result = await make_app(model, store, tools=[leak]).recover_run(run_id, actor={"id": "r"})
    assert result.output == "second try"
    assert [m.text for m in model.calls[0].messages] == ["Bill.", "go"]
    task.cancel()


class CountingStore(InMemoryRunStore):
    def __init__(self) -> None:
        super().__init__()
        self.commits: list[list[str]] = []

    async def commit_execution(self, commit: Any) -> None:
        await super().commit_execution(commit)
        self.commits.append([event.type for event in commit.events])


async def test_an_unstreamed_run_commits_only_at_durable_points() -> None:
    store = CountingStore()
    current = [store]
    seen: list[str] = []

    @define_tool(name="lookup", description="Look up.")
    async def lookup(request: Charge) -> dict[str, int]:
        # The call is durable before its effect starts.
        assert current[0].commits[-1][-1] == "tool.started"
        return {"amount": request.amount}

    app = make_app(
        FakeModel(call_of("lookup"), {"output": "done"}),
        store,
        tools=[lookup],
        on_event=lambda event: seen.append(event.type),
    )
    result = await app.run_agent("billing", "go")
    assert store.commits == [
        ["model.started", "model.completed", "tool.started"],
        ["tool.completed"],
        ["model.started", "model.output.delta", "model.completed", "run.completed"],
    ]
    assert seen == [event.type for event in result.events]
    streamed = CountingStore()
    current[0] = streamed
    stream_app = make_app(
        FakeModel(call_of("lookup"), {"output": "done"}), streamed, tools=[lookup]
    )
    events = [event async for event in stream_app.stream_agent("billing", "go")]
    assert len(streamed.commits) == len(events) - 1  # every event but run.started, one by one


async def test_a_provider_error_quoting_a_credential_is_scrubbed() -> None:
    @define_tool(
        name="quoting", description="Fails quoting its key.", credentials=["payments-api-key"]
    )
    async def quoting(request: Charge, context: ToolContext) -> dict[str, Any]:
        key = await context.get_credential("payments-api-key")
        raise FevexRunError("REMOTE_REFUSED", f"remote refused Authorization: Bearer {key}")

    app = make_app(FakeModel(call_of("quoting")), InMemoryRunStore(), tools=[quoting])
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("billing", "go")
    assert caught.value.code == "REMOTE_REFUSED"
    assert SECRET not in str(caught.value)
    assert "[redacted]" in caught.value.message


async def test_a_bad_timeout_on_resume_changes_nothing() -> None:
    store = InMemoryRunStore()
    app = make_app(FakeModel(charge_call(), {"output": "ok"}), store)
    paused = await pause(app)
    decision = {
        "approval_id": paused.pause["approvals"][0]["id"],
        "decision": "approve",
        "actor": {"id": "r"},
    }
    with pytest.raises(FevexRunError) as caught:
        await app.resume_run(paused.run_id, decision, timeout=-1)
    assert caught.value.code == "INVALID_ARGUMENT"
    assert (await app.get_run(paused.run_id)).status == "paused"
    assert (await app.resume_run(paused.run_id, decision)).output == "ok"
