"""The scenario in the OpenAI Agents SDK, driven by a small ``Model`` subclass.

The SDK's ``ScriptedModel`` consumes a fixed script and records every call, which would grow
without bound over thousands of runs; this model decides from the conversation instead and
builds its items with the SDK's own testing helpers.

Run with ``python -m benchmarks.frameworks.with_openai_agents [--out FILE]`` from the repository
root.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
from agents.models.interface import Model
from agents.testing import assistant_message, function_call
from pydantic import BaseModel

from benchmarks import measure

set_tracing_disabled(True)


class AccountQuery(BaseModel):
    account_id: int


class Account(BaseModel):
    id: int
    status: str


async def get_account(query: AccountQuery) -> Account:
    return Account(id=query.account_id, status="active")


class AccountsModel(Model):
    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        # Answer once the conversation holds the tool's output; until then, ask for the tool.
        last = input[-1] if isinstance(input, list) else {}
        if last.get("type") == "function_call_output":
            output = assistant_message(measure.reply_to(last["output"]))
        else:
            arguments = {"query": {"account_id": measure.ACCOUNT_ID}}
            output = function_call(measure.TOOL_NAME, arguments, call_id="call-1")
        return ModelResponse(output=[output], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the benchmark never streams")


model = AccountsModel()
account_tool = function_tool(
    get_account, name_override=measure.TOOL_NAME, description_override=measure.TOOL_DESCRIPTION
)


def define_agent(index: int) -> Agent[None]:
    return Agent(
        name=f"support-{index}",
        instructions=measure.INSTRUCTIONS,
        model=model,
        tools=[account_tool],
    )


agent = define_agent(0)


def run_sync() -> object:
    return Runner.run_sync(agent, measure.QUESTION).final_output


async def run_async() -> object:
    return (await Runner.run(agent, measure.QUESTION)).final_output


if __name__ == "__main__":
    measure.report(
        measure.Scenario(
            framework="openai-agents",
            distribution="openai-agents",
            import_statement="import agents",
            tool_kind="async",
            run_sync=run_sync,
            run_async=run_async,
            define_agent=define_agent,
        )
    )
