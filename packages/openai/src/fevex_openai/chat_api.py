"""The Chat Completions API (``POST /chat/completions``): the request a model step sends
and the chunks it reads back.

This is also the API of most OpenAI-compatible servers (vLLM, llama.cpp, Ollama, ...),
so the reader is forgiving where those differ from OpenAI: a tool call without an id gets
one, a call without argument text means ``{}``, and ``reasoning_content`` deltas, where a
server sends them, become the step's reasoning. Chat needs no ``provider_state``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
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
from fevex.models import ModelInput, ModelResult, Usage
from fevex_openai.error_mapping import invalid_request, provider_error
from fevex_openai.message_parts import media_url, tool_result_text, unsupported_part
from fevex_openai.request_options import CHAT_OWNED_FIELDS, passthrough_options
from fevex_openai.step_result import StepEnd, ToolCallDraft, finish_step
from fevex_openai.strict_schema import check_strict_schema

__all__ = ["ChatStep", "build_chat_request", "chat_messages"]

OUTPUT_FORMAT_NAME = "output"


def build_chat_request(model_name: str, model_input: ModelInput, *, strict: bool) -> dict[str, Any]:
    """Keyword arguments for ``client.chat.completions.create`` (without ``stream``)."""
    extra = passthrough_options(model_input.options, CHAT_OWNED_FIELDS)
    if strict:
        for tool in model_input.tools:
            check_strict_schema(tool.input_schema, f"the input schema of tool {tool.name!r}")
        if model_input.output_schema is not None:
            check_strict_schema(model_input.output_schema, "the output schema")
    request: dict[str, Any] = {
        "model": model_name,
        "messages": chat_messages(model_input.messages),
        # Usage arrives in a last chunk without choices.
        "stream_options": {"include_usage": True},
    }
    if model_input.tools:
        tools = []
        for tool in model_input.tools:
            function: dict[str, Any] = {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.input_schema,
            }
            if strict:
                function["strict"] = True
            tools.append({"type": "function", "function": function})
        request["tools"] = tools
        # fevex runs a step's tool calls one after another.
        request["parallel_tool_calls"] = False
    if model_input.output_schema is not None:
        request["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": OUTPUT_FORMAT_NAME,
                "schema": model_input.output_schema,
                "strict": strict,
            },
        }
    if model_input.max_output_tokens is not None:
        request["max_completion_tokens"] = model_input.max_output_tokens
    if extra:
        request["extra_body"] = extra
    return request


def chat_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation as Chat Completions messages."""
    converted: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            for part in message.content:
                if not isinstance(part, TextPart):
                    raise unsupported_part("system", part.type, "Chat Completions")
            converted.append({"role": "system", "content": message.text})
        elif message.role == "user":
            converted.append({"role": "user", "content": _user_content(message)})
        elif message.role == "assistant":
            converted.append(_assistant_message(message))
        else:
            for part in message.content:
                if not isinstance(part, ToolResultPart):
                    raise unsupported_part("tool", part.type, "Chat Completions")
                converted.append(
                    {"role": "tool", "tool_call_id": part.id, "content": tool_result_text(part)}
                )
    return converted


def _user_content(message: Message) -> str | list[dict[str, Any]]:
    if all(isinstance(part, TextPart) for part in message.content):
        # Plain text is what every OpenAI-compatible server understands.
        return message.text
    content: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            content.append({"type": "image_url", "image_url": {"url": media_url(part)}})
        elif isinstance(part, FilePart):
            if part.data is None:
                raise invalid_request(
                    "PROVIDER_INPUT_UNSUPPORTED",
                    "Chat Completions takes files as data, not as URLs; send the file's "
                    "base64 data or use api='responses'.",
                    role="user",
                    part="file",
                    api="Chat Completions",
                )
            content.append(
                {
                    "type": "file",
                    "file": {"file_data": media_url(part), "filename": part.name or "file"},
                }
            )
        else:
            raise unsupported_part("user", part.type, "Chat Completions")
    return content


def _assistant_message(message: Message) -> dict[str, Any]:
    calls = []
    for part in message.content:
        if isinstance(part, ToolCallPart):
            calls.append(
                {
                    "id": part.id,
                    "type": "function",
                    "function": {
                        "name": part.name,
                        "arguments": json.dumps(part.input, ensure_ascii=False),
                    },
                }
            )
        elif not isinstance(part, TextPart | ThinkingPart):
            # Thinking stays out: OpenAI does not take reasoning back in chat messages.
            raise unsupported_part("assistant", part.type, "Chat Completions")
    converted: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    if calls:
        converted["tool_calls"] = calls
    elif converted["content"] is None:
        converted["content"] = ""
    return converted


class ChatStep:
    """Reads one streamed completion: ``accept`` each chunk, then ``finish``."""

    def __init__(self, model_input: ModelInput) -> None:
        self.model_input = model_input
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.drafts: dict[int, ToolCallDraft] = {}
        self.end = StepEnd()
        self.usage = Usage()
        self.finish_reason: str | None = None

    def accept(self, chunk: Any) -> str | None:
        """Take one SDK chunk; returns visible output text to stream, if any."""
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            prompt_details = getattr(usage, "prompt_tokens_details", None)
            completion_details = getattr(usage, "completion_tokens_details", None)
            self.usage = Usage(
                input_tokens=usage.prompt_tokens,
                output_tokens=usage.completion_tokens,
                total_tokens=usage.total_tokens,
                cached_input_tokens=getattr(prompt_details, "cached_tokens", None),
                reasoning_tokens=getattr(completion_details, "reasoning_tokens", None),
            )
        text: str | None = None
        for choice in chunk.choices or ():
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta is not None:
                text = self._delta(delta)
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason
        return text

    def _delta(self, delta: Any) -> str | None:
        reasoning = getattr(delta, "reasoning_content", None)
        if isinstance(reasoning, str):
            self.reasoning.append(reasoning)
        if delta.refusal:
            self.end.refusal += delta.refusal
        for fragment in delta.tool_calls or ():
            draft = self.drafts.setdefault(fragment.index, ToolCallDraft())
            if fragment.id and not draft.call_id:
                draft.call_id = fragment.id
            function = fragment.function
            if function is not None:
                if function.name and not draft.name:
                    draft.name = function.name
                if function.arguments:
                    draft.fragments.append(function.arguments)
        if delta.content:
            self.text.append(delta.content)
            return str(delta.content)
        return None

    def finish(self) -> ModelResult:
        if self.finish_reason is None:
            raise provider_error(
                "PROVIDER_ERROR",
                "The chat completion stream ended without a finish reason.",
                recoverable=True,
            )
        if self.finish_reason in ("length", "content_filter"):
            self.end.incomplete_reason = self.finish_reason
        return finish_step(
            text="".join(self.text),
            drafts=[self.drafts[index] for index in sorted(self.drafts)],
            end=self.end,
            usage=self.usage,
            output_schema=self.model_input.output_schema,
            max_output_tokens=self.model_input.max_output_tokens,
            reasoning="".join(self.reasoning),
        )
