"""The scenario in Pydantic AI, driven by its own test double, ``FunctionModel``.

Run with ``python -m benchmarks.frameworks.with_pydantic_ai [--out FILE]`` from the repository root.
"""

from __future__ import annotations

from pydantic import BaseModel
from pydantic_ai import Agent, Tool
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from benchmarks import measure


class AccountQuery(BaseModel):
    account_id: int


class Account(BaseModel):
    id: int
    status: str


async def get_account(query: AccountQuery) -> Account:
    return Account(id=query.account_id, status="active")


def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    # Answer once the conversation holds the tool's result; until then, ask for the tool.
    for part in messages[-1].parts:
        if isinstance(part, ToolReturnPart):
            return ModelResponse(parts=[TextPart(measure.reply_to(part.content))])
    call = ToolCallPart(
        tool_name=measure.TOOL_NAME,
        args={"query": {"account_id": measure.ACCOUNT_ID}},
        tool_call_id="call-1",
    )
    return ModelResponse(parts=[call])


model = FunctionModel(answer)
account_tool = Tool(get_account, name=measure.TOOL_NAME, description=measure.TOOL_DESCRIPTION)


def define_agent(index: int) -> Agent[None, str]:
    return Agent(
        model, name=f"support-{index}", instructions=measure.INSTRUCTIONS, tools=[account_tool]
    )


agent = define_agent(0)


def run_sync() -> object:
    return agent.run_sync(measure.QUESTION).output


async def run_async() -> object:
    return (await agent.run(measure.QUESTION)).output


if __name__ == "__main__":
    measure.report(
        measure.Scenario(
            framework="pydantic-ai",
            distribution="pydantic-ai-slim",
            import_statement="import pydantic_ai",
            tool_kind="async",
            run_sync=run_sync,
            run_async=run_async,
            define_agent=define_agent,
        )
    )
