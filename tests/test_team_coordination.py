"""Team coordination on every store: parallel delegations, handoffs announced once,
``max_parallel`` turns (also as the checkpoint keeps them), children's events relayed with
their delegation; and the attacks: a step id used twice, strangers and changed members,
a paused branch holding no turn, a recovery that would delegate past its bound."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest

from fevex import (
    AgentRun,
    AgentStepResult,
    Fevex,
    FevexConfigurationError,
    FevexRunError,
    RunEvent,
    RunPausedError,
    TeamRelayedEvent,
    create_fevex,
    define_agent,
    define_tool,
    define_workflow,
)
from fevex.events import EVENT_TYPES
from fevex.models import (
    Completed,
    ModelInput,
    ModelResult,
    ModelStreamEvent,
    OutputDelta,
    ToolCall,
)
from fevex.teams import TeamLimits, TeamMember, TeamStep, define_team

pytestmark = pytest.mark.anyio

LEASE = 1.0  # the apps that crash: their runs' leases lapse soon
# Every other app's: long enough that a loaded worker never loses one while it runs.
RUN_LEASE = 30.0
# No test here waits this long; a bug that loses a turn hangs, and this ends the hang.
HANG = 60


class Crash(BaseException):
    """A process dying mid-delegation: nothing of fevex's handles it."""


ledger: Counter[str] = Counter()
crash_at: set[str] = set()


@define_tool(name="charge", description="Charge.", approval="required")
def charge(amount: int) -> dict[str, int]:
    ledger["charge"] += 1
    return {"charged": amount}


@define_tool(name="build", description="Build.", idempotency="keyed")
def build(target: str) -> dict[str, str]:
    ledger["build"] += 1
    if "build" in crash_at:
        crash_at.discard("build")
        raise Crash("build")
    return {"built": target}


class TeamModel:
    """Answers each child from its own conversation, so concurrent children never take
    each other's answers: a ``pay:`` or ``build:`` task calls that tool once (when the
    agent has it), anything else is answered ``<instructions>:<task>``.

    With ``gauge=(turns, children)`` every call holds the model until ``turns`` calls are
    inside it (or ``children`` calls have entered), then stays a while before leaving, so
    that a child started beyond its turn would be inside at the same time; ``peak`` is
    the most calls ever inside at once."""

    def __init__(self, gauge: tuple[int, int] | None = None) -> None:
        self.gauge = gauge
        self.inside = 0
        self.entered = 0
        self.peak = 0
        self.changed = asyncio.Condition()

    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        if self.gauge is not None:
            await self._hold(*self.gauge)
        result = _answer(input)
        if result.output:
            yield OutputDelta(result.output)
        yield Completed(result)

    async def _hold(self, turns: int, children: int) -> None:
        async with self.changed:
            self.inside += 1
            self.entered += 1
            self.peak = max(self.peak, self.inside)
            self.changed.notify_all()
            await self.changed.wait_for(lambda: self.inside >= turns or self.entered >= children)
        # Long enough for a child started beyond its turn to reach the model (stores
        # commit in threads); a violation is recorded at once and ends the wait.
        for _ in range(30):
            if self.peak > turns:
                break
            await asyncio.sleep(0.01)
        async with self.changed:
            self.inside -= 1
            self.changed.notify_all()


def _answer(input: ModelInput) -> ModelResult:
    instructions = input.messages[0].text
    task = next(message.text for message in input.messages if message.role == "user")
    if input.messages[-1].role == "tool":
        return ModelResult(output=f"{instructions}:{task}:done")
    tools = {spec.name for spec in input.tools}
    for prefix, tool, argument in (
        ("pay:", "charge", {"amount": 5}),
        ("build:", "build", {"target": "app"}),
    ):
        if task.startswith(prefix) and tool in tools:
            return ModelResult(tool_calls=(ToolCall(f"call-{tool}", tool, argument),))
    return ModelResult(output=f"{instructions}:{task}")


