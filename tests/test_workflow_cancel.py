"""Cancelling a workflow interrupts every parallel branch that is waiting, also when the
branch that entered its step last has already finished."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from fevex import WorkflowStep, create_fevex, define_agent, define_tool, define_workflow
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio

waiting = asyncio.Event()
interrupted: list[str] = []


async def forever() -> str:
    waiting.set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        interrupted.append("slow")
        raise
    return "never"


async def quick() -> str:
    await waiting.wait()  # enters its step after the slow branch, and ends first
    return "done"


@define_workflow(name="fan", version="1")
async def fan(step: WorkflowStep, input: Any) -> Any:
    return await step.parallel(
        "both",
        {"slow": lambda: step.run("slow", forever), "quick": lambda: step.run("quick", quick)},
    )


async def test_cancelling_interrupts_a_branch_still_waiting() -> None:
    waiting.clear()
    interrupted.clear()
    app = create_fevex(models={"default": FakeModel()}, workflows=[fan])
    run = await app.start_workflow(fan, {})
    await waiting.wait()
    for _ in range(100):
        quick_done = [e for e in await app.list_events(run.id) if "quick" in str(e.payload)]
        if any(e.type == "workflow.step.completed" for e in quick_done):
            break
        await asyncio.sleep(0.01)

    cancelled = await asyncio.wait_for(app.cancel_run(run.id), 30)

    assert cancelled.status == "cancelled"
    assert interrupted == ["slow"]
    await app.close()


entered = asyncio.Event()


@define_tool(name="hold", description="Hold.")
async def hold(reason: str) -> str:
    entered.set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        interrupted.append(reason)
        raise
    return "never"


holder = define_agent(name="holder", instructions="Hold.", tools=["hold"])


@define_workflow(name="delegates", version="1")
async def delegates(step: WorkflowStep, input: Any) -> Any:
    return (await step.agent("hold", "holder", input="hold")).output


async def test_cancelling_a_workflow_cancels_its_running_child_first_and_ends_cancelled() -> None:
    """The child's cancellation is the workflow's own, not a failed agent step."""
    entered.clear()
    interrupted.clear()
    app = create_fevex(
        models={
            "default": FakeModel(
                {"tool_calls": [{"id": "c", "name": "hold", "input": {"reason": "x"}}]}
            )
        },
        agents=[holder],
        tools=[hold],
        workflows=[delegates],
    )
    run = await app.start_workflow(delegates)
    await asyncio.wait_for(entered.wait(), 30)

    cancelled = await asyncio.wait_for(app.cancel_run(run.id), 30)

    assert (cancelled.status, cancelled.error) == ("cancelled", None)
    (child,) = await app.list_runs(parent_run_id=run.id)
    assert child.status == "cancelled"
    assert interrupted == ["x"]
    types = [event.type for event in await app.list_events(run.id)]
    assert "workflow.step.failed" not in types
    assert types[-1] == "run.cancelled"
    await app.close()
