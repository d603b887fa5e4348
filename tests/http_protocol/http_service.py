"""The service the HTTP tests serve with ``fevex serve --app http_service:http_app``.

Callers authenticate with ``Authorization: Bearer <name>``: ``alice`` and ``bob`` are of
namespace ``acme``, ``mallory`` of ``evil``; ``banned`` is refused (403) and anything else
is nobody (401). Agents: ``support`` asks for one ``charge`` that needs approval, then
answers; ``ticker`` calls ``tick`` as many times as its input says (each tick waits
``FEVEX_TEST_TICK_SECONDS``), then answers, so that a test can cut its stream mid-run. A
``review`` workflow waits for ``review.approved``; a ``desk`` team delegates to ``support``.
The store is ``FEVEX_RUN_STORE``; leases last ``FEVEX_TEST_LEASE_SECONDS``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request

from fevex import (
    EventDelivery,
    Limits,
    WorkflowStep,
    create_fevex,
    define_agent,
    define_tool,
    define_workflow,
)
from fevex.http import Forbidden, create_http_app
from fevex.models import Completed, ModelInput, ModelResult, OutputDelta, ToolCall
from fevex.runtime import ExecutionContext
from fevex.teams import TeamMember, TeamStep, define_team

CALLERS = {
    "alice": ExecutionContext(actor={"id": "alice", "type": "user"}, namespace="acme"),
    "bob": ExecutionContext(actor={"id": "bob", "type": "user"}, namespace="acme"),
    "mallory": ExecutionContext(actor={"id": "mallory", "type": "user"}, namespace="evil"),
}


class Amount(BaseModel):
    amount: int


class Tick(BaseModel):
    number: int


class Approved(BaseModel):
    approved: bool


async def charge(request: Amount) -> dict[str, Any]:
    return {"charged": request.amount}


async def tick(request: Tick) -> dict[str, Any]:
    await asyncio.sleep(float(os.environ.get("FEVEX_TEST_TICK_SECONDS", "0")))
    return {"tick": request.number}


class ScriptedModel:
    """Stateless, so that a recovered run in another process asks for the same calls:
    ``support`` charges once; ``ticker`` ticks as often as its input says."""

    async def stream(self, input: ModelInput) -> AsyncIterator[Any]:
        done = sum(1 for message in input.messages if message.role == "tool")
        first = next(message.text for message in input.messages if message.role == "user")
        wanted = int(first) if first.isdigit() else 1
        tool = "tick" if first.isdigit() else "charge"
        if done < wanted:
            arguments = {"number": done + 1} if tool == "tick" else {"amount": 30}
            yield Completed(ModelResult(tool_calls=[ToolCall(f"call-{done + 1}", tool, arguments)]))
        else:
            yield OutputDelta("Done.")
            yield Completed(ModelResult(output="Done."))


@define_workflow(
    name="review",
    version="1",
    events={"review.approved": Approved},
    require_actor={"review.approved"},
)
async def review(step: WorkflowStep, draft: str) -> str:
    approval: EventDelivery = await step.wait_for_event("approval", "review.approved")
    return f"{draft} approved by {approval.actor['id']}"  # fmt: skip


@define_team(
    name="desk",
    version="1",
    supervisor="support",
    members=[TeamMember(agent="support", role="help")],
)
async def desk(team: TeamStep, request: str) -> Any:
    answer = await team.delegate("answer", agent="support", task=request)
    return answer.output


def authenticate(request: Request) -> ExecutionContext | None:
    header = request.headers.get("authorization", "")
    name = header.removeprefix("Bearer ")
    if name == "banned":
        raise Forbidden("This account is suspended.")
    return CALLERS.get(name)


def build_fevex() -> Any:
    model = ScriptedModel()
    return create_fevex(
        models={"default": model},
        agents=[
            define_agent(name="support", instructions="Help.", tools=["charge"]),
            define_agent(
                name="ticker",
                instructions="Tick.",
                tools=["tick"],
                limits=Limits(max_steps=100, max_tool_calls=100),
            ),
        ],
        tools=[
            define_tool(
                name="charge",
                description="Charge the customer.",
                approval="required",
                idempotency="keyed",
            )(charge),
            define_tool(name="tick", description="Tick once.", idempotency="keyed")(tick),
        ],
        workflows=[review],
        teams=[desk],
        lease_seconds=float(os.environ.get("FEVEX_TEST_LEASE_SECONDS", "30")),
    )


def build_http_app() -> Any:
    return create_http_app(
        build_fevex(),
        authenticate=authenticate,
        poll_interval=0.05,
        event_page_size=int(os.environ.get("FEVEX_TEST_PAGE_SIZE", "100")),
        max_body_size=int(os.environ.get("FEVEX_TEST_MAX_BODY", "65536")),
    )


http_app = build_http_app