planner = define_agent(name="planner", instructions="planner")
researcher = define_agent(name="researcher", instructions="researcher")
coder = define_agent(name="coder", instructions="coder", tools=["charge", "build"])
reviewer = define_agent(name="reviewer", instructions="reviewer", tools=["charge", "build"])
outsider = define_agent(name="outsider", instructions="outsider")
AGENTS = [planner, researcher, coder, reviewer, outsider]
MEMBERS = [
    TeamMember(agent="researcher", role="research"),
    TeamMember(agent="coder", role="implementation"),
    TeamMember(agent="reviewer", role="review"),
]


@define_team(
    name="software",
    version="1",
    supervisor="planner",
    members=MEMBERS,
    limits=TeamLimits(max_delegations=12, max_parallel=2),
)
async def software(team: TeamStep, request: str) -> dict[str, Any]:
    plan = await team.delegate("plan", agent="planner", task=request)
    work = await team.parallel(
        "work",
        {
            "research": lambda: team.delegate("research", agent="researcher", task=plan.output),
            "implementation": lambda: team.delegate(
                "implementation", agent="coder", task=plan.output
            ),
        },
    )
    review = await team.handoff(
        "review",
        from_agent="coder",
        to_agent="reviewer",
        reason="Final review",
        task=f"{request}|{work['implementation'].output}",
    )
    return {
        "plan": plan.output,
        "research": work["research"].output,
        "implementation": work["implementation"].output,
        "review": review.output,
    }


@define_team(name="fanout", version="1", supervisor="planner", members=MEMBERS)
async def fanout(team: TeamStep, tasks: list[str]) -> dict[str, Any]:
    def research(task: str) -> Callable[[], Awaitable[AgentStepResult]]:
        return lambda: team.delegate(task, agent="researcher", task=task)

    results = await team.parallel("all", {task: research(task) for task in tasks})
    return {name: result.output for name, result in results.items()}


@define_team(
    name="gated",
    version="1",
    supervisor="planner",
    members=MEMBERS,
    limits=TeamLimits(max_parallel=3),
)
async def gated(team: TeamStep, tasks: list[str]) -> dict[str, Any]:
    await team.delegate("gate", agent="coder", task="pay:the gate")
    researched: dict[str, Any] = await fanout.run(team, tasks)
    return researched


@define_team(
    name="mixed",
    version="1",
    supervisor="planner",
    members=MEMBERS,
    limits=TeamLimits(max_parallel=1),
)
async def mixed(team: TeamStep, input: Any) -> dict[str, Any]:
    results = await team.parallel(
        "both",
        {
            "pay": lambda: team.delegate("pay", agent="coder", task="pay:now"),
            "plan": lambda: team.delegate("plan", agent="planner", task="plan it"),
        },
    )
    return {name: result.output for name, result in results.items()}


@define_team(name="twice", version="1", supervisor="planner", members=MEMBERS)
async def twice(team: TeamStep, parallel: bool) -> Any:
    if parallel:
        return await team.parallel(
            "both",
            {
                "first": lambda: team.delegate("same", agent="planner", task="one"),
                "second": lambda: team.delegate("same", agent="coder", task="two"),
            },
        )
    await team.delegate("same", agent="planner", task="one")
    return await team.delegate("same", agent="coder", task="two")


@define_team(name="passing", version="1", supervisor="planner", members=MEMBERS)
async def passing(team: TeamStep, route: dict[str, Any]) -> Any:
    to_agent = route["to"]
    if to_agent == "changed reviewer":
        to_agent = dataclasses.replace(reviewer, instructions="lenient")
    handed = await team.handoff(
        "pass", from_agent=route["from"], to_agent=to_agent, reason="why", task="task"
    )
    return handed.output


