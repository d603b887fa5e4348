"""The Chat Completions API (``POST /chat/completions``): the request a model step sends
and the chunks it reads back.

This is also the API of most OpenAI-compatible servers (vLLM, llama.cpp, Ollama,
DeepSeek, ...), so the reader is forgiving where those differ from OpenAI: a tool call
without an id gets one, a call without argument text means ``{}``, ``reasoning_content``
or ``reasoning`` deltas (the profile's ``reasoning_fields``) become the step's reasoning,
and ``prompt_cache_hit_tokens`` counts as cached input. What a provider changes beyond
that is its :class:`ProviderProfile`.
"""

from __future__ import annotations

import dataclasses
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
from fevex.models import ModelInput, ModelResult, ModelStreamEvent, Usage
from fevex_openai.error_mapping import invalid_request, provider_error
from fevex_openai.message_parts import media_url, unsupported_part
from fevex_openai.profile import OPENAI_PROFILE, ProviderProfile
from fevex_openai.request_options import CHAT_OWNED_FIELDS, passthrough_options
from fevex_openai.step_result import ContentBlocks, StepEnd, ToolCallDraft, finish_step
from fevex_openai.strict_schema import check_strict_schema
from fevex_openai.tool_media import chat_media_message, chat_tool_text

__all__ = ["ChatStep", "build_chat_request", "chat_messages"]

OUTPUT_FORMAT_NAME = "output"
_API = "Chat Completions"
_REASONING_STATE = "reasoning_by_tool_call"


def build_chat_request(
    model_name: str,
    model_input: ModelInput,
    *,
    strict: bool,
    profile: ProviderProfile = OPENAI_PROFILE,
) -> dict[str, Any]:
    """Keyword arguments for ``client.chat.completions.create`` (without ``stream``)."""
    extra = passthrough_options(model_input.options, CHAT_OWNED_FIELDS, profile.name)
    output_schema = model_input.output_schema
    json_mode = output_schema is not None and profile.structured_output == "json_object"
    if json_mode and strict:
        raise invalid_request(
            profile.name,
            "PROVIDER_SCHEMA_UNSUPPORTED",
            f"{profile.label} has no strict structured output for final answers. Create the "
            'model with schema_policy="best-effort" to use its JSON output mode, with the '
            "answer validated locally by fevex.",
            schema="the output schema",
        )
    if strict:
        for tool in model_input.tools:
            check_strict_schema(tool.input_schema, profile, tool=tool.name)
        if output_schema is not None:
            check_strict_schema(output_schema, profile)
    if json_mode and output_schema is not None and output_schema.get("type", "object") != "object":
        raise invalid_request(
            profile.name,
            "PROVIDER_SCHEMA_UNSUPPORTED",
            f"{profile.label}'s JSON output mode answers with a JSON object, but the output "
            f"schema has type {output_schema.get('type')!r}. Wrap the answer in an object "
            "(a model with one field).",
            schema="the output schema",
            keyword="type",
            path="#",
        )
    messages = chat_messages(
        model_input.messages, profile, _reasoning_by_call(model_input.provider_state)
    )
    if json_mode and output_schema is not None:
        messages = _with_json_instruction(messages, output_schema)
    request: dict[str, Any] = {
        "model": model_name,
        "messages": messages,
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
        if profile.parallel_tool_calls:
            # fevex runs a step's tool calls one after another.
            request["parallel_tool_calls"] = False
    if json_mode:
        request["response_format"] = {"type": "json_object"}
    elif output_schema is not None:
        request["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": OUTPUT_FORMAT_NAME,
                "schema": output_schema,
                "strict": strict,
            },
        }
    if model_input.max_output_tokens is not None:
        request[profile.output_token_field] = model_input.max_output_tokens
    if extra:
        request["extra_body"] = extra
    return request


def uses_strict_tools(request: Mapping[str, Any]) -> bool:
    """Whether the request offers tools with ``strict: true``."""
    return any(tool["function"].get("strict") for tool in request.get("tools", ()))


