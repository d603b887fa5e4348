"""A durable professional task: analyze with an agent, then publish once.

Run it with ``python examples/kit_tasks.py``. The first attempt's publish fails (the
printer is down); the second attempt does not analyze again, asks the publish step's
receipt query first and publishes once.
"""

import asyncio

from pydantic import BaseModel

from fevex import create_fevex, define_agent
from fevex.kits.tasks import TaskContext, TaskStep, define_durable_task
from fevex.runtime import ExecutionContext
from fevex.testing import FunctionModel

published: list[str] = []
printer_down = [True]


class ReviewState(BaseModel):
    text: str
    summary: str | None = None
    receipt: str | None = None


async def analyze(state: ReviewState, ctx: TaskContext) -> ReviewState:
    summary = await ctx.run_agent("analyst", state.text)  # a child run, within the budget
    return state.model_copy(update={"summary": summary})


def publish(state: ReviewState, ctx: TaskContext) -> ReviewState:
    if printer_down[0]:
        printer_down[0] = False
        raise RuntimeError("the printer is down")
    published.append(f"{ctx.task_id}: {state.summary}")
    return state.model_copy(update={"receipt": f"r-{len(published)}"})


def find_receipt(state: ReviewState, ctx: TaskContext) -> ReviewState | None:
    for number, line in enumerate(published, start=1):
        if line.startswith(ctx.task_id):
            return state.model_copy(update={"receipt": f"r-{number}"})
    return None  # not published: the step runs


def may_review(context: ExecutionContext, state: ReviewState) -> None:
    if (context.actor or {}).get("id") != "ana":
        raise PermissionError("only ana reviews")


review = define_durable_task(
    id="app.review",
    revision="1",
    state=ReviewState,
    authorize=may_review,
    max_attempts=3,
    calls_per_attempt=2,
    steps=[
        TaskStep("analyze", analyze, replay="safe"),
        TaskStep("publish", publish, replay="reconcile", reconcile=find_receipt),
    ],
)


async def main() -> None:
    model = FunctionModel(lambda model_input: "Looks good.")
    agents = [define_agent(name="analyst", instructions="Summarize the draft.")]
    async with create_fevex(models={"default": model}, agents=agents, tasks=[review]) as app:
        task_id = await app.create_task(
            "app.review", ReviewState(text="Draft 3"), deadline=3600, model_budget=6
        )
        ana = ExecutionContext(actor={"id": "ana", "type": "user"})
        try:
            await app.run_task(task_id, context=ana)
        except Exception as error:
            print(f"attempt 1: {error}")
        result = await app.run_task(task_id, context=ana)
        print(f"attempt 2: {result.output}")
        checkpoint = await app.run_store.get_checkpoint(task_id)
        print(f"attempts {checkpoint['attempt_count']}, budget {checkpoint['model_budget']}")
        print(f"published {len(published)} time(s)")


asyncio.run(main())
