"""A tool result's images and files on DeepSeek, whose API takes text only: the tool
message says, for each part, what was not sent, and the run goes on."""

from typing import Any

import pytest

from fevex.messages import FilePart, ImagePart, Message, ToolCallPart, ToolResultPart
from fevex.models import ModelInput

pytestmark = pytest.mark.anyio

PNG = "iVBORw0KGgoAAAANSUhEUg=="


async def test_tool_media_become_notes_in_the_tool_message(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.stream(
        wire.chunk(content="I cannot see it."),
        wire.chunk(finish_reason="stop", usage=wire.usage()),
    )
    result = ToolResultPart(
        "call_1",
        "page_shot",
        "the home page",
        content=(
            ImagePart("image/png", data=PNG),
            FilePart("audio/mpeg", data="SUQz", name="clip.mp3"),
        ),
    )
    messages = (
        Message.user("Look."),
        Message.assistant([ToolCallPart("call_1", "page_shot", {})]),
        Message("tool", (result,)),
    )

    await drain(deepseek(), ModelInput(messages))

    sent = deepseek_server.bodies[0]["messages"]
    assert [message["role"] for message in sent] == ["user", "assistant", "tool"]
    why = "not sent: DeepSeek's Chat Completions API takes text only]"
    assert sent[2]["content"] == (
        "the home page\n"
        f"[the tool also returned image (image/png), {why}\n"
        f"[the tool also returned audio (audio/mpeg), {why}"
    )
    assert PNG not in str(sent)