def chat_messages(
    messages: Sequence[Message],
    profile: ProviderProfile = OPENAI_PROFILE,
    reasoning_by_call: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The conversation as Chat Completions messages.

    With ``profile.reasoning_passback``, the assistant messages of every user turn in
    which the model called tools carry their thinking as ``reasoning_content``; where a
    caller dropped the thinking part, ``reasoning_by_call`` (from ``provider_state``)
    stands in for it.
    """
    tool_turns = _turns_with_tool_calls(messages) if profile.reasoning_passback else set()
    converted: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if message.role == "system":
            for part in message.content:
                if not isinstance(part, TextPart):
                    raise unsupported_part(profile, "system", part.type, _API)
            converted.append({"role": "system", "content": message.text})
        elif message.role == "user":
            converted.append({"role": "user", "content": _user_content(message, profile)})
        elif message.role == "assistant":
            assistant = _assistant_message(message, profile)
            if index in tool_turns:
                reasoning = _reasoning(message, reasoning_by_call or {})
                if reasoning:
                    assistant["reasoning_content"] = reasoning
            converted.append(assistant)
        else:
            results: list[ToolResultPart] = []
            for part in message.content:
                if not isinstance(part, ToolResultPart):
                    raise unsupported_part(profile, "tool", part.type, _API)
                results.append(part)
                text = chat_tool_text(part, profile)
                converted.append({"role": "tool", "tool_call_id": part.id, "content": text})
            # After every tool message of the step: the API wants them next to the calls.
            media = chat_media_message(results, profile)
            if media is not None:
                converted.append(media)
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


def _reasoning(message: Message, reasoning_by_call: Mapping[str, str]) -> str:
    reasoning = "".join(
        part.reasoning for part in message.content if isinstance(part, ThinkingPart)
    )
    if reasoning:
        return reasoning
    return next(
        (reasoning_by_call[c.id] for c in message.tool_calls if c.id in reasoning_by_call), ""
    )


def _reasoning_by_call(provider_state: Any) -> dict[str, str]:
    if isinstance(provider_state, Mapping):
        found = provider_state.get(_REASONING_STATE)
        if isinstance(found, Mapping):
            return {str(k): v for k, v in found.items() if isinstance(v, str)}
    return {}


def _with_json_instruction(
    messages: list[dict[str, Any]], output_schema: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Ask for the answer as JSON in the system prompt.

    JSON output mode only guarantees syntactically valid JSON, and providers such as
    DeepSeek require the word "json" in the prompt to enable it; the schema itself is
    validated locally.
    """
    instruction = (
        "Give your final answer in json: a single JSON object, with no text around it, "
        "that conforms to this JSON Schema:\n"
        + json.dumps(output_schema, ensure_ascii=False, separators=(",", ":"))
    )
    if messages and messages[0]["role"] == "system":
        first = messages[0]
        content = first["content"]
        merged = f"{content}\n\n{instruction}" if content else instruction
        return [{**first, "content": merged}, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


def _user_content(message: Message, profile: ProviderProfile) -> str | list[dict[str, Any]]:
    if all(isinstance(part, TextPart) for part in message.content):
        # Plain text is what every OpenAI-compatible server understands.
        return message.text
    if not profile.media_parts:
        kinds = sorted({part.type for part in message.content if not isinstance(part, TextPart)})
        raise invalid_request(
            profile.name,
            "PROVIDER_INPUT_UNSUPPORTED",
            f"{profile.label}'s {_API} API takes text only, and a user message carries "
            f"{' and '.join(kinds)} parts; send their content as text instead.",
            role="user",
            part=kinds[0],
            api=_API,
        )
    content: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            content.append({"type": "image_url", "image_url": {"url": media_url(part, profile)}})
        elif isinstance(part, FilePart):
            if part.data is None:
                raise invalid_request(
                    profile.name,
                    "PROVIDER_INPUT_UNSUPPORTED",
                    "Chat Completions takes files as data, not as URLs; send the file's "
                    "base64 data or use api='responses'.",
                    role="user",
                    part="file",
                    api=_API,
                )
            content.append(
                {
                    "type": "file",
                    "file": {
                        "file_data": media_url(part, profile),
                        "filename": part.name or "file",
                    },
                }
            )
        else:
            raise unsupported_part(profile, "user", part.type, _API)
    return content


def _assistant_message(message: Message, profile: ProviderProfile) -> dict[str, Any]:
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
            # Thinking goes back only as reasoning_content, where the profile asks for it.
            raise unsupported_part(profile, "assistant", part.type, _API)
    converted: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    if calls:
        converted["tool_calls"] = calls
    elif converted["content"] is None:
        converted["content"] = ""
    return converted


# The key of the answer's text block: tool calls are keyed by their index, from 0.
_TEXT_BLOCK = -1


class ChatStep:
    """Reads one streamed completion: ``accept`` each chunk, then ``finish``."""

    def __init__(self, model_input: ModelInput, profile: ProviderProfile = OPENAI_PROFILE) -> None:
        self.model_input = model_input
        self.profile = profile
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.drafts: dict[int, ToolCallDraft] = {}
        self.end = StepEnd()
        self.usage = Usage()
        self.finish_reason: str | None = None
        # Text and tool calls as stream-layer blocks (see drain).
        self.blocks = ContentBlocks()

    def drain(self) -> list[ModelStreamEvent]:
        """The block and tool-input events of the chunks accepted since the last drain."""
        return self.blocks.drain()

    def accept(self, chunk: Any) -> str | None:
        """Take one SDK chunk; returns visible output text to stream, if any (and keeps
        its tool-call events for ``drain``)."""
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            # Usage is cumulative for the request: the last report is the whole step's.
            self.usage = _usage(usage)
        text: str | None = None
        for choice in chunk.choices or ():
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta is not None:
                text = self._delta(delta)
            if choice.finish_reason is not None:
                self.finish_reason = str(choice.finish_reason)
                self.blocks.stop_all()
        return text

    def _delta(self, delta: Any) -> str | None:
        for field in self.profile.reasoning_fields:
            # Fields the SDK does not model arrive as extra attributes of the delta.
            reasoning = getattr(delta, field, None)
            if isinstance(reasoning, str) and reasoning:
                self.reasoning.append(reasoning)
                break
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
            arguments = function.arguments if function is not None else None
            self.blocks.fragment(fragment.index, draft.call_id, draft.name, arguments or "")
        if delta.content:
            self.text.append(delta.content)
            self.blocks.text(_TEXT_BLOCK)
            return str(delta.content)
        return None

    def finish(self) -> ModelResult:
        profile = self.profile
        if self.finish_reason is None:
            raise provider_error(
                profile.name,
                "PROVIDER_ERROR",
                f"The {profile.label} stream ended without a finish reason.",
                recoverable=True,
            )
        if self.finish_reason == "insufficient_system_resource":
            raise provider_error(
                profile.name,
                "PROVIDER_ERROR",
                f"{profile.label} interrupted the answer for lack of inference capacity; "
                "retry later.",
                recoverable=True,
                finish_reason=self.finish_reason,
            )
        if self.finish_reason in ("length", "content_filter"):
            self.end.incomplete_reason = self.finish_reason
        result = finish_step(
            profile,
            text="".join(self.text),
            drafts=[self.drafts[index] for index in sorted(self.drafts)],
            end=self.end,
            usage=self.usage,
            output_schema=self.model_input.output_schema,
            max_output_tokens=self.model_input.max_output_tokens,
            reasoning="".join(self.reasoning),
            ended_because=self.finish_reason,
        )
        if not (profile.reasoning_passback and result.tool_calls and result.reasoning):
            return result
        return dataclasses.replace(
            result,
            provider_state=_next_state(
                self.model_input.provider_state, result.tool_calls, result.reasoning
            ),
        )


def _usage(usage: Any) -> Usage:
    prompt_details = getattr(usage, "prompt_tokens_details", None)
    completion_details = getattr(usage, "completion_tokens_details", None)
    cached = _int(getattr(usage, "prompt_cache_hit_tokens", None))
    if cached is None:
        cached = _int(getattr(prompt_details, "cached_tokens", None))
    return Usage(
        input_tokens=_int(getattr(usage, "prompt_tokens", None)),
        output_tokens=_int(getattr(usage, "completion_tokens", None)),
        total_tokens=_int(getattr(usage, "total_tokens", None)),
        cached_input_tokens=cached,
        reasoning_tokens=_int(getattr(completion_details, "reasoning_tokens", None)),
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _next_state(previous: Any, tool_calls: Sequence[Any], reasoning: str) -> dict[str, Any]:
    """Provider state: the reasoning behind each tool call of the run so far.

    The runtime keeps reasoning in the conversation as a thinking part; this copy lets a
    direct gateway caller that passes provider state along, but drops thinking parts,
    still satisfy the rule that tool-call turns carry their reasoning back.
    """
    known = _reasoning_by_call(previous)
    known.update({call.id: reasoning for call in tool_calls})
    return {_REASONING_STATE: known}