@define_team(
    name="bounded",
    version="1",
    supervisor="planner",
    members=MEMBERS,
    limits=TeamLimits(max_delegations=2),
)
async def bounded(team: TeamStep, input: Any) -> Any:
    await team.delegate("plan", agent="planner", task="plan")
    await team.handoff("build", from_agent="planner", to_agent="coder", reason="go", task="build:")
    return (await team.delegate("more", agent="researcher", task="one too many")).output


TEAMS = [software, fanout, gated, mixed, twice, passing, bounded]


@pytest.fixture(autouse=True)
def clean_ledger() -> None:
    ledger.clear()
    crash_at.clear()


def make_app(
    store: Any, model: TeamModel | None = None, agents: Any = AGENTS, lease: float = RUN_LEASE
) -> Fevex:
    return create_fevex(
        models={"default": model or TeamModel()},
        agents=agents,
        tools=[charge, build],
        teams=TEAMS,
        run_store=store,
        lease_seconds=lease,
    )


@pytest.fixture
async def store(url: str | None) -> AsyncIterator[Any]:
    """What every app of a test shares: one store, as several processes would."""
    if url is not None:
        yield url
        return
    keeper = make_app(None)
    yield keeper.run_store
    await keeper.close()


async def approve(app: Fevex, child_id: str) -> None:
    child = await app.get_run(child_id)
    assert child.pause is not None
    approval = child.pause["approvals"][0]
    await app.resume_run(
        child_id, {"approval_id": approval["id"], "decision": "approve", "actor": {"id": "r"}}
    )


async def crashed_team(app: Fevex, name: str, input: Any) -> AgentRun:
    """The team run ``name`` left running by a crash inside it."""
    events: list[RunEvent] = []
    with pytest.raises(Crash):
        async for event in app.stream_team(name, input):
            events.append(event)
    team = await app.get_run(events[0].run_id)
    assert team.status == "running"
    return team


async def test_parallel_delegations_and_a_handoff_are_child_runs_relayed_with_their_delegation(
    store: Any,
) -> None:
    app = make_app(store)

    result = await app.run_team("software", "ship it")

    plan = "planner:ship it"
    assert result.output == {
        "plan": plan,
        "research": f"researcher:{plan}",
        "implementation": f"coder:{plan}",
        "review": f"reviewer:ship it|coder:{plan}",
    }
    events = await app.list_events(result.run_id)
    assert {event.type for event in events} <= set(EVENT_TYPES)
    team_events = [(e.type, e.payload.get("step_id")) for e in events]
    assert team_events[:4] == [
        ("run.started", None),
        ("team.delegation.started", "plan"),
        ("team.delegation.completed", "plan"),
        ("team.parallel.started", "work"),
    ]
    assert Counter(team_events[4:8]) == Counter(
        (f"team.delegation.{end}", step)
        for end in ("started", "completed")
        for step in ("research", "implementation")
    )
    assert team_events[8:] == [
        ("team.parallel.completed", "work"),
        ("team.handoff", "review"),
        ("team.delegation.started", "review"),
        ("team.delegation.completed", "review"),
        ("run.completed", None),
    ]
    by_step = {e.payload["step_id"]: e for e in events if e.type == "team.delegation.completed"}
    assert events[3].payload == {"step_id": "work", "branches": ["research", "implementation"]}
    assert (
        events[8].payload["output"]["research"]["run_id"]
        == by_step["research"].payload["child_run_id"]
    )
    assert events[9].payload == {
        "step_id": "review",
        "from_agent": "coder",
        "to_agent": "reviewer",
        "reason": "Final review",
    }
    assert events[10].payload == {"step_id": "review", "agent": "reviewer"}

    # Each child event in the result names its delegation; the stored ones stay plain.
    delegations = {
        completed.payload["child_run_id"]: (step, completed.payload["agent"])
        for step, completed in by_step.items()
    }
    children = await app.list_runs(parent_run_id=result.run_id)
    assert {child.id for child in children} == set(delegations)
    relayed = [e for e in result.events if e.run_id != result.run_id]
    assert {e.run_id for e in relayed} == set(delegations)
    for event in relayed:
        assert isinstance(event, TeamRelayedEvent)
        step, agent = delegations[event.run_id]
        assert (event.team_delegation_id, event.team_agent_name) == (step, agent)
        assert event.to_json()["team_delegation_id"] == step
        assert event.to_json()["team_agent_name"] == agent
    assert all(type(e) is RunEvent for e in result.events if e.run_id == result.run_id)
    for child in children:
        stored = await app.list_events(child.id)
        assert stored
        assert all(type(e) is RunEvent for e in stored)
        assert "team_delegation_id" not in stored[0].to_json()
    await app.close()


