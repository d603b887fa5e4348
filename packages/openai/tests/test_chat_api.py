"""The Chat Completions path (also OpenAI-compatible servers), through the real SDK."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from openai_loopback import ChatChunks, LoopbackServer

from fevex.errors import FevexConfigurationError, FevexRunError
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
from fevex_openai import OpenAIModel, ProviderProfile

pytestmark = pytest.mark.anyio

WEATHER_TOOL = ToolSpec(
    "weather_get",
    "Get the weather for a city.",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
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


@pytest.fixture
def chat_model(make_model: Callable[..., OpenAIModel]) -> Callable[..., OpenAIModel]:
    def make(**options: Any) -> OpenAIModel:
        return make_model(api="chat", **options)

    return make


async def test_text_streams_and_usage_comes_from_the_usage_only_chunk(
    server: LoopbackServer, chat_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(
        ChatChunks()
        .content("Hel", "lo")
        .finish("stop")
        .usage(30, 4, cached=24, reasoning=2)
        .scripted()
    )
    deltas, result = await collect(chat_model(), ask())
    assert deltas == ["Hel", "lo"]
    assert result.output == "Hello"
    assert result.usage == Usage(30, 4, 34, cached_input_tokens=24, reasoning_tokens=2)
    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.json["stream"] is True
    assert request.json["stream_options"] == {"include_usage": True}
    assert request.json["messages"] == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Say hello."},
    ]


async def test_a_server_that_reports_input_and_output_only_gets_their_total(
    server: LoopbackServer, chat_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ChatChunks().content("Hi").finish().usage(100, 44, total=False).scripted())
    _, result = await collect(chat_model(), ask())
    assert result.usage == Usage(100, 44, 144)


async def test_a_server_that_reports_no_usage_gives_empty_usage(
    server: LoopbackServer, chat_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ChatChunks().content("Hi").finish().scripted())
    _, result = await collect(chat_model(), ask())
    assert result.usage == Usage()


async def test_tool_calls_stream_as_blocks_of_argument_deltas_and_stop_reasons_are_mapped(
    server: LoopbackServer, chat_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(
        ChatChunks()
        .tool_call(0, "call_a", "weather_get", '{"ci', 'ty": "Oslo"}')
        .tool_call(1, "call_b", "weather_get", '{"city": "Rome"}')
        .finish("tool_calls")
        .usage()
        .scripted()
    )
    events = [event async for event in chat_model().stream(ask(tools=(WEATHER_TOOL,)))]
    assert events[:-1] == [
        BlockStarted(0, "tool_use", "call_a", "weather_get"),
        ToolInputDelta(0, '{"ci'),
        ToolInputDelta(0, 'ty": "Oslo"}'),
        BlockStarted(1, "tool_use", "call_b", "weather_get"),
        ToolInputDelta(1, '{"city": "Rome"}'),
        BlockStopped(0),
        BlockStopped(1),
    ]
    result = events[-1]
    assert isinstance(result, Completed)
    assert result.result.stop_reason == "tool_use"

    server.respond(ChatChunks().content("Hi", "!").finish("stop").usage().scripted())
    answer = [event async for event in chat_model().stream(ask())]
    assert answer[:-1] == [
        BlockStarted(0, "text"),
        OutputDelta("Hi"),
        OutputDelta("!"),
        BlockStopped(0),
    ]
    answered = answer[-1]
    assert isinstance(answered, Completed)
    assert answered.result.stop_reason == "end_turn"


async def test_tool_call_fragments_are_assembled_by_index(
    server: LoopbackServer, chat_model: Callable[..., OpenAIModel]
) -> None:
    first = json.dumps({"city": 'São Paulo \\ "centro"'})
    second = json.dumps({"city": "Zürich"}, ensure_ascii=False)
    server.respond(
        ChatChunks()
        .tool_call(0, "call_a", "weather_get", first[:9], first[9:14], first[14:])
        .tool_call(1, "call_b", "weather_get", second[:3], second[3:11], second[11:])
        .finish("tool_calls")
        .usage()
        .scripted(chunk_size=7)
    )
    deltas, result = await collect(chat_model(), ask(tools=(WEATHER_TOOL,)))
    assert deltas == []
    assert result.output is None
    assert [(c.id, c.name, c.input) for c in result.tool_calls] == [
        ("call_a", "weather_get", {"city": 'São Paulo \\ "centro"'}),
        ("call_b", "weather_get", {"city": "Zürich"}),
    ]
    request = server.requests[0].json
    assert request["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather_get",
                "description": "Get the weather for a city.",
                "parameters": WEATHER_TOOL.input_schema,
                "strict": True,
            },
        }
    ]
    assert request["parallel_tool_calls"] is False


async def test_compatible_servers_without_ids_or_arguments_still_work(
    server: LoopbackServer, chat_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(
        ChatChunks()
        .reasoning("The user wants ", "the weather.")
        .tool_call(0, None, "weather_get")
        .tool_call(1, None, "weather_get", '{"city": "Lima"}')
        .finish("tool_calls")
        .scripted()
    )
    _, result = await collect(chat_model(schema_policy="best-effort"), ask(tools=(WEATHER_TOOL,)))
    first, second = result.tool_calls
    assert first.input == {}
    assert second.input == {"city": "Lima"}
    assert first.id
    assert second.id
    assert first.id != second.id
    assert result.reasoning == "The user wants the weather."
    # best-effort sends the schema without asking for strict adherence.
    assert "strict" not in server.requests[0].json["tools"][0]["function"]


async def test_invalid_tool_arguments_are_a_clear_error(
    server: LoopbackServer, chat_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(
        ChatChunks().tool_call(0, "call_x", "weather_get", '{"city": "Li').finish().scripted()
    )
    with pytest.raises(FevexRunError) as caught:
        await collect(chat_model(), ask(tools=(WEATHER_TOOL,)))
    assert caught.value.code == "MODEL_INVALID_JSON"
    assert caught.value.details["tool_name"] == "weather_get"


async def test_structured_output_uses_response_format_and_is_parsed(
    server: LoopbackServer, chat_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ChatChunks().content('{"answer"', ': "yes"}').finish().usage().scripted())
    deltas, result = await collect(
        chat_model(), ask(output_schema=ANSWER_SCHEMA, max_output_tokens=64)
    )
    assert result.output == {"answer": "yes"}
    assert json.loads("".join(deltas)) == result.output
    request = server.requests[0].json
    assert request["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": ANSWER_SCHEMA, "strict": True},
    }
    assert request["max_completion_tokens"] == 64


async def test_the_conversation_becomes_chat_messages(
    server: LoopbackServer, chat_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ChatChunks().content("Sunny.").finish().scripted())
    transcript = (
        Message.system("Be brief."),
        Message.user(
            [
                TextPart("Weather here?"),
                ImagePart("image/png", data="iVBORw0KGgo="),
                FilePart("text/csv", data="YSxi", name="data.csv"),
            ]
        ),
        Message(
            "assistant",
            (
                ThinkingPart("never sent"),
                TextPart("Let me check."),
                ToolCallPart("call_1", "weather_get", {"city": "Lima"}),
            ),
        ),
        Message("tool", (ToolResultPart("call_1", "weather_get", "sunny, 24°C"),)),
    )
    await collect(chat_model(), ModelInput(transcript, (WEATHER_TOOL,)))
    assert server.requests[0].json["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather here?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                {
                    "type": "file",
                    "file": {"file_data": "data:text/csv;base64,YSxi", "filename": "data.csv"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather_get", "arguments": '{"city": "Lima"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24°C"},
    ]


async def test_a_file_by_url_is_refused_before_the_request(
    server: LoopbackServer, chat_model: Callable[..., OpenAIModel]
) -> None:
    user = Message.user([FilePart("application/pdf", url="https://example.test/a.pdf")])
    with pytest.raises(FevexRunError) as caught:
        await collect(chat_model(), ModelInput((user,)))
    assert caught.value.code == "PROVIDER_INPUT_UNSUPPORTED"
    assert server.requests == []


async def test_a_refusal_is_model_refusal(
    server: LoopbackServer, chat_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ChatChunks().refusal("I can't", " do that.").finish().scripted())
    with pytest.raises(FevexRunError) as caught:
        await collect(chat_model(), ask(output_schema=ANSWER_SCHEMA))
    assert caught.value.code == "MODEL_REFUSAL"
    assert "I can't do that." in caught.value.message


@pytest.mark.parametrize(
    ("reason", "code"), [("length", "MODEL_OUTPUT_TRUNCATED"), ("content_filter", "MODEL_REFUSAL")]
)
async def test_a_cut_short_completion_is_an_error(
    server: LoopbackServer, chat_model: Callable[..., OpenAIModel], reason: str, code: str
) -> None:
    server.respond(ChatChunks().content("Half").finish(reason).scripted())
    with pytest.raises(FevexRunError) as caught:
        await collect(chat_model(), ask())
    assert caught.value.code == code


async def test_an_error_object_in_the_stream_is_mapped(
    server: LoopbackServer, chat_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ChatChunks().content("Par", "tial").error("The model crashed.").scripted())
    deltas: list[str] = []
    with pytest.raises(FevexRunError) as caught:
        async for event in chat_model().stream(ask()):
            if isinstance(event, BlockStarted | BlockStopped):
                continue  # the text block's bounds
            assert isinstance(event, OutputDelta)
            deltas.append(event.delta)
    assert deltas == ["Par", "tial"]
    assert caught.value.code == "PROVIDER_ERROR"
    assert "The model crashed." in caught.value.message
    assert caught.value.recoverable


async def test_a_stream_without_a_finish_reason_is_an_error(
    server: LoopbackServer, chat_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ChatChunks().content("Hel").scripted())
    with pytest.raises(FevexRunError) as caught:
        await collect(chat_model(), ask())
    assert caught.value.code == "PROVIDER_ERROR"


async def test_the_gateway_passes_the_shared_contract_check(
    server: LoopbackServer, chat_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(
        ChatChunks().content("Hello!").finish().usage().scripted(),
        ChatChunks()
        .tool_call(0, "call_1", "accounts_get", '{"account_id"', ": 42}")
        .finish("tool_calls")
        .usage()
        .scripted(),
    )
    first, second = await check_model_gateway(chat_model(), default_contract_inputs())
    assert first.output == "Hello!"
    assert second.tool_calls[0].input == {"account_id": 42}


@pytest.mark.parametrize(
    "fields", [("reasoning_content",), ("reasoning",), ("reasoning", "reasoning_content")]
)
async def test_reasoning_is_read_from_either_field_and_counted_once(
    server: LoopbackServer, chat_model: Callable[..., OpenAIModel], fields: tuple[str, ...]
) -> None:
    # DeepSeek and llama.cpp say reasoning_content, vLLM and OpenRouter say reasoning, and
    # a server that keeps both names sends the same text in both.
    server.respond(
        ChatChunks()
        .reasoning("Greet ", "briefly.", fields=fields)
        .content("Hello.")
        .finish()
        .scripted()
    )
    deltas, result = await collect(chat_model(), ask())
    assert deltas == ["Hello."]
    assert result.output == "Hello."
    assert result.reasoning == "Greet briefly."


async def test_a_profile_names_the_reasoning_fields_it_reads(
    server: LoopbackServer, chat_model: Callable[..., OpenAIModel]
) -> None:
    base = chat_model()
    only_reasoning = OpenAIModel(
        base.model_name,
        base.settings,
        api="chat",
        profile=ProviderProfile(reasoning_fields=("reasoning",)),
    )
    try:
        server.respond(
            ChatChunks()
            .reasoning("Ignored.", fields=("reasoning_content",))
            .reasoning("Read.", fields=("reasoning",))
            .content("Hi.")
            .finish()
            .scripted()
        )
        _, result = await collect(only_reasoning, ask())
    finally:
        await only_reasoning.aclose()
    assert result.reasoning == "Read."
    assert result.output == "Hi."


def test_reasoning_fields_must_be_a_tuple_of_names() -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        ProviderProfile(reasoning_fields="reasoning")  # type: ignore[arg-type]
    assert caught.value.code == "INVALID_MODEL"
