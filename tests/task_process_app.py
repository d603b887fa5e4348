"""The app the durable-task process tests run in separate processes.

The task ``proc.review`` has three steps: ``analyze`` (safe: runs the agent ``analyst``,
one model call), ``publish`` (reconcile: its effect is a line ``publish <task id>`` in the
ledger file ``FEVEX_TEST_LEDGER``, outside fevex; its receipt query looks for that line) and
``notify`` (safe). Each step and the receipt query append a line naming itself first.
``FEVEX_TEST_KILL_AT`` names where the process SIGKILLs itself: ``analyze`` (after its agent
ran), ``publish-before`` / ``publish-after`` (before or after the effect), ``reconcile``
(inside the receipt query) or ``notify``. The store is ``FEVEX_RUN_STORE``, the lease
``FEVEX_TEST_LEASE_SECONDS``; ``FEVEX_TEST_MAX_ATTEMPTS`` (4) and
``FEVEX_TEST_CALLS_PER_ATTEMPT`` (2; ``all`` for the default, all the budget left) bound
the task.

``python -c "import task_process_app as a; a.create()"`` prints a new task's id;
``a.run(task_id)`` runs an attempt and prints ``done`` (or dies where it was told to).
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

from pydantic import BaseModel

from fevex import Fevex, create_fevex, define_agent
from fevex.kits.tasks import DurableTask, TaskContext, TaskStep, define_durable_task
from fevex.runtime import ExecutionContext
from fevex.testing import FunctionModel

CALLER = ExecutionContext(actor={"id": "ana", "type": "user"}, namespace="acme")


class Review(BaseModel):
    text: str
    summary: str | None = None
    published: bool = False
    notified: bool = False


def _note(line: str) -> None:
    with open(os.environ["FEVEX_TEST_LEDGER"], "a", encoding="utf-8") as ledger:
        ledger.write(line + "\n")
        ledger.flush()
        os.fsync(ledger.fileno())


def _lines() -> list[str]:
    try:
        with open(os.environ["FEVEX_TEST_LEDGER"], encoding="utf-8") as ledger:
            return ledger.read().splitlines()
    except FileNotFoundError:
        return []


def _die_at(point: str) -> None:
    if os.environ.get("FEVEX_TEST_KILL_AT") == point:
        os.kill(os.getpid(), signal.SIGKILL)


async def analyze(state: Review, ctx: TaskContext) -> Review:
    _note("analyze")
    summary = await ctx.run_agent("analyst", state.text)
    _die_at("analyze")
    return state.model_copy(update={"summary": summary})


def publish(state: Review, ctx: TaskContext) -> Review:
    _note("publish-step")
    _die_at("publish-before")
    _note(f"publish {ctx.task_id}")
    _die_at("publish-after")
    return state.model_copy(update={"published": True})


def find_receipt(state: Review, ctx: TaskContext) -> Review | None:
    _note("reconcile")
    _die_at("reconcile")
    if f"publish {ctx.task_id}" in _lines():
        return state.model_copy(update={"published": True})
    return None


def notify(state: Review, ctx: TaskContext) -> Review:
    _note("notify")
    _die_at("notify")
    return state.model_copy(update={"notified": True})


def may_review(context: ExecutionContext, state: Any) -> None:
    if (context.actor or {}).get("id") != "ana":
        raise PermissionError("only ana reviews")


def review_task() -> DurableTask:
    calls = os.environ.get("FEVEX_TEST_CALLS_PER_ATTEMPT", "2")
    return define_durable_task(
        id="proc.review",
        revision="1",
        state=Review,
        authorize=may_review,
        max_attempts=int(os.environ.get("FEVEX_TEST_MAX_ATTEMPTS", "4")),
        calls_per_attempt=None if calls == "all" else int(calls),
        steps=[
            TaskStep("analyze", analyze),
            TaskStep("publish", publish, replay="reconcile", reconcile=find_receipt),
            TaskStep("notify", notify),
        ],
    )


def build_app() -> Fevex:
    return create_fevex(
        models={"default": FunctionModel(lambda model_input: "a summary")},
        agents=[define_agent(name="analyst", instructions="Summarize.")],
        tasks=[review_task()],
        lease_seconds=float(os.environ.get("FEVEX_TEST_LEASE_SECONDS", "1.0")),
    )


def create() -> None:
    async def go() -> None:
        async with build_app() as app:
            task_id = await app.create_task(
                "proc.review", Review(text="draft"), deadline=300, model_budget=8, context=CALLER
            )
            print(task_id, flush=True)

    asyncio.run(go())


def run(task_id: str) -> None:
    async def go() -> None:
        async with build_app() as app:
            await app.run_task(task_id, context=CALLER)
            print("done", flush=True)

    asyncio.run(go())