async def test_a_stream_relays_each_childs_events_with_its_delegation(store: Any) -> None:
    app = make_app(store)

    events = [event async for event in app.stream_team("software", "ship it")]

    team_id = events[0].run_id
    relayed = [e for e in events if isinstance(e, TeamRelayedEvent)]
    assert relayed == [e for e in events if e.run_id != team_id]
    assert {(e.team_delegation_id, e.team_agent_name) for e in relayed} == {
        ("plan", "planner"),
        ("research", "researcher"),
        ("implementation", "coder"),
        ("review", "reviewer"),
    }
    assert events[-1].type == "run.completed"
    await app.close()


async def test_a_handoff_is_announced_once_across_a_pause_and_another_app(store: Any) -> None:
    app = make_app(store)
    continuing = make_app(store)
    with anyio.fail_after(HANG):
        with pytest.raises(RunPausedError) as paused:
            await app.run_team("software", "pay:ship it")
        team_id = paused.value.run_id
        (review,) = [c for c in await app.list_runs(parent_run_id=team_id) if c.status == "paused"]
        assert review.name == "reviewer"

        await approve(continuing, review.id)
        await continuing.wake_due_runs()

    ended = await continuing.get_run(team_id)
    assert ended.status == "completed"
    assert ended.output is not None
    assert ended.output["review"].startswith("reviewer:pay:ship it|")
    types = [e.type for e in await continuing.list_events(team_id)]
    assert types.count("team.handoff") == 1
    assert types.count("team.parallel.started") == 1
    assert types.count("team.parallel.completed") == 1
    assert ledger == Counter({"charge": 1})
    assert len(await continuing.list_runs(parent_run_id=team_id)) == 4
    await continuing.close()
    await app.close()


async def test_a_crash_inside_a_handoff_recovers_into_the_same_child_announced_once(
    store: Any,
) -> None:
    app = make_app(store, lease=LEASE)
    recoverer = make_app(store)
    crash_at.add("build")
    team = await crashed_team(app, "software", "build:it")
    await asyncio.sleep(LEASE + 0.3)

    actor = {"id": "worker", "type": "service"}
    with pytest.raises(RunPausedError):
        await recoverer.recover_run(team.id, actor=actor)
    (review,) = [
        c for c in await recoverer.list_runs(parent_run_id=team.id) if c.name == "reviewer"
    ]
    await recoverer.recover_run(review.id, actor=actor)
    await recoverer.wake_due_runs()

    ended = await recoverer.get_run(team.id)
    assert ended.status == "completed"
    types = [e.type for e in await recoverer.list_events(team.id)]
    assert types.count("team.handoff") == 1
    assert types.count("team.delegation.started") == 4
    assert len(await recoverer.list_runs(parent_run_id=team.id)) == 4
    assert ledger == Counter({"build": 2})
    await recoverer.close()
    await app.close()


async def test_max_parallel_bounds_the_children_running_at_once(store: Any) -> None:
    tasks = ["a", "b", "c", "d", "e"]
    model = TeamModel(gauge=(2, len(tasks)))
    app = make_app(store, model)

    with anyio.fail_after(HANG):
        result = await app.run_team("fanout", tasks, limits=TeamLimits(max_parallel=2))

    assert result.output == {task: f"researcher:{task}" for task in tasks}
    assert model.peak == 2
    assert len(await app.list_runs(parent_run_id=result.run_id)) == len(tasks)
    await app.close()


