"""The scenario in Agno, driven by a small subclass of Agno's ``Model``.

Agno ships no test model, so this one implements the four invoke methods and decides from the
conversation. Telemetry is off both by environment and on each agent.

Run with ``python -m benchmarks.frameworks.with_agno [--out FILE]`` from the repository root.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from agno.agent import Agent
from agno.models.base import Model
from agno.models.message import Message
from agno.models.response import ModelResponse
from agno.tools import Function, tool
from pydantic import BaseModel

from benchmarks import measure


class AccountQuery(BaseModel):
    account_id: int


class Account(BaseModel):
    id: int
    status: str


def find_account(query: AccountQuery) -> Account:
    return Account(id=query.account_id, status="active")


async def find_account_async(query: AccountQuery) -> Account:
    return find_account(query)


# Agno refuses an async tool under the blocking ``run`` and sends a sync tool to a thread
# under ``arun``, so each entry point gets the tool it runs natively.
get_account = tool(name=measure.TOOL_NAME, description=measure.TOOL_DESCRIPTION)(find_account)
get_account_async = tool(name=measure.TOOL_NAME, description=measure.TOOL_DESCRIPTION)(
    find_account_async
)


@dataclass
class AccountsModel(Model):
    """Answers once the conversation holds the tool's result; until then, asks for the tool."""

    id: str = "accounts-fake"

    def invoke(self, messages: list[Message], *args: Any, **kwargs: Any) -> ModelResponse:
        last = messages[-1]
        if last.role == "tool":
            return ModelResponse(role="assistant", content=measure.reply_to(last.content))
        arguments = json.dumps({"query": {"account_id": measure.ACCOUNT_ID}})
        call = {
            "id": "call-1",
            "type": "function",
            "function": {"name": measure.TOOL_NAME, "arguments": arguments},
        }
        return ModelResponse(role="assistant", tool_calls=[call])

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


model = AccountsModel()


def define_agent(index: int, account_tool: Function = get_account_async) -> Agent:
    return Agent(
        name=f"support-{index}",
        model=model,
        instructions=measure.INSTRUCTIONS,
        tools=[account_tool],
        telemetry=False,
    )


blocking_agent = define_agent(0, get_account)
agent = define_agent(0)


def run_sync() -> object:
    return blocking_agent.run(measure.QUESTION).content


async def run_async() -> object:
    return (await agent.arun(measure.QUESTION)).content


if __name__ == "__main__":
    measure.report(
        measure.Scenario(
            framework="agno",
            distribution="agno",
            import_statement="import agno.agent",
            tool_kind="sync for run, async for arun",
            run_sync=run_sync,
            run_async=run_async,
            define_agent=define_agent,
        )
    )
