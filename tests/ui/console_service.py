"""The service the console tests serve with ``fevex serve --ui --app console_service:http_app``.

Callers authenticate with ``Authorization: Bearer alice`` (namespace ``acme``). Agents:
``support`` asks for one ``charge`` that needs approval, then answers; ``ticker`` calls
``tick`` as many times as its input says (each tick waits ``FEVEX_TEST_TICK_SECONDS``; an
input ``"8 PATH"`` also holds the first tick until the file ``PATH`` exists);
``browser`` calls ``fetch_page``, which reports its progress with a message of hostile
markup and whose output is hostile markup too; ``asker`` calls ``ask_name``, which asks a
person for a name (the question is hostile markup) and answers with what it was given.
Every model step
reports 10 input and 5 output tokens, priced at 0.001 USD a token. The ``desk`` team
delegates to ``support``, so its run has a child. The ``review`` workflow waits for the
event ``review.approved``, then sleeps an hour on a timer. The durable task ``console.tick`` runs
``ticker`` in its one step; a test runs it with :func:`build_app` on the server's store,
since only the app starts a task.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request

from fevex import (
    Fevex,
    Limits,
    ToolContext,
    WorkflowStep,
    create_fevex,
    define_agent,
    define_tool,
    define_workflow,
)
from fevex.events import Cost
from fevex.http import create_http_app
from fevex.kits.tasks import TaskContext, TaskStep, define_durable_task
from fevex.models import Completed, ModelInput, ModelResult, OutputDelta, ToolCall, Usage
from fevex.observability import Observability
from fevex.runtime import ExecutionContext
from fevex.teams import TeamMember, TeamStep, define_team

ALICE = ExecutionContext(actor={"id": "alice", "type": "user"}, namespace="acme")
HOSTILE = (
    "<script>window.__fevexInjected = 'script'</script>"
    "<img src=x onerror=\"window.__fevexInjected = 'img'\">"
)
# Input and output only, as many providers report: the total (and so the cost) is derived.
STEP_USAGE = Usage(input_tokens=10, output_tokens=5)


class Amount(BaseModel):
    amount: int


class Tick(BaseModel):
    number: int
    gate: str | None = None


class Page(BaseModel):
    url: str


async def charge(request: Amount) -> dict[str, Any]:
    return {"charged": request.amount}


def wait_for_file(path: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


async def tick(request: Tick) -> dict[str, Any]:
    if request.gate is not None:
        await asyncio.to_thread(wait_for_file, Path(request.gate))
    await asyncio.sleep(float(os.environ.get("FEVEX_TEST_TICK_SECONDS", "0")))
    return {"tick": request.number}


async def fetch_page(request: Page, context: ToolContext) -> str:
    # Progress with a hostile message: the timeline shows it as text.
    context.report_progress(1, total=2, message=HOSTILE)
    await asyncio.sleep(0.05)
    return HOSTILE


NAME_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}


async def ask_name(context: ToolContext) -> dict[str, Any]:
    answer = await context.request_input(f"Which name? {HOSTILE}", schema=NAME_SCHEMA, timeout=60)
    return {"action": answer.action, "content": dict(answer.content or {})}


class ScriptedModel:
    """``support`` charges once; ``ticker`` ticks as often as its input says;
    ``browser`` fetches one page, then answers with hostile markup too."""

    async def stream(self, input: ModelInput) -> AsyncIterator[Any]:
        done = sum(1 for message in input.messages if message.role == "tool")
        first = next(message.text for message in input.messages if message.role == "user")
        count, _, gate = first.partition(" ")
        if first.startswith("browse"):
            wanted, tool, arguments = 1, "fetch_page", {"url": "https://example.test"}
        elif first.startswith("ask"):
            wanted, tool, arguments = 1, "ask_name", {}
        elif count.isdigit():
            wanted, tool, arguments = int(count), "tick", {"number": done + 1}
            if gate and done == 0:
                arguments["gate"] = gate
        else:
            wanted, tool, arguments = 1, "charge", {"amount": 30}
        if done < wanted:
            call = ToolCall(f"call-{done + 1}", tool, arguments)
            yield Completed(ModelResult(tool_calls=[call], usage=STEP_USAGE))
        else:
            answer = HOSTILE if tool == "fetch_page" else "Done."
            yield OutputDelta(answer)
            yield Completed(ModelResult(output=answer, usage=STEP_USAGE))


@define_team(
    name="desk",
    version="1",
    supervisor="support",
    members=[TeamMember(agent="support", role="help")],
)
async def desk(team: TeamStep, request: str) -> Any:
    answer = await team.delegate("answer", agent="support", task=request)
    return answer.output


class Approved(BaseModel):
    approved: bool


@define_workflow(name="review", version="1", events={"review.approved": Approved})
async def review(step: WorkflowStep, draft: str) -> str:
    await step.wait_for_event("approval", "review.approved")
    await step.sleep("cool_down", 3600)
    return f"{draft} approved"


class Ticks(BaseModel):
    count: str
    answer: str | None = None


async def run_ticker(state: Ticks, ctx: TaskContext) -> Ticks:
    answer = await ctx.run_agent("ticker", state.count)
    return state.model_copy(update={"answer": answer})


tick_task = define_durable_task(
    id="console.tick",
    revision="1",
    state=Ticks,
    authorize=lambda context, state: None,
    steps=[TaskStep("tick", run_ticker, replay="safe")],
)


def authenticate(request: Request) -> ExecutionContext | None:
    return ALICE if request.headers.get("authorization") == "Bearer alice" else None


def price(usage: Usage, model: str | None) -> Cost:
    return Cost(0.001 * (usage.total_tokens or 0), "USD")


def build_app(run_store: str | None = None) -> Fevex:
    return create_fevex(
        models={"default": ScriptedModel()},
        agents=[
            define_agent(name="support", instructions="Help.", tools=["charge"]),
            define_agent(
                name="ticker",
                instructions="Tick.",
                tools=["tick"],
                limits=Limits(max_steps=100, max_tool_calls=100),
            ),
            define_agent(name="browser", instructions="Browse.", tools=["fetch_page"]),
            define_agent(name="asker", instructions="Ask.", tools=["ask_name"]),
        ],
        tools=[
            define_tool(
                name="charge", description="Charge.", approval="required", idempotency="keyed"
            )(charge),
            define_tool(name="tick", description="Tick once.", idempotency="keyed")(tick),
            define_tool(name="fetch_page", description="Fetch a page.")(fetch_page),
            define_tool(name="ask_name", description="Ask a person for a name.")(ask_name),
        ],
        teams=[desk],
        workflows=[review],
        tasks=[tick_task],
        observability=Observability(exporters=[], calculate_cost=price),
        lease_seconds=float(os.environ.get("FEVEX_TEST_LEASE_SECONDS", "30")),
        run_store=run_store,
    )


def http_app() -> Any:
    return create_http_app(build_app(), authenticate=authenticate, poll_interval=0.05)
