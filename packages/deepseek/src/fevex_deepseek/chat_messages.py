"""fevex messages as DeepSeek Chat Completions messages.

Thinking mode has one wire rule that shapes this module: within a user turn in which the
model called tools, every assistant message must carry its ``reasoning_content`` back to
the provider on each later request, or DeepSeek rejects the request. Outside such turns
reasoning is left out, as the provider ignores it there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from fevex.messages import (
    FilePart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from fevex_deepseek.errors import PROVIDER_CONTENT_UNSUPPORTED, provider_error

__all__ = ["chat_messages"]

ChatMessage = dict[str, Any]


def chat_messages(
    messages: Sequence[Message], reasoning_by_call: Mapping[str, str] | None = None
) -> list[ChatMessage]:
    """The request's ``messages``.

    ``reasoning_by_call`` (tool call id to reasoning text, from the adapter's provider
    state) stands in for a thinking part that a caller dropped from the conversation.
    """
    tool_turns = _turns_with_tool_calls(messages)
    converted: list[ChatMessage] = []
    for index, message in enumerate(messages):
        if message.role == "system":
            converted.append({"role": "system", "content": _text(message)})
        elif message.role == "user":
            converted.append({"role": "user", "content": _text(message)})
        elif message.role == "assistant":
            converted.append(_assistant(message, index in tool_turns, reasoning_by_call or {}))
        else:
            converted.extend(_tool_results(message))
    return converted


def _turns_with_tool_calls(messages: Sequence[Message]) -> set[int]:
    """Indexes of the assistant messages that belong to a user turn with tool calls."""
    selected: set[int] = set()
    turn: list[int] = []
    calls_in_turn = False
    for index, message in enumerate(messages):
        if message.role == "user":
            if calls_in_turn:
                selected.update(turn)
            turn, calls_in_turn = [], False
        elif message.role == "assistant":
            turn.append(index)
            calls_in_turn = calls_in_turn or bool(message.tool_calls)
    if calls_in_turn:
        selected.update(turn)
    return selected


def _text(message: Message) -> str:
    texts: list[str] = []
    for part in message.content:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, ImagePart | FilePart):
            raise provider_error(
                PROVIDER_CONTENT_UNSUPPORTED,
                f"DeepSeek's chat API takes text only; a {message.role} message carries "
                f"{'an image' if isinstance(part, ImagePart) else 'a file'} "
                f"({part.media_type}). Send its content as text instead.",
                category="validation",
            )
    return "\n\n".join(texts)


def _assistant(
    message: Message, in_tool_turn: bool, reasoning_by_call: Mapping[str, str]
) -> ChatMessage:
    text = "".join(part.text for part in message.content if isinstance(part, TextPart))
    calls = message.tool_calls
    converted: ChatMessage = {"role": "assistant", "content": text or None}
    if calls:
        converted["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": _arguments(call)},
            }
            for call in calls
        ]
    if in_tool_turn:
        reasoning = "".join(
            part.reasoning for part in message.content if isinstance(part, ThinkingPart)
        )
        if not reasoning:
            reasoning = next(
                (reasoning_by_call[call.id] for call in calls if call.id in reasoning_by_call), ""
            )
        if reasoning:
            converted["reasoning_content"] = reasoning
    return converted


def _arguments(call: ToolCallPart) -> str:
    # Arguments that never parsed as JSON were kept as the raw string: send them back as
    # the model wrote them.
    if isinstance(call.input, str):
        return call.input
    return json.dumps(call.input, ensure_ascii=False, separators=(",", ":"))


def _tool_results(message: Message) -> list[ChatMessage]:
    results = []
    for part in message.content:
        if not isinstance(part, ToolResultPart):
            continue
        output = part.output
        content = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        if part.is_error:
            content = f"The tool call failed: {content}"
        results.append({"role": "tool", "tool_call_id": part.id, "content": content})
    return results
