"""The app the workflow and team process tests run in separate processes.

Every ``step.run`` of its workflows, each compensation and the ``proc_charge`` tool call
:func:`mark`, which appends ``"<name> <pid>"`` to the ledger file ``FEVEX_TEST_LEDGER``
(outside fevex) and then sleeps ``FEVEX_TEST_STEP_DELAY`` seconds, so a test can see a step
begin and kill its process before the step ends. The compensation named by
``FEVEX_TEST_HOLD`` (``release-2``, say) holds for a minute once begun, so a test kills its
process while it runs. The store is ``FEVEX_RUN_STORE``, the lease
``FEVEX_TEST_LEASE_SECONDS``. The agents' model is a :class:`~fevex.testing.FakeModel`
answering from its input alone, so every process answers a step alike.

``python -c "import workflow_process_app as a; a.main('proc_five')"`` (from this folder)
starts one run, prints its id, runs it to its end or its pause and prints ``done`` or
``paused <reason>``; ``a.main_team('proc_shop')`` does the same for a team. It imports the
module by name rather than running it as a script: a ``step.run`` step is identified by its
function's module and name, and ``__main__`` is not the name a ``fevex worker`` process
imports it by.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel

from fevex import (
    EventDelivery,
    Fevex,
    FevexRunError,
    RunEvent,
    RunPausedError,
    TeamMember,
    TeamStep,
    WorkflowStep,
    create_fevex,
    define_agent,
    define_team,
    define_tool,
    define_workflow,
)
from fevex.messages import ToolResultPart
from fevex.models import ModelInput
from fevex.testing import FakeModel

HOLD_SECONDS = 60.0


class Go(BaseModel):
    note: str


def mark(name: str) -> str:
    with open(os.environ["FEVEX_TEST_LEDGER"], "a", encoding="utf-8") as ledger:
        ledger.write(f"{name} {os.getpid()}\n")
    time.sleep(float(os.environ.get("FEVEX_TEST_STEP_DELAY", "0")))
    return name


@define_workflow(name="proc_five", version="1")
async def five(step: WorkflowStep, input: Any) -> list[str]:
    return [await step.run(f"step-{n}", mark, f"step-{n}") for n in range(1, 6)]


@define_workflow(name="proc_waiter", version="1", events={"go": Go})
async def waiter(step: WorkflowStep, input: Any) -> str:
    await step.run("before", mark, "before")
    delivery: EventDelivery = await step.wait_for_event("go", "go")
    await step.run("after", mark, "after")
    return str(delivery.payload.note)


@define_workflow(name="proc_napper", version="1")
async def napper(step: WorkflowStep, input: Any) -> str:
    await step.run("before", mark, "before")
    await step.sleep("nap", 1.0)
    return str(await step.run("after", mark, "after"))


def release(reserved: str) -> None:
    """Undo ``reserve-N``: ``release-N`` when it begins, ``released-N`` when it ends."""
    number = reserved.removeprefix("reserve-")
    mark(f"release-{number}")
    if os.environ.get("FEVEX_TEST_HOLD") == f"release-{number}":
        time.sleep(HOLD_SECONDS)
    mark(f"released-{number}")


def decline() -> None:
    mark("charge")
    raise FevexRunError("CARD_DECLINED", "The card was declined.")


@define_workflow(name="proc_booking", version="1")
async def booking(step: WorkflowStep, input: Any) -> None:
    for n in range(1, 4):
        await step.run(f"reserve-{n}", mark, f"reserve-{n}", compensate=release)
    await step.run("charge", decline)


@define_tool(name="proc_charge", description="Charge the card.", approval="required")
def charge(amount: int) -> dict[str, int]:
    mark("proc_charge")
    return {"charged": amount, "by": os.getpid()}


planner = define_agent(name="proc_planner", instructions="Plan.")
cashier = define_agent(name="proc_cashier", instructions="Pay.", tools=["proc_charge"])


@define_team(
    name="proc_shop",
    version="1",
    supervisor="proc_planner",
    members=[TeamMember(agent="proc_cashier", role="payments")],
)
async def shop(team: TeamStep, request: Any) -> dict[str, Any]:
    plan = await team.delegate("plan", agent="proc_planner", task=str(request))
    paid = await team.delegate("pay", agent="proc_cashier", task=str(plan.output))
    return {"plan": plan.output, "paid": paid.output}


def answer(input: ModelInput) -> dict[str, Any]:
    """The planner plans; the cashier asks to charge 3, then reports the charge's result."""
    if not input.tools:
        return {"output": "charge 3"}
    results = [
        part.output
        for message in input.messages
        for part in message.content
        if isinstance(part, ToolResultPart)
    ]
    if not results:
        return {"tool_calls": [{"id": "call-1", "name": "proc_charge", "input": {"amount": 3}}]}
    return {"output": f"charged {results[-1]['charged']} in process {results[-1]['by']}"}


def build_app(on_event: Any = None) -> Fevex:
    return create_fevex(
        # More answers than any one process asks for: each is ``answer`` of the input.
        models={"default": FakeModel(*itertools.repeat(answer, 20))},
        agents=[planner, cashier],
        tools=[charge],
        workflows=[five, waiter, napper, booking],
        teams=[shop],
        lease_seconds=float(os.environ.get("FEVEX_TEST_LEASE_SECONDS", "1.0")),
        on_event=on_event,
    )


def _announce(event: RunEvent) -> None:
    """Print the id of the run this process started (not those of its team's children)."""
    if event.type == "run.started" and "parent_run_id" not in event.payload:
        print(event.run_id, flush=True)


async def _run(start: Callable[[Fevex], Awaitable[object]]) -> None:
    app = build_app(on_event=_announce)
    try:
        await start(app)
    except RunPausedError as paused:
        print(f"paused {paused.pause['reason']}", flush=True)
        return
    finally:
        await app.close()
    print("done", flush=True)


def main(workflow: str) -> None:
    asyncio.run(_run(lambda app: app.run_workflow(workflow)))


def main_team(team: str) -> None:
    asyncio.run(_run(lambda app: app.run_team(team, "pay for the order")))
