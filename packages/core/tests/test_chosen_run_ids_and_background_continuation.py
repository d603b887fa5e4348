"""Runs started under a chosen id (``run_id=``), started at most once; and continuing a run
in the background (``wait=False`` on ``resume_run``, ``send_event``, ``recover_run``)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from fevex import (
    EventDelivery,
    FevexRunError,
    WorkflowStep,
    create_fevex,
    define_agent,
    define_tool,
    define_workflow,
)
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio


class Amount(BaseModel):
    amount: int


class Approved(BaseModel):
    approved: bool


@define_workflow(name="review", version="1", events={"review.approved": Approved})
async def review(step: WorkflowStep, draft: str) -> str:
    approval: EventDelivery = await step.wait_for_event("approval", "review.approved")
    return f"{draft}: {approval.payload}"


def app_with(*responses: Any) -> Any:
    async def charge(request: Amount) -> dict[str, int]:
        return {"charged": request.amount}

    return create_fevex(
        models={"default": FakeModel(*responses)},
        agents=[define_agent(name="support", instructions="Help.", tools=["charge"])],
        tools=[define_tool(name="charge", description="Charge.", approval="required")(charge)],
        workflows=[review],
    )


async def until_paused(app: Any, run_id: str) -> None:
    async for event in app.follow_events(run_id, poll_interval=0.01):
        if event.type == "run.paused":
            return


CHARGE = {"tool_calls": [{"id": "c1", "name": "charge", "input": {"amount": 3}}]}


async def test_a_run_starts_under_the_id_asked_for_once() -> None:
    async with app_with({"output": "one"}, {"output": "two"}) as app:
        result = await app.run_agent("support", "hi", run_id="delivery:42")
        assert result.run_id == "delivery:42"
        run = await app.get_run("delivery:42")
        assert (run.status, run.root_run_id) == ("completed", "delivery:42")

        with pytest.raises(FevexRunError) as again:
            await app.run_agent("support", "hi", run_id="delivery:42")
        assert again.value.code == "RUN_CONFLICT"
        # Refused before any model call: the second response is still queued.
        assert len(await app.list_runs()) == 1
        assert (await app.get_run("delivery:42")).output == "one"


@pytest.mark.parametrize("run_id", ["", "a/b", "x" * 129, "sp ace", 42])
async def test_a_run_id_that_no_store_or_url_can_carry_is_refused(run_id: Any) -> None:
    async with app_with({"output": "one"}) as app:
        with pytest.raises(FevexRunError) as refused:
            await app.start_agent("support", "hi", run_id=run_id)
        assert refused.value.code == "INVALID_ARGUMENT"
        assert await app.list_runs() == []


async def test_resume_without_waiting_returns_the_taken_run_and_it_goes_on() -> None:
    async with app_with(CHARGE, {"output": "charged"}) as app:
        started = await app.start_agent("support", "charge me")
        await until_paused(app, started.id)
        paused = await app.get_run(started.id)
        approval = paused.pause["approvals"][0]["id"]  # type: ignore[index]
        decision = {"approval_id": approval, "decision": "approve", "actor": {"id": "ada"}}

        taken = await app.resume_run(started.id, decision, wait=False)

        assert taken.status == "running"
        assert taken.revision > paused.revision
        events = [event.type async for event in app.follow_events(started.id, poll_interval=0.01)]
        assert events[-1] == "run.completed"
        assert (await app.get_run(started.id)).output == "charged"


async def test_a_refused_continuation_raises_even_without_waiting() -> None:
    async with app_with(CHARGE) as app:
        started = await app.start_agent("support", "charge me")
        await until_paused(app, started.id)
        wrong = {"approval_id": "apr_wrong", "decision": "approve", "actor": {"id": "ada"}}
        with pytest.raises(FevexRunError) as refused:
            await app.resume_run(started.id, wrong, wait=False)
        assert refused.value.code == "APPROVAL_NOT_FOUND"
        with pytest.raises(FevexRunError) as expired:
            await app.recover_run(started.id, actor={"id": "ada"}, wait=False)
        assert expired.value.code == "RUN_CONFLICT"
        assert (await app.get_run(started.id)).status == "paused"


async def test_send_event_without_waiting() -> None:
    async with app_with() as app:
        started = await app.start_workflow("review", "draft")
        await until_paused(app, started.id)
        taken = await app.send_event(started.id, "review.approved", {"approved": True}, wait=False)
        assert taken.status == "running"
        async for _ in app.follow_events(started.id, poll_interval=0.01):
            pass
        assert (await app.get_run(started.id)).output == "draft: approved=True"


async def test_the_app_names_its_workflows_and_teams() -> None:
    async with app_with() as app:
        assert (app.agents, app.workflows, app.teams) == (("support",), ("review",), ())


async def test_following_a_page_at_a_time_yields_what_follow_events_yields() -> None:
    async with app_with({"output": "x" * 30}) as app:
        started = await app.start_agent("support", "hi")
        pages = [
            list(page)
            async for page in app.follow_event_pages(started.id, poll_interval=0.01, page_size=2)
        ]
        events = [event async for event in app.follow_events(started.id, page_size=2)]
        assert pages
        assert all(1 <= len(page) <= 2 for page in pages)
        assert [event for page in pages for event in page] == events
        assert events[-1].type == "run.completed"


def test_following_pages_has_a_blocking_twin() -> None:
    with app_with({"output": "x"}) as app:
        started = app.start_agent_sync("support", "hi")
        events = list(app.follow_events_sync(started.id))
        after = [
            event
            for page in app.follow_event_pages_sync(started.id, after=events[0].id)
            for event in page
        ]
        assert after == events[1:]
