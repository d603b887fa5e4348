"""Cancelling a team on every store: the running or paused child of its delegation is
cancelled first, then the team, from the app that runs it or from another one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from fevex import AgentRun, Fevex, RunPausedError, create_fevex, define_agent, define_tool
from fevex.teams import TeamMember, TeamStep, define_team
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio

LEASE = 1.0
# A cancellation that never arrives hangs; this ends the hang.
HANG = 60

# The tool's signal that it waits, made anew in each test's event loop.
entered: dict[str, asyncio.Event] = {}
interrupted: list[str] = []


@define_tool(name="wait_forever", description="Wait.")
async def wait_forever(reason: str) -> str:
    entered["tool"].set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        interrupted.append(reason)
        raise
    return "never"


@define_tool(name="charge", description="Charge.", approval="required")
def charge(amount: int) -> int:
    return amount


lead = define_agent(name="lead", instructions="Lead.")
worker = define_agent(name="worker", instructions="Work.", tools=["wait_forever", "charge"])


@define_team(
    name="crew", version="1", supervisor="lead", members=[TeamMember(agent="worker", role="work")]
)
async def crew(team: TeamStep, task: str) -> Any:
    return (await team.delegate("work", agent="worker", task=task)).output


@pytest.fixture(autouse=True)
def fresh() -> None:
    entered["tool"] = asyncio.Event()
    interrupted.clear()


def make_app(store: Any, *responses: Any) -> Fevex:
    return create_fevex(
        models={"default": FakeModel(*responses)},
        agents=[lead, worker],
        tools=[wait_forever, charge],
        teams=[crew],
        run_store=store,
        lease_seconds=LEASE,
    )


@pytest.fixture
async def apps(url: str | None) -> AsyncIterator[tuple[Fevex, Fevex]]:
    """The app running the team and another sharing its store: another process."""
    waiting = {
        "tool_calls": [{"id": "call-1", "name": "wait_forever", "input": {"reason": "work"}}]
    }
    first = make_app(url, waiting)
    second = make_app(url if url is not None else first.run_store)
    yield first, second
    await second.close()
    await first.close()


async def cancelled_in_order(app: Fevex, team_id: str) -> AgentRun:
    """The team's one child, after checking that it was cancelled before the team."""
    team = await app.get_run(team_id)
    (child,) = await app.list_runs(parent_run_id=team_id)
    assert (team.status, child.status) == ("cancelled", "cancelled")
    (team_end,) = [e for e in await app.list_events(team_id) if e.type == "run.cancelled"]
    (child_end,) = [e for e in await app.list_events(child.id) if e.type == "run.cancelled"]
    assert child_end.occurred_at <= team_end.occurred_at
    assert child.updated_at <= team.updated_at
    return child


@pytest.mark.parametrize("where", ["here", "elsewhere"])
async def test_cancelling_a_team_cancels_its_running_child_first(
    apps: tuple[Fevex, Fevex], where: str
) -> None:
    app, other = apps
    team = await app.start_team(crew, "wait")
    with anyio.fail_after(HANG):
        await entered["tool"].wait()
        cancelling = app if where == "here" else other
        cancelled = await cancelling.cancel_run(team.id, timeout=HANG)

    assert cancelled.status == "cancelled"
    await cancelled_in_order(app, team.id)
    assert interrupted == ["work"]


async def test_cancelling_a_team_paused_on_its_paused_child_cancels_the_child_first(
    apps: tuple[Fevex, Fevex], url: str | None
) -> None:
    app = make_app(
        url if url is not None else apps[0].run_store,
        {"tool_calls": [{"id": "call-1", "name": "charge", "input": {"amount": 3}}]},
    )
    with pytest.raises(RunPausedError) as paused:
        await app.run_team(crew, "pay")
    team_id = paused.value.run_id
    (child,) = await app.list_runs(parent_run_id=team_id)
    assert child.status == "paused"

    cancelled = await apps[1].cancel_run(team_id)

    assert cancelled.status == "cancelled"
    child = await cancelled_in_order(app, team_id)
    assert child.pause is None
    await app.close()


async def test_a_team_whose_paused_child_alone_is_cancelled_fails_its_delegation(
    apps: tuple[Fevex, Fevex], url: str | None
) -> None:
    """Cancelling a child, not its team, is the child's end: its delegation fails with
    ``RUN_CANCELLED`` and so does the team, as a workflow's agent step would."""
    app = make_app(
        url if url is not None else apps[0].run_store,
        {"tool_calls": [{"id": "call-1", "name": "charge", "input": {"amount": 3}}]},
    )
    with pytest.raises(RunPausedError) as paused:
        await app.run_team(crew, "pay")
    team_id = paused.value.run_id
    (child,) = await app.list_runs(parent_run_id=team_id)

    await apps[1].cancel_run(child.id)
    sweep = await apps[1].wake_due_runs()

    assert [woken.id for woken in sweep.woken] == [team_id]
    team = await app.get_run(team_id)
    assert team.status == "failed"
    assert team.error is not None
    assert team.error["code"] == "RUN_CANCELLED"
    failed = [e for e in await app.list_events(team_id) if e.type == "team.delegation.failed"]
    assert [e.payload["error"]["code"] for e in failed] == ["RUN_CANCELLED"]
    await app.close()
