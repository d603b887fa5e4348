"""The app the bounded-child-runs process tests run in separate processes.

``proc_group`` runs three agent children and commits each result by appending
``commit <task> <pid>`` to the ledger file ``FEVEX_TEST_LEDGER`` (outside fevex). Its
``on_event`` hook SIGKILLs the process once, right after the commit of task ``a`` has been
journalled ``completed`` (the marker file ``FEVEX_TEST_MARKER`` says it did so already):
the process dies between two commits. ``proc_late`` runs a task that fails at once beside
a child workflow whose step, a function in a worker thread, cannot be interrupted: it
outlives its group's failure and appends ``late <pid>`` when it ends. The store is
``FEVEX_RUN_STORE``, the lease ``FEVEX_TEST_LEASE_SECONDS``.

``python -c "import children_process_app as a; a.main('proc_group')"`` (from this folder)
starts one run, prints its id and runs it to its end.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

from fevex import (
    Fevex,
    FevexRunError,
    RunEvent,
    WorkflowStep,
    create_fevex,
    define_agent,
    define_workflow,
)
from fevex.kits.children import ChildTask, run_children
from fevex.models import ModelInput, ModelResult
from fevex.testing import FunctionModel


def write(line: str) -> None:
    with open(os.environ["FEVEX_TEST_LEDGER"], "a", encoding="utf-8") as ledger:
        ledger.write(f"{line} {os.getpid()}\n")


def commit(value: Any, task_id: str) -> None:
    write(f"commit-{task_id}")


def answer(input: ModelInput) -> ModelResult:
    text = input.messages[-1].text
    if text == "fail":
        raise RuntimeError("the model broke")
    return ModelResult(output=f"done:{text}")


analyst = define_agent(name="analyst", instructions="Analyze.")


@define_workflow(name="proc_group", version="1")
async def group(step: WorkflowStep, input: Any) -> Any:
    return await run_children(
        step,
        "parts",
        [ChildTask(task_id, agent="analyst", input=task_id) for task_id in ("a", "b", "c")],
        commit=commit,
    )


OUTLIVE_SECONDS = 1.0


def outlive() -> str:
    time.sleep(OUTLIVE_SECONDS)
    write("late")
    return "late"


@define_workflow(name="proc_slow", version="1")
async def slow(step: WorkflowStep, input: Any) -> Any:
    return await step.run("outlive", outlive)


@define_workflow(name="proc_late", version="1")
async def late(step: WorkflowStep, input: Any) -> Any:
    return await run_children(
        step,
        "parts",
        [
            ChildTask("slow", workflow="proc_slow"),
            ChildTask("broken", agent="analyst", input="fail"),
        ],
        commit=commit,
    )


def kill_between_commits(event: RunEvent) -> None:
    """Die once, right after the commit of ``a`` is journalled."""
    if event.type != "workflow.step.completed" or event.payload.get("step_id") != "parts:a:commit":
        return
    marker = Path(os.environ["FEVEX_TEST_MARKER"])
    if not marker.exists():
        marker.write_text("killed", encoding="utf-8")
        os.kill(os.getpid(), signal.SIGKILL)


def build_app(on_event: Any = None) -> Fevex:
    return create_fevex(
        models={"default": FunctionModel(answer)},
        agents=[analyst],
        workflows=[group, slow, late],
        lease_seconds=float(os.environ.get("FEVEX_TEST_LEASE_SECONDS", "1.0")),
        on_event=on_event or kill_between_commits,
    )


def _announce(event: RunEvent) -> None:
    kill_between_commits(event)
    if event.type == "run.started" and "parent_run_id" not in event.payload:
        print(event.run_id, flush=True)


async def _run(workflow: str) -> None:
    app = build_app(on_event=_announce)
    try:
        await app.run_workflow(workflow)
    except FevexRunError as failed:
        print(f"failed {failed.code}", flush=True)
        # Live on past the failure, as a long-lived app does: a step its group cancelled
        # may still be running in a thread.
        await asyncio.sleep(2 * OUTLIVE_SECONDS)
        return
    finally:
        await app.close()
    print("done", flush=True)


def main(workflow: str) -> None:
    asyncio.run(_run(workflow))
