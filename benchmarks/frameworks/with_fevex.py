"""The scenario in fevex, driven by a small model gateway that decides from the conversation.

``fevex.testing.FakeModel`` replays its responses once, in order; a benchmark that repeats the
run thousands of times needs a model that answers each run afresh, and the gateway contract is
small enough to write here.

Run with ``python -m benchmarks.frameworks.with_fevex [--out FILE]`` from the repository root.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from pydantic import BaseModel

from benchmarks import measure
from fevex import Fevex, create_fevex, define_agent, define_tool
from fevex.agents import AgentDefinition
from fevex.models import (
    Completed,
    ModelInput,
    ModelResult,
    ModelStreamEvent,
    OutputDelta,
    ToolCall,
    Usage,
)


class Account(BaseModel):
    id: int
    status: str


@define_tool(name=measure.TOOL_NAME, description=measure.TOOL_DESCRIPTION)
async def get_account(account_id: int) -> Account:
    return Account(id=account_id, status="active")


class AccountsModel:
    """Answers once the conversation holds the tool's result; until then, asks for the tool."""

    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        usage = Usage(input_tokens=10, output_tokens=5, total_tokens=15)
        results = input.messages[-1].tool_results
        if results:
            answer = measure.reply_to(results[0].output)
            yield OutputDelta(delta=answer)
            yield Completed(result=ModelResult(output=answer, usage=usage))
        else:
            arguments = {"account_id": measure.ACCOUNT_ID}
            call = ToolCall(id="call-1", name=measure.TOOL_NAME, input=arguments)
            yield Completed(result=ModelResult(tool_calls=[call], usage=usage))


def define_support_agent(index: int) -> AgentDefinition:
    return define_agent(
        name=f"support-{index}", instructions=measure.INSTRUCTIONS, tools=[measure.TOOL_NAME]
    )


app: Fevex = create_fevex(
    models={"default": AccountsModel()},
    agents=[define_support_agent(0)],
    tools=[get_account],
)


def run_sync() -> object:
    return app.run_agent_sync("support-0", input=measure.QUESTION).output


async def run_async() -> object:
    return (await app.run_agent("support-0", input=measure.QUESTION)).output


if __name__ == "__main__":
    measure.report(
        measure.Scenario(
            framework="fevex",
            distribution="fevex",
            import_statement="import fevex",
            tool_kind="async",
            run_sync=run_sync,
            run_async=run_async,
            define_agent=define_support_agent,
        )
    )
