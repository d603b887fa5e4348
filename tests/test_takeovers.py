"""Taking a stored run over (an event delivered, an approval decided, a recovery) on every
store: one store operation takes the lease and reads what the run continues from, the
session is read only by the kinds that need it, and the opening event waits for the run's
first durable point, yet is stored before the run's first effect, also when parallel
branches start their effects together and when the store fails at that moment."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from fevex import (
    Fevex,
    FevexRunError,
    RunPausedError,
    WorkflowStep,
    create_fevex,
    define_agent,
    define_tool,
    define_workflow,
)
from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCommit, InMemoryRunStore, RunLease, Session
from fevex.runtime.run_store import RunTakeover, TakeoverRunStore
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio

LEASE = 0.5


class Crash(BaseException):
    """A process dying mid-step: nothing of fevex's handles it."""


class Probe:
    """What the steps below do and saw: the run they read, the steps that crash once, how
    often each step ran and the event types the store held when it did."""

    def __init__(self) -> None:
        self.app: Fevex | None = None
        self.run_id: str | None = None
        self.crash: set[str] = set()
        self.ran: Counter[str] = Counter()
        self.seen: dict[str, list[str]] = {}


probe = Probe()


@pytest.fixture(autouse=True)
def fresh_probe() -> None:
    global probe
    probe = Probe()


async def look(name: str) -> str:
    """An effect that records the events the store holds when it starts."""
    if name in probe.crash:
        probe.crash.discard(name)
        raise Crash(name)
    app, run_id = probe.app, probe.run_id
    if app is None or run_id is None:
        await asyncio.Event().wait()  # frozen, as a worker about to die
        raise AssertionError("unreachable")
    probe.ran[name] += 1
    probe.seen[name] = [event.type for event in await app.list_events(run_id)]
    return name


@define_workflow(name="fan_out", version="1")
async def fan_out(step: WorkflowStep, input: Any) -> dict[str, Any]:
    return await step.parallel(
        "both", {"a": lambda: step.run("a", look, "a"), "b": lambda: step.run("b", look, "b")}
    )


@define_workflow(name="single", version="1")
async def single(step: WorkflowStep, input: Any) -> str:
    return str(await step.run("only", look, "only"))


@define_workflow(name="waiting", version="1", events={"go": dict})
async def waiting(step: WorkflowStep, input: Any) -> list[Any]:
    first = await step.run("s1", lambda: 1)
    delivery = await step.wait_for_event("s2", "go")
    return [first, delivery.payload, await step.run("s3", lambda: 3)]


@define_tool(name="charge", description="Charge.", approval="required")
def charge(amount: int) -> dict[str, int]:
    return {"charged": amount}


biller = define_agent(name="biller", instructions="Bill.", tools=["charge"])


def make_app(store: Any, *responses: Any) -> Fevex:
    return create_fevex(
        models={"default": FakeModel(*responses)},
        agents=[biller],
        tools=[charge],
        workflows=[fan_out, single, waiting],
        run_store=store,
        lease_seconds=LEASE,
    )


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """What two apps share: one in-memory store, or the URL of a SQLite file or a
    PostgreSQL database."""
    if request.param == "memory":
        return InMemoryRunStore()
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    return str(request.getfixturevalue("postgres_url"))


