"""Teams on every store: delegations as child agent runs of the team, a child paused for
an approval continued from another app, recovery into the same child after a crash,
delegation limits checkpointed, members that cannot be widened, definitions refused."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fevex import (
    Fevex,
    FevexConfigurationError,
    FevexRunError,
    RunPausedError,
    create_fevex,
    define_agent,
    define_tool,
)
from fevex.events import EVENT_TYPES
from fevex.teams import TeamLimits, TeamMember, TeamStep, define_team
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio

LEASE = 1.0


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


planner = define_agent(name="planner", instructions="Plan.")
coder = define_agent(name="coder", instructions="Code.", tools=["charge", "build"])
outsider = define_agent(name="outsider", instructions="Not in the team.")
MEMBERS = [TeamMember(agent="coder", role="implementation")]


@define_team(name="software", version="1", supervisor="planner", members=MEMBERS)
async def software(team: TeamStep, request: str) -> dict[str, Any]:
    plan = await team.delegate("plan", agent="planner", task=request, expected_output="A plan")
    work = await team.delegate("work", agent="coder", task=str(plan.output))
    return {"plan": plan.output, "work": work.output, "children": [plan.run_id, work.run_id]}


@define_team(
    name="greedy",
    version="1",
    supervisor="planner",
    members=MEMBERS,
    limits=TeamLimits(max_delegations=5),
)
async def greedy(team: TeamStep, request: Any) -> list[Any]:
    first = await team.delegate("first", agent="coder", task="one")
    second = await team.delegate("second", agent="planner", task="two")
    return [first.output, second.output]


@define_team(name="stray", version="1", supervisor="planner", members=MEMBERS)
async def stray(team: TeamStep, request: Any) -> Any:
    return (await team.delegate("away", agent=request, task="hello")).output


@define_team(name="widening", version="1", supervisor="planner", members=MEMBERS)
async def widening(team: TeamStep, request: Any) -> Any:
    wider = dataclasses.replace(planner, tools=("charge",))
    return (await team.delegate("wide", agent=wider, task="pay")).output


TEAMS = [software, greedy, stray, widening]


def make_app(store: Any, *responses: Any) -> Fevex:
    return create_fevex(
        models={"default": FakeModel(*responses)},
        agents=[planner, coder, outsider],
        tools=[charge, build],
        teams=TEAMS,
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


def shared(apps: tuple[Fevex, Fevex], url: str | None) -> Any:
    return url if url is not None else apps[0].run_store


async def test_delegations_are_child_runs_of_the_team(
    apps: tuple[Fevex, Fevex], url: str | None
) -> None:
    app = make_app(shared(apps, url), {"output": "the plan"}, {"output": "the code"})
    context = {"actor": {"id": "ada", "type": "user"}, "namespace": "acme"}

    result = await app.run_team("software", "ship it", context=context)

    team = await app.get_run(result.run_id)
    assert (team.kind, team.name, team.version) == ("team", "software", "1")
    assert team.status == "completed"
    children = {run.name: run for run in await app.list_runs(parent_run_id=team.id)}
    assert result.output == {
        "plan": "the plan",
        "work": "the code",
        "children": [children["planner"].id, children["coder"].id],
    }
    plan = children["planner"]
    assert plan.input == "ship it\n\nExpected output: A plan"
    assert children["coder"].input == "the plan"
    for child in children.values():
        assert (child.kind, child.root_run_id) == ("agent", team.id)
        assert child.context is not None
        assert child.context["actor"] == {"id": "ada", "type": "user"}
        assert child.context["namespace"] == "acme"
    events = await app.list_events(team.id)
    types = [event.type for event in events]
    assert set(types) <= set(EVENT_TYPES)
    assert types == [
        "run.started",
        "team.delegation.started",
        "team.delegation.completed",
        "team.delegation.started",
        "team.delegation.completed",
        "run.completed",
    ]
    assert [(e.payload["step_id"], e.payload["agent"]) for e in events[1:5]] == [
        ("plan", "planner"),
        ("plan", "planner"),
        ("work", "coder"),
        ("work", "coder"),
    ]
    assert events[2].payload["child_run_id"] == plan.id
    await app.close()


async def test_a_child_paused_for_approval_pauses_the_team_until_another_app_approves(
    apps: tuple[Fevex, Fevex], url: str | None
) -> None:
    app = make_app(
        shared(apps, url),
        {"output": "plan"},
        {"tool_calls": [{"id": "call-1", "name": "charge", "input": {"amount": 3}}]},
    )
    approver = make_app(shared(apps, url), {"output": "charged"})
    with pytest.raises(RunPausedError) as paused:
        await app.run_team("software", "ship it")
    team_id = paused.value.run_id
    team = await approver.get_run(team_id)
    assert (team.status, team.pause and team.pause["reason"]) == ("paused", "children")
    coder_run = next(
        run for run in await approver.list_runs(parent_run_id=team_id) if run.name == "coder"
    )
    assert coder_run.status == "paused"
    assert coder_run.pause is not None
    approval = coder_run.pause["approvals"][0]

    await approver.resume_run(
        coder_run.id,
        {"approval_id": approval["id"], "decision": "approve", "actor": {"id": "r"}},
    )
    sweep = await approver.wake_due_runs()

    assert [woken.id for woken in sweep.woken] == [team_id]
    ended = await app.get_run(team_id)
    assert ended.status == "completed"
    assert ended.output is not None
    assert ended.output["work"] == "charged"
    assert ledger == Counter({"charge": 1})
    assert len(await app.list_runs(parent_run_id=team_id)) == 2
    await approver.close()
    await app.close()


async def test_a_crash_mid_delegation_recovers_into_the_same_child(
    apps: tuple[Fevex, Fevex], url: str | None
) -> None:
    app = make_app(
        shared(apps, url),
        {"output": "plan"},
        {"tool_calls": [{"id": "call-1", "name": "build", "input": {"target": "app"}}]},
    )
    recoverer = make_app(shared(apps, url), {"output": "built"})
    crash_at.add("build")
    with pytest.raises(Crash):
        await app.run_team("software", "ship it")
    (team,) = await recoverer.list_runs(kind="team", name="software", status="running")
    (child,) = [c for c in await recoverer.list_runs(parent_run_id=team.id) if c.name == "coder"]
    assert (team.status, child.status) == ("running", "running")
    await asyncio.sleep(LEASE + 0.3)

    actor = {"id": "worker", "type": "service"}
    with pytest.raises(RunPausedError):
        # The team finds its journalled child still running and waits for it.
        await recoverer.recover_run(team.id, actor=actor)
    await recoverer.recover_run(child.id, actor=actor)
    await recoverer.wake_due_runs()

    ended = await recoverer.get_run(team.id)
    assert ended.status == "completed"
    assert ended.output is not None
    assert ended.output["work"] == "built"
    children = await recoverer.list_runs(parent_run_id=team.id)
    assert sorted(run.name for run in children) == ["coder", "planner"]
    # The planner's completed delegation never ran again: the first app's model answered it.
    assert ledger == Counter({"build": 2})
    await recoverer.close()
    await app.close()


async def test_max_delegations_is_enforced_from_the_checkpoint(
    apps: tuple[Fevex, Fevex], url: str | None
) -> None:
    app = make_app(
        shared(apps, url),
        {"tool_calls": [{"id": "call-1", "name": "charge", "input": {"amount": 1}}]},
    )
    continuing = make_app(shared(apps, url), {"output": "one"})
    with pytest.raises(RunPausedError) as paused:
        # The request narrows the definition's 5 to 1; the app that continues never sees it.
        await app.run_team("greedy", limits=TeamLimits(max_delegations=1))
    (child,) = await app.list_runs(parent_run_id=paused.value.run_id)
    assert child.pause is not None

    await continuing.resume_run(
        child.id,
        {
            "approval_id": child.pause["approvals"][0]["id"],
            "decision": "approve",
            "actor": {"id": "r"},
        },
    )
    await continuing.wake_due_runs()

    team = await app.get_run(paused.value.run_id)
    assert team.status == "failed"
    assert team.error is not None
    assert team.error["code"] == "MAX_DELEGATIONS_EXCEEDED"
    assert len(await app.list_runs(parent_run_id=team.id)) == 1
    await continuing.close()
    await app.close()


async def test_a_team_delegates_only_to_its_registered_members() -> None:
    app = make_app(None, {"output": "nope"})
    for agent in ("outsider", "nobody"):
        with pytest.raises(FevexRunError) as stray:
            await app.run_team("stray", agent)
        assert stray.value.code == "TEAM_MEMBER_UNKNOWN"
    with pytest.raises(FevexRunError) as wider:
        await app.run_team("widening")
    assert wider.value.code == "TEAM_MEMBER_UNKNOWN"
    assert all(run.kind == "team" for run in await app.list_runs())
    assert ledger == Counter()


async def test_a_stream_holds_the_team_events_and_its_childrens() -> None:
    app = make_app(None, {"output": "the plan"}, {"output": "the code"})

    events = [event async for event in app.stream_team(software, "ship it")]

    (team_id,) = {e.run_id for e in events if e.type == "team.delegation.started"}
    children = await app.list_runs(parent_run_id=team_id)
    assert {event.run_id for event in events} == {team_id, *(run.id for run in children)}
    assert events[-1].type == "run.completed"
    assert events[-1].run_id == team_id


def test_definitions_are_checked() -> None:
    def build_app(*teams: Any, agents: Any = (planner, coder)) -> Fevex:
        return create_fevex(
            models={"default": FakeModel()}, agents=agents, tools=[charge, build], teams=teams
        )

    with pytest.raises(FevexConfigurationError) as unregistered:
        build_app(software, agents=[planner])
    assert unregistered.value.code == "INVALID_TEAM"
    assert "coder" in unregistered.value.message
    with pytest.raises(FevexConfigurationError) as duplicate:
        build_app(software, software)
    assert duplicate.value.code == "DUPLICATE_TEAM"
    with pytest.raises(FevexConfigurationError) as not_a_team:
        build_app("software")
    assert not_a_team.value.code == "INVALID_TEAM"
    with pytest.raises(FevexConfigurationError) as limits:
        define_team(name="t", supervisor="planner", limits=TeamLimits(max_delegations=0))
    assert limits.value.code == "INVALID_TEAM"

    def not_async(team: TeamStep, request: Any) -> None: ...

    with pytest.raises(FevexConfigurationError) as sync_function:
        define_team(name="t", supervisor="planner", run=not_async)  # type: ignore[arg-type]
    assert sync_function.value.code == "INVALID_TEAM"
    with pytest.raises(FevexRunError) as unknown:
        build_app(software).run_team_sync("nope")
    assert unknown.value.code == "TEAM_NOT_FOUND"