async def test_max_parallel_is_kept_by_the_checkpoint_for_the_app_that_continues(
    store: Any,
) -> None:
    tasks = ["a", "b", "c", "d"]
    app = make_app(store)
    model = TeamModel(gauge=(1, len(tasks)))
    continuing = make_app(store, model)
    with anyio.fail_after(HANG):
        with pytest.raises(RunPausedError) as paused:
            # The definition allows 3 at once; this run 1, and only its checkpoint says so.
            await app.run_team("gated", tasks, limits=TeamLimits(max_parallel=1))
        (gate,) = await app.list_runs(parent_run_id=paused.value.run_id)
        await approve(continuing, gate.id)
        model.entered = model.peak = 0
        await continuing.wake_due_runs()

    ended = await continuing.get_run(paused.value.run_id)
    assert ended.status == "completed"
    assert ended.output == {task: f"researcher:{task}" for task in tasks}
    assert model.peak == 1
    await continuing.close()
    await app.close()


async def test_a_paused_branch_holds_no_turn(store: Any) -> None:
    app = make_app(store)
    continuing = make_app(store)
    with anyio.fail_after(HANG):
        with pytest.raises(RunPausedError) as paused:
            await app.run_team("mixed")
        team_id = paused.value.run_id
        children = {c.name: c for c in await app.list_runs(parent_run_id=team_id)}
        # The one turn went to the paying child, then, once it paused, to the planner.
        assert (children["coder"].status, children["planner"].status) == ("paused", "completed")

        await approve(continuing, children["coder"].id)
        await continuing.wake_due_runs()

    ended = await continuing.get_run(team_id)
    assert ended.status == "completed"
    assert ended.output == {"pay": "coder:pay:now:done", "plan": "planner:plan it"}
    assert len(await continuing.list_runs(parent_run_id=team_id)) == 2
    await continuing.close()
    await app.close()


async def test_delegations_waiting_for_a_turn_are_counted_when_they_get_it(store: Any) -> None:
    app = make_app(store)
    tasks = ["a", "b", "c"]

    with pytest.raises(FevexRunError) as refused:
        await app.run_team("fanout", tasks, limits=TeamLimits(max_delegations=2, max_parallel=1))

    assert refused.value.code == "MAX_DELEGATIONS_EXCEEDED"
    assert refused.value.run_id is not None
    assert len(await app.list_runs(parent_run_id=refused.value.run_id)) == 2
    await app.close()


@pytest.mark.parametrize("parallel", [False, True], ids=["in-turn", "in-parallel"])
async def test_one_step_id_delegated_twice_fails_the_team(store: Any, parallel: bool) -> None:
    app = make_app(store)

    events = []
    with pytest.raises(FevexRunError) as twice_used:
        async for event in app.stream_team("twice", parallel):
            events.append(event)

    assert twice_used.value.code == "STEP_MISMATCH"
    team_id = events[0].run_id
    (child,) = await app.list_runs(parent_run_id=team_id)
    assert child.name == "planner"
    relayed = [e for e in events if isinstance(e, TeamRelayedEvent)]
    assert relayed == [e for e in events if e.run_id == child.id] != []
    assert {(e.team_delegation_id, e.team_agent_name) for e in relayed} == {("same", "planner")}
    team = await app.get_run(team_id)
    assert team.status == "failed"
    assert team.error is not None
    assert team.error["code"] == "STEP_MISMATCH"
    await app.close()


