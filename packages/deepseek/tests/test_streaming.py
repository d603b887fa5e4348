"""Streaming a step: text, thinking, tool-call fragments and usage off DeepSeek's SSE."""

from typing import Any

import pytest

from fevex.messages import Message
from fevex.models import ModelInput, ToolCall, ToolSpec, Usage
from fevex.testing import check_model_gateway, default_contract_inputs

pytestmark = pytest.mark.anyio

ASK = ModelInput((Message.system("Answer briefly."), Message.user("Say hello.")))
ACCOUNTS = ToolSpec(
    "accounts_get",
    "Get an account by ID.",
    {
        "type": "object",
        "properties": {"account_id": {"type": "integer"}},
        "required": ["account_id"],
        "additionalProperties": False,
    },
)


async def test_text_deltas_stream_in_order_and_end_in_one_result(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.stream(
        wire.chunk(role="assistant", content=""),
        wire.chunk(content="Hel"),
        wire.KEEP_ALIVE,
        wire.chunk(content="lo, "),
        wire.chunk(content="world."),
        wire.chunk(content="", finish_reason="stop", usage=wire.usage(reasoning=None)),
    )

    step = await drain(deepseek(), ASK)

    assert step.deltas == ["Hel", "lo, ", "world."]
    assert step.result.output == "Hello, world."
    assert step.result.tool_calls == []
    assert step.result.reasoning is None
    assert step.result.usage == Usage(
        input_tokens=31, output_tokens=12, total_tokens=43, cached_input_tokens=16
    )


async def test_reasoning_content_is_thinking_not_output(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.stream(
        wire.chunk(role="assistant", reasoning="The user "),
        wire.chunk(reasoning="wants a greeting."),
        wire.chunk(content="Hello."),
        wire.chunk(finish_reason="stop"),
        wire.usage_only(wire.usage(prompt=20, completion=9, cache_hit=0, reasoning=6)),
    )

    step = await drain(deepseek(), ASK)

    assert step.deltas == ["Hello."]
    assert step.result.output == "Hello."
    assert step.result.reasoning == "The user wants a greeting."
    assert step.result.usage == Usage(
        input_tokens=20, output_tokens=9, total_tokens=29, cached_input_tokens=0, reasoning_tokens=6
    )


async def test_only_deepseeks_reasoning_field_is_read(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    # Other OpenAI-compatible servers name it ``reasoning``; DeepSeek's profile reads only
    # its own ``reasoning_content``.
    deepseek_server.stream(
        wire.chunk(role="assistant", reasoning="Not DeepSeek's. ", reasoning_field="reasoning"),
        wire.chunk(reasoning="DeepSeek's."),
        wire.chunk(content="Hello."),
        wire.chunk(finish_reason="stop"),
    )

    step = await drain(deepseek(), ASK)

    assert step.deltas == ["Hello."]
    assert step.result.reasoning == "DeepSeek's."


async def test_tool_call_arguments_are_joined_from_awkward_fragments(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.stream(
        wire.chunk(role="assistant", reasoning="Look both accounts up."),
        wire.chunk(tool_calls=[wire.call_start(0, "call_a", "accounts_get")]),
        wire.chunk(tool_calls=[wire.call_more(0, '{"acc')]),
        wire.chunk(tool_calls=[wire.call_start(1, "call_b", "accounts_get", '{"')]),
        wire.chunk(tool_calls=[wire.call_more(0, 'ount_id"')]),
        wire.chunk(tool_calls=[wire.call_more(1, 'account_id": 4'), wire.call_more(0, ": 4")]),
        wire.chunk(tool_calls=[wire.call_more(0, "2}"), wire.call_more(1, "3}")]),
        wire.chunk(finish_reason="tool_calls"),
        wire.usage_only(wire.usage()),
    )

    step = await drain(deepseek(), ModelInput((Message.user("Accounts 42 and 43?"),), (ACCOUNTS,)))

    assert step.deltas == []
    assert step.result.tool_calls == [
        ToolCall("call_a", "accounts_get", {"account_id": 42}),
        ToolCall("call_b", "accounts_get", {"account_id": 43}),
    ]
    assert step.result.reasoning == "Look both accounts up."


async def test_sse_bytes_cut_mid_line_and_mid_json_still_decode(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.stream(
        wire.chunk(role="assistant", content="Split "),
        wire.chunk(content="across "),
        wire.chunk(tool_calls=[wire.call_start(0, "call_1", "accounts_get", '{"account_id":')]),
        wire.chunk(tool_calls=[wire.call_more(0, " 7}")]),
        wire.chunk(content="writes.", finish_reason="tool_calls", usage=wire.usage()),
        piece_size=7,
    )

    step = await drain(deepseek(), ModelInput((Message.user("Go."),), (ACCOUNTS,)))

    assert "".join(step.deltas) == "Split across writes."
    assert step.result.tool_calls == [ToolCall("call_1", "accounts_get", {"account_id": 7})]


async def test_the_shared_gateway_contract_holds(
    deepseek: Any, deepseek_server: Any, wire: Any
) -> None:
    deepseek_server.stream(
        wire.chunk(role="assistant", reasoning="Greet."),
        wire.chunk(content="Hello!"),
        wire.chunk(finish_reason="stop", usage=wire.usage()),
    )
    deepseek_server.stream(
        wire.chunk(tool_calls=[wire.call_start(0, "call_9", "accounts_get", '{"account_id"')]),
        wire.chunk(tool_calls=[wire.call_more(0, ":42}")]),
        wire.chunk(finish_reason="tool_calls"),
        wire.usage_only(wire.usage()),
    )

    results = await check_model_gateway(deepseek())

    assert [r.output for r in results] == ["Hello!", None]
    assert results[1].tool_calls == [ToolCall("call_9", "accounts_get", {"account_id": 42})]
    assert len(deepseek_server.requests) == len(default_contract_inputs())


async def test_a_stream_without_a_finish_reason_is_not_taken_as_an_answer(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    from fevex.errors import FevexRunError

    deepseek_server.stream(wire.chunk(content="Half an ans"))

    with pytest.raises(FevexRunError) as caught:
        await drain(deepseek(), ASK)

    assert caught.value.code == "PROVIDER_ERROR"
    assert caught.value.recoverable
