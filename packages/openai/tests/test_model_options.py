"""Model options pass through, except the request fields fevex owns."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from openai_loopback import ChatChunks, LoopbackServer, ResponseEvents

from fevex.errors import FevexRunError
from fevex.messages import Message
from fevex.models import ModelInput
from fevex_openai import OpenAIModel

pytestmark = pytest.mark.anyio


async def run(model: OpenAIModel, options: dict[str, Any], **fields: Any) -> None:
    async for _ in model.stream(ModelInput((Message.user("Hi"),), options=options, **fields)):
        pass


async def test_compatible_options_reach_the_responses_body(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ResponseEvents().message("ok").completed().scripted())
    options = {
        "temperature": 0.2,
        "top_p": 0.9,
        "metadata": {"team": "support"},
        "reasoning": {"effort": "low", "summary": "auto"},
        "text": {"verbosity": "low"},
        "service_tier": "flex",
    }
    await run(make_model(), options)
    request = server.requests[0].json
    for name, value in options.items():
        assert request[name] == value


async def test_text_verbosity_merges_with_the_output_format(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ResponseEvents().message("{}").completed().scripted())
    schema = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
    await run(make_model(), {"text": {"verbosity": "high"}}, output_schema=schema)
    text = server.requests[0].json["text"]
    assert text["verbosity"] == "high"
    assert text["format"]["type"] == "json_schema"


async def test_store_false_asks_for_encrypted_reasoning(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ResponseEvents().message("ok").completed().scripted())
    await run(make_model(), {"store": False, "include": ["message.output_text.logprobs"]})
    request = server.requests[0].json
    assert request["store"] is False
    assert request["include"] == ["message.output_text.logprobs", "reasoning.encrypted_content"]


async def test_compatible_options_reach_the_chat_body(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ChatChunks().content("ok").finish().scripted())
    # Servers have options of their own, such as vLLM's top_k.
    options = {"temperature": 0, "seed": 7, "reasoning_effort": "minimal", "top_k": 20}
    await run(make_model(api="chat"), options)
    request = server.requests[0].json
    for name, value in options.items():
        assert request[name] == value


@pytest.mark.parametrize(
    ("api", "option"),
    [
        ("responses", "model"),
        ("responses", "input"),
        ("responses", "instructions"),
        ("responses", "tools"),
        ("responses", "tool_choice"),
        ("responses", "parallel_tool_calls"),
        ("responses", "max_output_tokens"),
        ("responses", "previous_response_id"),
        ("responses", "stream"),
        ("chat", "messages"),
        ("chat", "response_format"),
        ("chat", "max_tokens"),
        ("chat", "max_completion_tokens"),
        ("chat", "parallel_tool_calls"),
        ("chat", "stream_options"),
        ("chat", "n"),
    ],
)
async def test_options_naming_owned_fields_are_refused(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel], api: str, option: str
) -> None:
    with pytest.raises(FevexRunError) as caught:
        await run(make_model(api=api), {option: "x"})
    assert caught.value.code == "PROVIDER_OPTION_NOT_ALLOWED"
    assert caught.value.details["option"] == option
    assert repr(option) in caught.value.message
    assert server.requests == []


async def test_the_output_format_cannot_be_replaced_through_text(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    with pytest.raises(FevexRunError) as caught:
        await run(make_model(), {"text": {"format": {"type": "json_object"}}})
    assert caught.value.code == "PROVIDER_OPTION_NOT_ALLOWED"
    assert caught.value.details["option"] == "text.format"
    assert server.requests == []