@pytest.mark.parametrize(
    "route",
    [
        {"from": "outsider", "to": "reviewer"},
        {"from": "coder", "to": "outsider"},
        {"from": "coder", "to": "nobody"},
        {"from": "coder", "to": "changed reviewer"},
    ],
    ids=["from-a-stranger", "to-a-stranger", "to-no-agent", "to-a-changed-member"],
)
async def test_a_handoff_outside_the_team_creates_nothing(store: Any, route: Any) -> None:
    app = make_app(store)

    with pytest.raises(FevexRunError) as refused:
        await app.run_team("passing", route)

    assert refused.value.code == "TEAM_MEMBER_UNKNOWN"
    assert refused.value.run_id is not None
    team = await app.get_run(refused.value.run_id)
    assert team.status == "failed"
    assert await app.list_runs(parent_run_id=team.id) == []
    types = [e.type for e in await app.list_events(team.id)]
    assert "team.handoff" not in types
    assert "team.delegation.started" not in types
    await app.close()


async def test_a_recovered_replay_delegates_no_further_than_its_bound(store: Any) -> None:
    app = make_app(store, lease=LEASE)
    recoverer = make_app(store)
    crash_at.add("build")
    team = await crashed_team(app, "bounded", None)
    await asyncio.sleep(LEASE + 0.3)

    actor = {"id": "worker", "type": "service"}
    with pytest.raises(RunPausedError):
        # The replay counts the two journalled delegations once each and refuses none.
        await recoverer.recover_run(team.id, actor=actor)
    (built,) = [c for c in await recoverer.list_runs(parent_run_id=team.id) if c.name == "coder"]
    await recoverer.recover_run(built.id, actor=actor)
    await recoverer.wake_due_runs()

    ended = await recoverer.get_run(team.id)
    assert ended.status == "failed"
    assert ended.error is not None
    assert ended.error["code"] == "MAX_DELEGATIONS_EXCEEDED"
    assert "'more'" in ended.error["message"]
    children = await recoverer.list_runs(parent_run_id=team.id)
    assert sorted(child.name for child in children) == ["coder", "planner"]
    types = [e.type for e in await recoverer.list_events(team.id)]
    assert types.count("team.handoff") == 1
    await recoverer.close()
    await app.close()


async def test_an_app_with_a_changed_member_runs_only_the_new_delegations_with_it(
    store: Any,
) -> None:
    app = make_app(store)
    changed = dataclasses.replace(researcher, instructions="researcher v2")
    continuing = make_app(store, agents=[planner, changed, coder, reviewer, outsider])
    with pytest.raises(RunPausedError) as paused:
        await app.run_team("gated", ["a", "b"])
    (gate,) = await app.list_runs(parent_run_id=paused.value.run_id)
    await approve(continuing, gate.id)
    await continuing.wake_due_runs()

    ended = await continuing.get_run(paused.value.run_id)
    assert ended.status == "completed"
    # The journalled gate is answered as it ended; the delegations after it run the
    # member as the continuing app registered it.
    assert ended.output == {"a": "researcher v2:a", "b": "researcher v2:b"}
    assert len(await continuing.list_runs(parent_run_id=ended.id)) == 3
    assert ledger == Counter({"charge": 1})
    await continuing.close()
    await app.close()


def test_team_and_workflow_definitions_are_refused_with_their_own_code() -> None:
    async def three(first: Any, second: Any, third: Any) -> None: ...

    async def two(first: Any, second: Any) -> None: ...

    kinds: list[tuple[Any, str, str]] = [
        (define_team, "INVALID_TEAM", "(team, input)"),
        (define_workflow, "INVALID_WORKFLOW", "(step, input)"),
    ]
    for define, code, parameters in kinds:
        extra = {"supervisor": "planner"} if define is define_team else {}
        with pytest.raises(FevexConfigurationError) as signature:
            define(name="t", run=three, **extra)
        assert signature.value.code == code
        assert parameters in signature.value.message
        with pytest.raises(FevexConfigurationError) as named:
            define(name="no spaces", run=two, **extra)
        assert named.value.code == code
        with pytest.raises(FevexConfigurationError) as versioned:
            define(name="t", version="", run=two, **extra)
        assert versioned.value.code == code
        with pytest.raises(FevexConfigurationError) as not_a_function:
            define(name="t", **extra)(42)
        assert not_a_function.value.code == code