class Recording(InMemoryRunStore):
    """Records the store operations a takeover may call and the event types of each
    commit."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.commits: list[list[str]] = []
        self.taking = False

    async def acquire_lease(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunLease:
        if not self.taking:  # not the in-memory store's own takeover
            self.calls.append("acquire_lease")
        return await super().acquire_lease(run_id, owner, seconds, status=status)

    async def take_over_run(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunTakeover:
        self.calls.append("take_over_run")
        self.taking = True
        try:
            return await super().take_over_run(run_id, owner, seconds, status=status)
        finally:
            self.taking = False

    async def get_run(self, run_id: str) -> AgentRun | None:
        self.calls.append("get_run")
        return await super().get_run(run_id)

    async def get_checkpoint(self, run_id: str) -> dict[str, Any] | None:
        self.calls.append("get_checkpoint")
        return await super().get_checkpoint(run_id)

    async def get_session(self, session_id: str) -> Session | None:
        self.calls.append("get_session")
        return await super().get_session(session_id)

    async def list_events(self, run_id: str, **page: Any) -> Sequence[RunEvent]:
        self.calls.append("list_events")
        return await super().list_events(run_id, **page)

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        await super().commit_execution(commit)
        self.commits.append([event.type for event in commit.events])


class WithoutTakeovers(Recording):
    """A third-party store written before ``take_over_run``."""

    take_over_run = None  # type: ignore[assignment]


async def paused_at_the_event(app: Fevex) -> str:
    with pytest.raises(RunPausedError) as paused:
        await app.run_workflow("waiting", {"token": uuid.uuid4().hex})
    return str(paused.value.run_id)


async def crashed(app: Fevex, workflow: str) -> str:
    """The id of a run of ``workflow`` whose process died in it, holding its lease."""
    token = uuid.uuid4().hex
    with pytest.raises(Crash):
        await app.run_workflow(workflow, {"token": token})
    runs = await app.list_runs(kind="workflow", name=workflow, status="running", limit=1000)
    (run,) = [run for run in runs if run.input == {"token": token}]
    return run.id


async def test_an_event_takes_the_run_over_in_one_operation_and_commits_with_the_delivery() -> None:
    store = Recording()
    app = make_app(store)
    run_id = await paused_at_the_event(app)
    store.calls.clear()
    store.commits.clear()

    result = await app.send_event(run_id, "go", {"n": 2})

    assert result.output == [1, {"n": 2}, 3]
    calls = Counter(store.calls)
    # One read to check the run, one operation to take it; the session, the checkpoint
    # and the event log are never read apart.
    assert calls["get_run"] == 1
    assert calls["take_over_run"] == 1
    assert not {"acquire_lease", "get_checkpoint", "get_session", "list_events"} & set(calls)
    # The opening and the delivery wait for the first durable point: here the commit
    # before the next step's effect.
    assert store.commits[0] == ["run.resumed", "workflow.event.received", "workflow.step.started"]
    assert store.commits[-1][-1] == "run.completed"
    types = [event.type for event in await app.list_events(run_id)]
    assert types.count("run.resumed") == 1
    assert types.index("run.resumed") == types.index("workflow.event.received") - 1


async def test_a_store_without_its_own_takeovers_is_taken_over_through_the_contract() -> None:
    store = WithoutTakeovers()
    assert not isinstance(store, TakeoverRunStore)
    app = make_app(store)
    run_id = await paused_at_the_event(app)
    store.calls.clear()

    result = await app.send_event(run_id, "go", {"n": 2})

    assert result.output == [1, {"n": 2}, 3]
    assert "acquire_lease" in store.calls
    assert "get_session" not in store.calls


async def test_an_approval_resume_reads_the_agents_session() -> None:
    store = Recording()
    app = make_app(
        store,
        {"tool_calls": [{"id": "call-1", "name": "charge", "input": {"amount": 3}}]},
        {"output": "charged"},
    )
    with pytest.raises(RunPausedError) as paused:
        await app.run_agent("biller", "Charge 3")
    (approval,) = paused.value.pause["approvals"]
    store.calls.clear()

    result = await app.resume_run(
        str(paused.value.run_id),
        {"type": "approval", "approval_id": approval["id"], "decision": "approve",
         "actor": {"id": "ada"}},
    )  # fmt: skip

    assert result.output == "charged"
    assert store.calls.count("get_session") == 1
    assert store.calls.count("take_over_run") == 1


async def test_a_recovery_stores_its_opening_before_its_first_effect(store: Any) -> None:
    first = make_app(store)
    second = make_app(store if isinstance(store, str) else first.run_store)
    try:
        probe.crash.add("only")
        run_id = await crashed(first, "single")
        await asyncio.sleep(LEASE + 0.3)
        probe.app, probe.run_id = second, run_id

        result = await second.recover_run(run_id, actor={"id": "rescuer"})

        assert result.output == "only"
        assert probe.ran == Counter({"only": 1})
        # The effect started with the takeover stored.
        assert "run.recovered" in probe.seen["only"]
    finally:
        await first.close()
        await second.close()


async def test_parallel_effects_after_a_recovery_store_the_opening_once(store: Any) -> None:
    first = make_app(store)
    second = make_app(store if isinstance(store, str) else first.run_store)
    try:
        probe.crash.add("a")
        run_id = await crashed(first, "fan_out")
        await asyncio.sleep(LEASE + 0.3)
        probe.app, probe.run_id = second, run_id

        result = await second.recover_run(run_id, actor={"id": "rescuer"})

        assert result.output == {"a": "a", "b": "b"}
        assert probe.ran == Counter({"a": 1, "b": 1})
        for branch in ("a", "b"):
            assert "run.recovered" in probe.seen[branch]
        events = await second.list_events(run_id)
        assert [event.sequence for event in events] == list(range(1, len(events) + 1))
        types = [event.type for event in events]
        assert types.count("run.recovered") == 1
        assert types[-1] == "run.completed"
    finally:
        await first.close()
        await second.close()


class FailsTheNextCommit(InMemoryRunStore):
    """A store that becomes unreachable for one commit, as a database restarting."""

    failing = False

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        if self.failing:
            self.failing = False
            raise FevexRunError(
                "STORE_UNAVAILABLE", "the store restarts", recoverable=True, category="store"
            )
        await super().commit_execution(commit)


async def test_a_store_failing_the_opening_stops_the_run_before_its_effect() -> None:
    store = FailsTheNextCommit()
    first = make_app(store)
    probe.crash.add("only")
    run_id = await crashed(first, "single")
    await asyncio.sleep(LEASE + 0.3)
    second = make_app(store)
    probe.app, probe.run_id = second, run_id
    store.failing = True

    with pytest.raises(FevexRunError) as failed:
        await second.recover_run(run_id, actor={"id": "rescuer"})

    assert failed.value.code == "STORE_UNAVAILABLE"
    assert probe.ran == Counter()  # the effect never started
    run = await second.get_run(run_id)
    assert run.status == "running"
    assert "run.recovered" not in [event.type for event in await second.list_events(run_id)]
    # Left as it was taken: once that lease lapses, the run is recovered whole.
    await asyncio.sleep(LEASE + 0.3)
    result = await second.recover_run(run_id, actor={"id": "rescuer"})
    assert result.output == "only"
    assert probe.ran == Counter({"only": 1})
