"""A script that blocks in one of the app's blocking twins while a synchronous tool (or
workflow step) sleeps 20 s in its worker thread; the test sends it SIGINT.

``python tests/ctrl_c_app.py TWIN STORE_URL [RUN_ID]``: it prints ``started`` once the sleep
has begun. ``hang`` leaves a run in its model step (``RUN_ID``) for ``recover_*`` to take
over once the process is killed.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from fevex import Fevex, RunPausedError, create_fevex, define_agent, define_tool
from fevex.models import ModelInput, ModelStreamEvent
from fevex.teams import TeamMember, TeamStep, define_team
from fevex.testing import FakeModel
from fevex.workflows import WorkflowStep, define_workflow

SLEEP = 20.0
LEASE = 1.0
ACTOR = {"id": "ops"}


def nap() -> str:
    print("started", flush=True)
    time.sleep(SLEEP)
    return "rested"


@define_tool(name="slow", description="A slow blocking tool.")
def slow(request: dict[str, Any]) -> str:
    return nap()


@define_tool(name="approved_slow", description="A slow tool needing approval.", approval="required")
def approved_slow(request: dict[str, Any]) -> str:
    return nap()


@define_workflow(name="flow")
async def flow(step: WorkflowStep, input: Any) -> Any:
    return await step.run("nap", nap)


@define_workflow(name="waiter", events={"go": None})
async def waiter(step: WorkflowStep, input: Any) -> Any:
    await step.wait_for_event("go", "go")
    return await step.run("nap", nap)


@define_workflow(name="sleeper")
async def sleeper(step: WorkflowStep, input: Any) -> Any:
    await step.sleep("rest", 0.01)
    return await step.run("nap", nap)


@define_team(name="crew", supervisor="lead", members=[TeamMember(agent="support", role="work")])
async def crew(team: TeamStep, task: str) -> Any:
    return (await team.delegate("work", agent="support", task=task)).output


class HangingModel:
    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        print("hanging", flush=True)
        await asyncio.Event().wait()
        yield  # type: ignore[misc]  # never reached: an async generator


def make_app(store: str, model: Any) -> Fevex:
    call = {"tool_calls": [{"id": "c1", "name": "slow", "input": {}}]}
    approval = {"tool_calls": [{"id": "c1", "name": "approved_slow", "input": {}}]}
    model = model or FakeModel(call, {"output": "done"})
    if sys.argv[1] == "resume_run":
        model = FakeModel(approval, {"output": "done"})
    return create_fevex(
        models={"default": model},
        agents=[
            define_agent(name="support", instructions="Help.", tools=["slow", "approved_slow"]),
            define_agent(name="lead", instructions="Lead."),
        ],
        tools=[slow, approved_slow],
        workflows=[flow, waiter, sleeper],
        teams=[crew],
        run_store=store,
        lease_seconds=LEASE,
    )


def main(twin: str, store: str) -> None:
    app = make_app(store, HangingModel() if twin == "hang" else None)
    if twin == "hang" or twin == "run_agent":
        app.run_agent_sync("support", "go")
    elif twin == "stream_agent":
        for _ in app.stream_agent_sync("support", "go"):
            pass
    elif twin == "start_agent":
        run = app.start_agent_sync("support", "go")
        for _ in app.follow_events_sync(run.id, poll_interval=0.05):
            pass
    elif twin == "run_workflow":
        app.run_workflow_sync("flow")
    elif twin == "stream_workflow":
        for _ in app.stream_workflow_sync("flow"):
            pass
    elif twin == "start_workflow":
        run = app.start_workflow_sync("flow")
        while True:
            app.get_run_sync(run.id)
            time.sleep(0.05)
    elif twin == "run_team":
        app.run_team_sync("crew", "go")
    elif twin == "stream_team":
        for _ in app.stream_team_sync("crew", "go"):
            pass
    elif twin == "start_team":
        run = app.start_team_sync("crew", "go")
        for _ in app.follow_events_sync(run.id, poll_interval=0.05):
            pass
    elif twin == "resume_run":
        try:
            app.run_agent_sync("support", "go")
        except RunPausedError as paused:
            (approval,) = paused.pause["approvals"]
            decision = {"approval_id": approval["id"], "decision": "approve", "actor": ACTOR}
            app.resume_run_sync(paused.run_id, decision)
    elif twin == "send_event":
        try:
            app.run_workflow_sync("waiter")
        except RunPausedError as paused:
            app.send_event_sync(paused.run_id, "go", None, actor=ACTOR)
    elif twin == "wake_due_runs":
        try:
            app.run_workflow_sync("sleeper")
        except RunPausedError:
            time.sleep(0.1)
            app.wake_due_runs_sync()
    elif twin in ("recover_run", "recover_expired_runs"):
        time.sleep(LEASE)  # the killed process's lease lapses
        if twin == "recover_run":
            app.recover_run_sync(sys.argv[3], actor=ACTOR)
        else:
            app.recover_expired_runs_sync(actor=ACTOR)
    else:
        raise SystemExit(f"unknown twin {twin}")
    print(f"{twin} returned", flush=True)


if __name__ == "__main__":
    assert threading.current_thread() is threading.main_thread()
    main(sys.argv[1], sys.argv[2])
