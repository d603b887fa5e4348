"""The many-calls scenario in fevex, with a model gateway that reads the last message only.

Run by :mod:`benchmarks.tool_calls.per_call`, in fevex's benchmark environment or the
suite's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from benchmarks.tool_calls import scenario
from fevex import Fevex, Limits, create_fevex, define_agent, define_tool
from fevex.messages import ToolResultPart
from fevex.models import (
    Completed,
    ModelInput,
    ModelResult,
    ModelStreamEvent,
    OutputDelta,
    ToolCall,
    Usage,
)

plan = scenario.Plan()
counter = scenario.Counter()


@define_tool(name=scenario.TOOL_NAME, description=scenario.TOOL_DESCRIPTION)
async def get_account(account_id: int) -> dict[str, object]:
    counter.calls += 1
    return {"id": account_id, "status": "active"}


class PlannedModel:
    """Asks for the calls of :data:`plan`, deciding from the last message alone."""

    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        usage = Usage(input_tokens=10, output_tokens=5, total_tokens=15)
        last = input.messages[-1].content[-1]
        following = plan.next_calls(last.id if isinstance(last, ToolResultPart) else None)
        if following:
            calls = [
                ToolCall(scenario.call_id(i), scenario.TOOL_NAME, {"account_id": i})
                for i in following
            ]
            yield Completed(ModelResult(tool_calls=calls, usage=usage))
        else:
            text = scenario.answer(plan.calls)
            yield OutputDelta(text)
            yield Completed(ModelResult(output=text, usage=usage))


# No bound of the run may stop the largest size of the benchmark.
LIMITS = Limits(max_steps=None, max_tool_calls=None)

app: Fevex = create_fevex(
    models={"default": PlannedModel()},
    agents=[
        define_agent(
            name="checker",
            instructions=scenario.INSTRUCTIONS,
            tools=[scenario.TOOL_NAME],
            limits=LIMITS,
        )
    ],
    tools=[get_account],
)


def run_sync(shape: str, calls: int) -> None:
    plan.shape, plan.calls, counter.calls = shape, calls, 0
    output = app.run_agent_sync("checker", input=scenario.QUESTION).output
    scenario.check(output, plan, counter)


async def run_async(shape: str, calls: int) -> None:
    plan.shape, plan.calls, counter.calls = shape, calls, 0
    output = (await app.run_agent("checker", input=scenario.QUESTION)).output
    scenario.check(output, plan, counter)
