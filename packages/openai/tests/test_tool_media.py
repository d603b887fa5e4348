"""The images and files a tool returned (``ToolResultPart.content``) on the wire of each
API, against the loopback server through the real SDK: Responses sends them in the
``function_call_output``; Chat Completions in one user message after the step's tool
messages; a text-only profile sends a note instead. What an API cannot take is a note."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from openai_loopback import ChatChunks, LoopbackServer, ResponseEvents

from fevex.messages import FilePart, ImagePart, Message, ToolCallPart, ToolResultPart
from fevex.models import ModelInput, ToolSpec
from fevex_openai import OpenAIModel, ProviderProfile

pytestmark = pytest.mark.anyio

SHOT_TOOL = ToolSpec(
    "page_shot",
    "Screenshot a page.",
    {
        "type": "object",
        "properties": {"page": {"type": "string"}},
        "required": ["page"],
        "additionalProperties": False,
    },
)
PNG = "iVBORw0KGgoAAAANSUhEUg=="
WAV = "UklGRiQAAABXQVZFZm10IA=="
PDF = "JVBERi0xLjQK"
OGG = "T2dnUwACAAAAAAAAAAA="


def conversation(*results: ToolResultPart) -> ModelInput:
    calls = tuple(ToolCallPart(result.id, result.name, {"page": "home"}) for result in results)
    return ModelInput(
        (
            Message.user("Look at the home page."),
            Message("assistant", calls),
            Message("tool", results),
        ),
        (SHOT_TOOL,),
    )


SHOT = ToolResultPart(
    "call_1",
    "page_shot",
    {"page": "home"},
    content=(
        ImagePart("image/png", data=PNG),
        FilePart("audio/wav", data=WAV, name="hello.wav"),
        FilePart("application/pdf", data=PDF, name="page.pdf"),
    ),
)
PLAIN = ToolResultPart("call_2", "page_shot", "no media")


def call_outputs(server: LoopbackServer) -> list[dict[str, Any]]:
    items = server.requests[0].json["input"]
    return [item for item in items if item.get("type") == "function_call_output"]


async def drain(model: OpenAIModel, model_input: ModelInput) -> None:
    async for _ in model.stream(model_input):
        pass


async def test_responses_sends_the_media_in_the_function_call_output(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ResponseEvents().message("A login form.").completed().scripted())
    await drain(make_model(), conversation(SHOT, PLAIN))
    outputs = [
        i for i in server.requests[0].json["input"] if i.get("type") == "function_call_output"
    ]
    assert outputs == [
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": [
                {
                    "type": "input_text",
                    "text": '{"page": "home"}\n[the tool also returned audio (audio/wav), not '
                    "sent: the Responses API takes no such input]",
                },
                {
                    "type": "input_image",
                    "image_url": f"data:image/png;base64,{PNG}",
                    "detail": "auto",
                },
                {
                    "type": "input_file",
                    "file_data": f"data:application/pdf;base64,{PDF}",
                    "filename": "page.pdf",
                },
            ],
        },
        # A result without media keeps its plain text output.
        {"type": "function_call_output", "call_id": "call_2", "output": "no media"},
    ]


async def test_responses_sends_media_only_results_without_an_empty_text(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ResponseEvents().message("A chart.").completed().scripted())
    only = ToolResultPart("call_1", "page_shot", "", content=(ImagePart("image/png", data=PNG),))
    await drain(make_model(), conversation(only))
    (output,) = [
        i for i in server.requests[0].json["input"] if i.get("type") == "function_call_output"
    ]
    assert output["output"] == [
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"}
    ]


async def test_chat_sends_the_media_in_a_user_message_after_the_tool_messages(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ChatChunks().content("A login form.").finish().scripted())
    ogg = ToolResultPart(
        "call_3", "page_shot", "a clip", content=(FilePart("audio/ogg", data=OGG),)
    )
    await drain(make_model(api="chat"), conversation(SHOT, PLAIN, ogg))
    messages = server.requests[0].json["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "tool", "user"]
    assert messages[2:] == [
        {"role": "tool", "tool_call_id": "call_1", "content": '{"page": "home"}'},
        {"role": "tool", "tool_call_id": "call_2", "content": "no media"},
        {
            "role": "tool",
            "tool_call_id": "call_3",
            "content": "a clip\n[the tool also returned audio (audio/ogg), not sent: Chat "
            "Completions takes no such input]",
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "The images and files that tool call call_1 (page_shot) returned:",
                },
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
                {
                    "type": "file",
                    "file": {
                        "file_data": f"data:application/pdf;base64,{PDF}",
                        "filename": "page.pdf",
                    },
                },
            ],
        },
    ]


async def test_a_text_only_profile_gets_a_note_for_each_part(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ChatChunks().content("Cannot see it.").finish().scripted())
    base = make_model(api="chat")
    profile = ProviderProfile(name="local", label="Local", media_parts=False)
    text_only = OpenAIModel(base.model_name, base.settings, api="chat", profile=profile)
    try:
        await drain(text_only, conversation(SHOT))
    finally:
        await text_only.aclose()
    messages: list[dict[str, Any]] = server.requests[0].json["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    why = "not sent: Local's Chat Completions API takes text only]"
    assert messages[2]["content"] == "\n".join(
        [
            '{"page": "home"}',
            f"[the tool also returned image (image/png), {why}",
            f"[the tool also returned audio (audio/wav), {why}",
            f"[the tool also returned file (application/pdf), {why}",
        ]
    )
    assert PNG not in str(messages)
