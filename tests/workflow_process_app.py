"""The app the workflow process tests run in separate processes.

Every ``step.run`` of its workflows calls :func:`mark`, which appends ``"<name> <pid>"`` to
the ledger file ``FEVEX_TEST_LEDGER`` (outside fevex) and then sleeps
``FEVEX_TEST_STEP_DELAY`` seconds, so a test can see a step begin and kill its process
before the step ends. The store is ``FEVEX_RUN_STORE``, the lease
``FEVEX_TEST_LEASE_SECONDS``.

``python -c "import workflow_process_app as a; a.main('proc_five')"`` (from this folder)
starts one run, prints its id, runs it to its end or its pause and prints ``done`` or
``paused <reason>``. It imports the module by name rather than running it as a script: a
``step.run`` step is identified by its function's module and name, and ``__main__`` is not
the name a ``fevex worker`` process imports it by.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from pydantic import BaseModel

from fevex import (
    EventDelivery,
    Fevex,
    RunEvent,
    RunPausedError,
    WorkflowStep,
    create_fevex,
    define_workflow,
)


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


def build_app(on_event: Any = None) -> Fevex:
    return create_fevex(
        workflows=[five, waiter, napper],
        lease_seconds=float(os.environ.get("FEVEX_TEST_LEASE_SECONDS", "1.0")),
        on_event=on_event,
    )


def _announce(event: RunEvent) -> None:
    if event.type == "run.started":
        print(event.run_id, flush=True)


async def _run(workflow: str) -> None:
    app = build_app(on_event=_announce)
    try:
        await app.run_workflow(workflow)
    except RunPausedError as paused:
        print(f"paused {paused.pause['reason']}", flush=True)
        return
    finally:
        await app.close()
    print("done", flush=True)


def main(workflow: str) -> None:
    asyncio.run(_run(workflow))
