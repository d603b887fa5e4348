"""The Responses API path, against the loopback server through the real SDK."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from openai_loopback import TEST_API_KEY, LoopbackServer, ResponseEvents

from fevex.errors import FevexRunError
from fevex.messages import (
    FilePart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from fevex.models import (
    BlockStarted,
    BlockStopped,
    Completed,
    ModelInput,
    ModelResult,
    ModelStreamReader,
    OutputDelta,
    ToolInputDelta,
    ToolSpec,
    Usage,
)
from fevex.testing import check_model_gateway, default_contract_inputs
from fevex_openai import OpenAIModel

pytestmark = pytest.mark.anyio

ACCOUNT_TOOL = ToolSpec(
    "accounts_get",
    "Get an account by ID.",
    {
        "type": "object",
        "properties": {"account_id": {"type": "integer"}, "note": {"type": "string"}},
        "required": ["account_id", "note"],
        "additionalProperties": False,
    },
)
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


async def collect(model: OpenAIModel, model_input: ModelInput) -> tuple[list[str], ModelResult]:
    deltas: list[str] = []
    results: list[ModelResult] = []
    reader = ModelStreamReader()  # the contract, tool-call blocks included
    async for event in model.stream(model_input):
        reader.accept(event)
        if isinstance(event, OutputDelta):
            assert not results, "a delta after the terminal event"
            deltas.append(event.delta)
        elif isinstance(event, Completed):
            results.append(event.result)
    assert len(results) == 1
    reader.finish()
    return deltas, results[0]


def ask(text: str = "Say hello.", **fields: Any) -> ModelInput:
    return ModelInput((Message.system("Answer briefly."), Message.user(text)), **fields)


async def test_text_streams_as_deltas_with_usage(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(
        ResponseEvents()
        .message("Hel", "lo, ", "wörld")
        .completed(20, 7, cached=16, reasoning=3)
        .scripted()
    )
    deltas, result = await collect(make_model(), ask())
    assert deltas == ["Hel", "lo, ", "wörld"]
    assert result.output == "Hello, wörld"
    assert result.tool_calls == []
    assert result.usage == Usage(
        input_tokens=20,
        output_tokens=7,
        total_tokens=27,
        cached_input_tokens=16,
        reasoning_tokens=3,
    )
    assert result.provider_state is None
    request = server.requests[0]
    assert request.path == "/v1/responses"
    assert request.headers["authorization"] == f"Bearer {TEST_API_KEY}"
    assert request.json["model"] == "gpt-test"
    assert request.json["stream"] is True
    assert request.json["input"] == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": [{"type": "input_text", "text": "Say hello."}]},
    ]
    for owned_but_unused in ("tools", "parallel_tool_calls", "text", "max_output_tokens"):
        assert owned_but_unused not in request.json


async def test_a_body_split_into_small_byte_pieces_still_decodes(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    # 5-byte writes cut SSE frames, JSON and multi-byte UTF-8 characters apart.
    server.respond(
        ResponseEvents().message("São ", "Paulo 🌎 ", "ok").completed().scripted(chunk_size=5)
    )
    deltas, result = await collect(make_model(), ask())
    assert "".join(deltas) == result.output == "São Paulo 🌎 ok"


async def test_function_calls_stream_as_blocks_of_argument_deltas_and_stop_reasons_are_mapped(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(
        ResponseEvents()
        .function_call("call_abc", "accounts_get", '{"account', '_id": 42}')
        .completed()
        .scripted()
    )
    model_input = ask("Status of account 42?", tools=(ACCOUNT_TOOL,))
    events = [event async for event in make_model().stream(model_input)]
    assert events[:-1] == [
        BlockStarted(0, "tool_use", "call_abc", "accounts_get"),
        ToolInputDelta(0, '{"account'),
        ToolInputDelta(0, '_id": 42}'),
        BlockStopped(0),
    ]
    result = events[-1]
    assert isinstance(result, Completed)
    assert result.result.stop_reason == "tool_use"

    server.respond(ResponseEvents().message("Hi", "!").completed().scripted())
    answer = [event async for event in make_model().stream(ask())]
    assert answer[:-1] == [
        BlockStarted(0, "text"),
        OutputDelta("Hi"),
        OutputDelta("!"),
        BlockStopped(0),
    ]
    answered = answer[-1]
    assert isinstance(answered, Completed)
    assert answered.result.stop_reason == "end_turn"


async def test_tool_call_arguments_are_assembled_from_awkward_fragments(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    arguments = {"account_id": 42, "note": 'São "quoted" \\ back 🌎'}
    text = json.dumps(arguments)  # ASCII escapes: \u00e3, \", \\, surrogate pairs
    assert "\\u00e3" in text
    assert "\\ud83c" in text
    cut = [3, text.index("\\u00e3") + 3, text.index('\\"') + 1, text.index("\\ud83c") + 4]
    fragments = [text[a:b] for a, b in zip([0, *cut], [*cut, len(text)], strict=True)]
    server.respond(
        ResponseEvents()
        .function_call("call_abc", "accounts_get", *fragments)
        .completed()
        .scripted()
    )
    model_input = ask("Status of account 42?", tools=(ACCOUNT_TOOL,))
    deltas, result = await collect(make_model(), model_input)
    assert deltas == []
    assert result.output is None
    [call] = result.tool_calls
    assert (call.id, call.name, call.input) == ("call_abc", "accounts_get", arguments)
    request = server.requests[0].json
    assert request["tools"] == [
        {
            "type": "function",
            "name": "accounts_get",
            "description": "Get an account by ID.",
            "parameters": ACCOUNT_TOOL.input_schema,
            "strict": True,
        }
    ]
    assert request["parallel_tool_calls"] is False


async def test_invalid_tool_arguments_are_a_clear_error(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(
        ResponseEvents()
        .function_call("call_1", "accounts_get", '{"account_id": 4', "2,")
        .completed()
        .scripted()
    )
    with pytest.raises(FevexRunError) as caught:
        await collect(make_model(), ask(tools=(ACCOUNT_TOOL,)))
    assert caught.value.code == "MODEL_INVALID_JSON"
    assert "accounts_get" in caught.value.message
    assert caught.value.details["tool_call_id"] == "call_1"
    assert caught.value.recoverable


async def test_reasoning_is_surfaced_and_replayed_through_provider_state(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(
        ResponseEvents()
        .reasoning("Look the account up first.", encrypted="enc-1")
        .message("Checking.")
        .function_call("call_1", "accounts_get", '{"account_id": 42, "note": ""}')
        .completed(reasoning=9)
        .scripted(),
        ResponseEvents().message("It is active.").completed().scripted(),
    )
    model = make_model()
    first_input = ask(tools=(ACCOUNT_TOOL,))
    _, first = await collect(model, first_input)
    assert first.reasoning == "Look the account up first."
    assert first.output == "Checking."
    assert first.usage.reasoning_tokens == 9
    assert first.provider_state is not None
    json.dumps(first.provider_state)  # plain JSON, opaque to the runtime

    # The runtime keeps the step as an assistant message with thinking, text and calls.
    transcript = (
        *first_input.messages,
        Message(
            "assistant",
            (
                ThinkingPart("Look the account up first."),
                TextPart("Checking."),
                ToolCallPart("call_1", "accounts_get", {"account_id": 42, "note": ""}),
            ),
        ),
        Message("tool", (ToolResultPart("call_1", "accounts_get", {"status": "active"}),)),
    )
    second_input = ModelInput(transcript, (ACCOUNT_TOOL,), provider_state=first.provider_state)
    _, second = await collect(model, second_input)
    assert second.output == "It is active."

    replayed = server.requests[1].json["input"]
    assert [item.get("type") for item in replayed[2:]] == [
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
    ]
    reasoning, message, call, output = replayed[2:]
    assert reasoning["id"] == "rs_0"
    assert reasoning["encrypted_content"] == "enc-1"
    assert message["id"] == "msg_1"
    assert message["content"][0]["text"] == "Checking."
    assert (call["id"], call["call_id"], call["name"]) == ("fc_2", "call_1", "accounts_get")
    assert output == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": '{"status": "active"}',
    }


async def test_without_provider_state_the_conversation_is_rebuilt_from_messages(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    # After a resume or recovery in another process there is no provider_state.
    server.respond(ResponseEvents().message("Done.").completed().scripted())
    transcript = (
        Message.user("Go."),
        Message(
            "assistant",
            (
                ThinkingPart("hidden"),
                TextPart("Calling."),
                ToolCallPart("call_9", "accounts_get", {"account_id": 1, "note": "ü"}),
            ),
        ),
        Message(
            "tool",
            (ToolResultPart("call_9", "accounts_get", {"code": "TOOL_FAILED"}, is_error=True),),
        ),
    )
    await collect(make_model(), ModelInput(transcript, (ACCOUNT_TOOL,)))
    assert server.requests[0].json["input"][1:] == [
        {"role": "assistant", "content": "Calling."},
        {
            "type": "function_call",
            "call_id": "call_9",
            "name": "accounts_get",
            "arguments": '{"account_id": 1, "note": "ü"}',
        },
        {
            "type": "function_call_output",
            "call_id": "call_9",
            "output": '{"error": {"code": "TOOL_FAILED"}}',
        },
    ]


async def test_images_and_files_become_input_parts(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ResponseEvents().message("A cat.").completed().scripted())
    user = Message.user(
        [
            TextPart("What is this?"),
            ImagePart("image/png", data="iVBORw0KGgo="),
            ImagePart("image/jpeg", url="https://example.test/cat.jpg"),
            FilePart("application/pdf", data="JVBERi0=", name="report.pdf"),
            FilePart("application/pdf", url="https://example.test/report.pdf"),
        ]
    )
    await collect(make_model(), ModelInput((user,)))
    assert server.requests[0].json["input"][0]["content"] == [
        {"type": "input_text", "text": "What is this?"},
        {
            "type": "input_image",
            "image_url": "data:image/png;base64,iVBORw0KGgo=",
            "detail": "auto",
        },
        {"type": "input_image", "image_url": "https://example.test/cat.jpg", "detail": "auto"},
        {
            "type": "input_file",
            "file_data": "data:application/pdf;base64,JVBERi0=",
            "filename": "report.pdf",
        },
        {"type": "input_file", "file_url": "https://example.test/report.pdf"},
    ]


async def test_structured_output_is_requested_and_parsed(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(
        ResponseEvents()
        .message('{"ans', 'wer": "Account 42', ' is active."}')
        .completed()
        .scripted()
    )
    model_input = ask(output_schema=ANSWER_SCHEMA, max_output_tokens=300)
    deltas, result = await collect(make_model(), model_input)
    assert result.output == {"answer": "Account 42 is active."}
    assert json.loads("".join(deltas)) == result.output
    request = server.requests[0].json
    assert request["text"] == {
        "format": {"type": "json_schema", "name": "output", "schema": ANSWER_SCHEMA, "strict": True}
    }
    assert request["max_output_tokens"] == 300


async def test_structured_output_that_is_not_json_is_a_clear_error(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ResponseEvents().message('{"answer": ').completed().scripted())
    with pytest.raises(FevexRunError) as caught:
        await collect(make_model(), ask(output_schema=ANSWER_SCHEMA))
    assert caught.value.code == "MODEL_INVALID_JSON"
    assert caught.value.details["where"] == "output"


async def test_a_refusal_is_model_refusal(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(
        ResponseEvents().message("I can't ", "help with that.", refusal=True).completed().scripted()
    )
    with pytest.raises(FevexRunError) as caught:
        await collect(make_model(), ask(output_schema=ANSWER_SCHEMA))
    assert caught.value.code == "MODEL_REFUSAL"
    assert "I can't help with that." in caught.value.message
    assert not caught.value.recoverable


@pytest.mark.parametrize(
    ("reason", "code"),
    [("max_output_tokens", "MODEL_OUTPUT_TRUNCATED"), ("content_filter", "MODEL_REFUSAL")],
)
async def test_an_incomplete_response_is_not_passed_off_as_an_answer(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel], reason: str, code: str
) -> None:
    server.respond(ResponseEvents().message("Half an ans").incomplete(reason).scripted())
    with pytest.raises(FevexRunError) as caught:
        await collect(make_model(), ask(max_output_tokens=5))
    assert caught.value.code == code
    assert caught.value.details["reason"] == reason


@pytest.mark.parametrize(
    ("code", "message", "expected", "recoverable"),
    [
        ("server_error", "The server had an error.", "PROVIDER_ERROR", True),
        ("rate_limit_exceeded", "Slow down.", "PROVIDER_RATE_LIMITED", True),
        ("context_length_exceeded", "Too long.", "PROVIDER_CONTEXT_LENGTH", False),
    ],
)
async def test_a_mid_stream_error_event_is_mapped(
    server: LoopbackServer,
    make_model: Callable[..., OpenAIModel],
    code: str,
    message: str,
    expected: str,
    recoverable: bool,
) -> None:
    server.respond(ResponseEvents().message("Partial").error(code, message).scripted())
    deltas: list[str] = []
    with pytest.raises(FevexRunError) as caught:
        async for event in make_model().stream(ask()):
            if isinstance(event, BlockStarted | BlockStopped):
                continue  # the text block's bounds
            assert isinstance(event, OutputDelta)
            deltas.append(event.delta)
    assert deltas == ["Partial"]
    assert caught.value.code == expected
    assert message in caught.value.message
    assert caught.value.recoverable is recoverable
    assert caught.value.details["mid_stream"] is True


@pytest.mark.parametrize(
    ("code", "recoverable"), [("server_error", True), ("invalid_prompt", False)]
)
async def test_a_failed_response_is_a_provider_error(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel], code: str, recoverable: bool
) -> None:
    server.respond(ResponseEvents().failed(code, "Something broke.").scripted())
    with pytest.raises(FevexRunError) as caught:
        await collect(make_model(), ask())
    assert caught.value.code == "PROVIDER_ERROR"
    assert "Something broke." in caught.value.message
    assert caught.value.recoverable is recoverable
    assert caught.value.details["provider_code"] == code


async def test_a_stream_that_stops_before_completion_is_a_recoverable_error(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ResponseEvents().message("Hel").scripted())
    with pytest.raises(FevexRunError) as caught:
        await collect(make_model(), ask())
    assert caught.value.code == "PROVIDER_ERROR"
    assert caught.value.recoverable


async def test_the_gateway_passes_the_shared_contract_check(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(
        ResponseEvents().message("Hello", "!").completed().scripted(),
        ResponseEvents()
        .function_call("call_1", "accounts_get", '{"account_', 'id": 42}')
        .completed()
        .scripted(),
    )
    first, second = await check_model_gateway(make_model(), default_contract_inputs())
    assert first.output == "Hello!"
    assert second.tool_calls[0].input == {"account_id": 42}
