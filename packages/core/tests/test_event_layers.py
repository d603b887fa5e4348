"""The event layers carry what a model streams and ends with: content blocks and tool-input
deltas in the stream layer, the thinking part in the message layer, and the stop reason."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from fevex import create_fevex, define_agent, define_tool
from fevex.errors import FevexRunError
from fevex.events import BlockStart, BlockStop, TextDelta, ToolInputFragment, project_run
from fevex.messages import TextPart, ThinkingPart, ToolCallPart
from fevex.models import (
    BlockStarted,
    BlockStopped,
    Completed,
    ModelInput,
    ModelResult,
    ModelStreamEvent,
    OutputDelta,
    ToolCall,
    ToolInputDelta,
)
from fevex.testing import FakeModel, check_model_gateway

pytestmark = pytest.mark.anyio


class ScriptedGateway:
    """Streams the given events, one list per model step."""

    def __init__(self, *steps: Sequence[ModelStreamEvent]) -> None:
        self.steps = list(steps)

    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        for event in self.steps.pop(0):
            yield event


ARGUMENTS = {"account_id": 42}
TOOL_STEP: list[ModelStreamEvent] = [
    BlockStarted(0, "tool_use", "call-1", "get_account"),
    ToolInputDelta(0, '{"account_'),
    ToolInputDelta(0, 'id": 42}'),
    BlockStopped(0),
    Completed(
        ModelResult(
            tool_calls=[ToolCall("call-1", "get_account", ARGUMENTS)],
            reasoning="The user wants account 42.",
            stop_reason="tool_use",
        )
    ),
]
ANSWER_STEP: list[ModelStreamEvent] = [
    BlockStarted(0, "text"),
    OutputDelta("Active."),
    BlockStopped(0),
    Completed(ModelResult(output="Active.", stop_reason="end_turn")),
]


@define_tool
def get_account(account_id: int) -> dict[str, Any]:
    """Get an account."""
    return {"id": account_id, "status": "active"}


async def test_blocks_argument_deltas_thinking_and_stop_reasons_reach_every_layer() -> None:
    app = create_fevex(
        models={"default": ScriptedGateway(TOOL_STEP, ANSWER_STEP)},
        agents=[define_agent(name="support", instructions="Help.", tools=[get_account])],
    )
    result = await app.run_agent("support", "Is account 42 active?")

    completed = [e.payload for e in result.events if e.type == "model.completed"]
    assert [payload["stop_reason"] for payload in completed] == ["tool_use", "end_turn"]
    assert completed[0]["reasoning"] == "The user wants account 42."
    deltas = [e.payload for e in result.events if e.type == "model.tool_input.delta"]
    assert deltas == [
        {"step": 1, "index": 0, "delta": '{"account_'},
        {"step": 1, "index": 0, "delta": 'id": 42}'},
    ]

    view = project_run(await app.list_events(result.run_id))
    blocks = [item for item in view.stream if not isinstance(item, TextDelta)][:4]
    assert [type(item) for item in blocks] == [
        BlockStart,
        ToolInputFragment,
        ToolInputFragment,
        BlockStop,
    ]
    start = blocks[0]
    assert isinstance(start, BlockStart)
    assert (start.step, start.index, start.block, start.tool_call_id, start.tool_name) == (
        1,
        0,
        "tool_use",
        "call-1",
        "get_account",
    )
    fragments = [item.delta for item in blocks if isinstance(item, ToolInputFragment)]
    assert json.loads("".join(fragments)) == ARGUMENTS
    assistant = [m for m in view.messages if m.role == "assistant"]
    assert assistant[0].content == (
        ThinkingPart("The user wants account 42."),
        ToolCallPart("call-1", "get_account", ARGUMENTS),
    )
    assert assistant[1].content == (TextPart("Active."),)


async def test_the_fake_model_reports_its_stop_reasons() -> None:
    model = FakeModel(
        {"tool_calls": [{"id": "c", "name": "get_account", "input": ARGUMENTS}]},
        {"output": "Done.", "stop_reason": "max_tokens"},
    )
    results = await check_model_gateway(model)
    assert [result.stop_reason for result in results] == ["tool_use", "max_tokens"]


async def test_the_gateway_contract_checks_blocks_and_argument_deltas() -> None:
    assert [
        r.stop_reason for r in await check_model_gateway(ScriptedGateway(TOOL_STEP), [ask()])
    ] == ["tool_use"]
    broken: dict[str, tuple[list[ModelStreamEvent], str]] = {
        "arguments that spell another input": (
            [
                BlockStarted(0, "tool_use", "call-1", "get_account"),
                ToolInputDelta(0, '{"account_id": 7}'),
                BlockStopped(0),
                TOOL_STEP[-1],
            ],
            "MODEL_OUTPUT_MISMATCH",
        ),
        "a block left open": (
            [BlockStarted(0, "text"), ANSWER_STEP[1], ANSWER_STEP[-1]],
            "MODEL_STREAM_INVALID_EVENT",
        ),
        "a delta outside a tool block": (
            [BlockStarted(0, "text"), ToolInputDelta(0, "{}"), BlockStopped(0), ANSWER_STEP[-1]],
            "MODEL_STREAM_INVALID_EVENT",
        ),
        "a block stopped twice": (
            [BlockStarted(0, "text"), BlockStopped(0), BlockStopped(0), ANSWER_STEP[-1]],
            "MODEL_STREAM_INVALID_EVENT",
        ),
        "an index used twice": (
            [BlockStarted(0, "text"), BlockStopped(0), BlockStarted(0, "text"), BlockStopped(0)],
            "MODEL_STREAM_INVALID_EVENT",
        ),
        "an unknown stop reason": (
            [Completed(ModelResult(output="", stop_reason="tired"))],  # type: ignore[arg-type]
            "MODEL_STREAM_INVALID_EVENT",
        ),
    }
    for case, (events, code) in broken.items():
        with pytest.raises(FevexRunError) as caught:
            await check_model_gateway(ScriptedGateway(events), [ask()])
        assert caught.value.code == code, case


def ask() -> ModelInput:
    from fevex.messages import Message

    return ModelInput((Message.user("Is account 42 active?"),))
