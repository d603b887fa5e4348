"""The many-calls scenario in Agno, with a subclass of Agno's ``Model`` that reads the last
message only (Agno ships no test model). Telemetry is off by environment and on the agents.

Run by :mod:`benchmarks.tool_calls.per_call`, in Agno's benchmark environment.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

# Before Agno is imported: it reads the switch at import time.
os.environ.setdefault("AGNO_TELEMETRY", "false")

from agno.agent import Agent
from agno.models.base import Model
from agno.models.message import Message
from agno.models.response import ModelResponse
from agno.tools import tool

from benchmarks.tool_calls import scenario

plan = scenario.Plan()
counter = scenario.Counter()


def find_account(account_id: int) -> dict[str, object]:
    counter.calls += 1
    return {"id": account_id, "status": "active"}


async def find_account_async(account_id: int) -> dict[str, object]:
    return find_account(account_id)


# Agno refuses an async tool under the blocking ``run`` and sends a sync tool to a thread
# under ``arun``, so each entry point gets the tool it runs natively.
get_account = tool(name=scenario.TOOL_NAME, description=scenario.TOOL_DESCRIPTION)(find_account)
get_account_async = tool(name=scenario.TOOL_NAME, description=scenario.TOOL_DESCRIPTION)(
    find_account_async
)


@dataclass
class PlannedModel(Model):
    """Asks for the calls of :data:`plan`, deciding from the last message alone."""

    id: str = "planned-fake"

    def invoke(self, messages: list[Message], *args: Any, **kwargs: Any) -> ModelResponse:
        last = messages[-1]
        following = plan.next_calls(last.tool_call_id if last.role == "tool" else None)
        if not following:
            return ModelResponse(role="assistant", content=scenario.answer(plan.calls))
        calls = [
            {
                "id": scenario.call_id(i),
                "type": "function",
                "function": {
                    "name": scenario.TOOL_NAME,
                    "arguments": json.dumps({"account_id": i}),
                },
            }
            for i in following
        ]
        return ModelResponse(role="assistant", tool_calls=calls)

    async def ainvoke(self, messages: list[Message], *args: Any, **kwargs: Any) -> ModelResponse:
        return self.invoke(messages)

    def invoke_stream(self, *args: Any, **kwargs: Any) -> Iterator[ModelResponse]:
        raise NotImplementedError("the benchmark never streams")

    def ainvoke_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ModelResponse]:
        raise NotImplementedError("the benchmark never streams")

    # No provider: ``invoke`` builds Agno's responses directly, so there is nothing to parse.
    def _parse_provider_response(self, response: Any, **kwargs: Any) -> ModelResponse:
        raise NotImplementedError

    def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
        raise NotImplementedError


def _agent(account_tool: Any) -> Agent:
    return Agent(
        name="checker",
        model=PlannedModel(),
        instructions=scenario.INSTRUCTIONS,
        tools=[account_tool],
        telemetry=False,
    )


blocking_agent = _agent(get_account)
agent = _agent(get_account_async)


def run_sync(shape: str, calls: int) -> None:
    plan.shape, plan.calls, counter.calls = shape, calls, 0
    scenario.check(blocking_agent.run(scenario.QUESTION).content, plan, counter)


async def run_async(shape: str, calls: int) -> None:
    plan.shape, plan.calls, counter.calls = shape, calls, 0
    scenario.check((await agent.arun(scenario.QUESTION)).content, plan, counter)
