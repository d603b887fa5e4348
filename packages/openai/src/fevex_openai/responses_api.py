"""The Responses API (``POST /responses``): the request a model step sends and the
stream of events it reads back.

The whole conversation is sent on every step (no ``previous_response_id``), so a run that
was resumed or recovered in another process, where ``provider_state`` is gone, continues
as well as one that never stopped. Within a run, ``provider_state`` carries the output
items of the previous response (reasoning items with their encrypted content, the
assistant message and its function calls, with their ids) and they replace the matching
assistant message, because reasoning models expect their reasoning back next to the tool
calls it led to.
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
from fevex_openai.error_mapping import error_from_stream_event, invalid_request, provider_error
from fevex_openai.message_parts import media_url, unsupported_part
from fevex_openai.profile import OPENAI_PROFILE
from fevex_openai.request_options import RESPONSES_OWNED_FIELDS, passthrough_options
from fevex_openai.step_result import ContentBlocks, StepEnd, ToolCallDraft, finish_step
from fevex_openai.strict_schema import check_strict_schema
from fevex_openai.tool_media import responses_tool_output

__all__ = ["ResponsesStep", "build_responses_request", "responses_input"]

OUTPUT_FORMAT_NAME = "output"
_STATE_KIND = "openai.responses"
_PROVIDER = OPENAI_PROFILE.name


def build_responses_request(
    model_name: str, model_input: ModelInput, *, strict: bool
) -> dict[str, Any]:
    """Keyword arguments for ``client.responses.create`` (without ``stream``)."""
    extra = passthrough_options(model_input.options, RESPONSES_OWNED_FIELDS, _PROVIDER)
    text_options = extra.pop("text", None)
    if text_options is not None and (
        not isinstance(text_options, Mapping) or "format" in text_options
    ):
        raise invalid_request(
            _PROVIDER,
            "PROVIDER_OPTION_NOT_ALLOWED",
            "The model option 'text' may set 'verbosity', but its 'format' is fevex's: the "
            "agent's output_schema decides it.",
            option="text.format",
        )
    if strict:
        for tool in model_input.tools:
            check_strict_schema(tool.input_schema, OPENAI_PROFILE, tool=tool.name)
        if model_input.output_schema is not None:
            check_strict_schema(model_input.output_schema, OPENAI_PROFILE)
    request: dict[str, Any] = {
        "model": model_name,
        "input": responses_input(model_input.messages, model_input.provider_state),
    }
    if model_input.tools:
        request["tools"] = [
            {
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.input_schema,
                "strict": strict,
            }
            for tool in model_input.tools
        ]
        # fevex runs a step's tool calls one after another.
        request["parallel_tool_calls"] = False
    text: dict[str, Any] = dict(text_options or {})
    if model_input.output_schema is not None:
        text["format"] = {
            "type": "json_schema",
            "name": OUTPUT_FORMAT_NAME,
            "schema": model_input.output_schema,
            "strict": strict,
        }
    if text:
        request["text"] = text
    if model_input.max_output_tokens is not None:
        request["max_output_tokens"] = model_input.max_output_tokens
    if extra.get("store") is False:
        # Without stored responses, reasoning can only come back as encrypted content.
        include = list(extra.get("include") or ())
        if "reasoning.encrypted_content" not in include:
            include.append("reasoning.encrypted_content")
        extra["include"] = include
    if extra:
        request["extra_body"] = extra
    return request


def responses_input(messages: Sequence[Message], provider_state: Any) -> list[dict[str, Any]]:
    """The conversation as Responses input items."""
    replay = _replay(provider_state)
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            items.append({"role": "system", "content": _plain_text(message, "system")})
        elif message.role == "user":
            items.append({"role": "user", "content": _user_content(message)})
        elif message.role == "assistant":
            call_ids = tuple(call.id for call in message.tool_calls)
            if replay is not None and call_ids and call_ids == replay[0]:
                items.extend(replay[1])
            else:
                items.extend(_assistant_items(message))
        else:
            for part in message.content:
                if not isinstance(part, ToolResultPart):
                    raise unsupported_part(OPENAI_PROFILE, "tool", part.type, "Responses")
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": part.id,
                        "output": responses_tool_output(part, OPENAI_PROFILE),
                    }
                )
    return items


def _replay(provider_state: Any) -> tuple[tuple[str, ...], list[dict[str, Any]]] | None:
    if not isinstance(provider_state, Mapping) or provider_state.get("kind") != _STATE_KIND:
        return None
    return tuple(provider_state["call_ids"]), list(provider_state["output"])


def _plain_text(message: Message, role: str) -> str:
    for part in message.content:
        if not isinstance(part, TextPart):
            raise unsupported_part(OPENAI_PROFILE, role, part.type, "Responses")
    return message.text


def _user_content(message: Message) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            content.append({"type": "input_text", "text": part.text})
        elif isinstance(part, ImagePart):
            content.append(
                {
                    "type": "input_image",
                    "image_url": media_url(part, OPENAI_PROFILE),
                    "detail": "auto",
                }
            )
        elif isinstance(part, FilePart):
            file: dict[str, Any] = {"type": "input_file"}
            if part.url and part.data is None:
                file["file_url"] = part.url
            else:
                file["file_data"] = media_url(part, OPENAI_PROFILE)
                file["filename"] = part.name or "file"
            content.append(file)
        else:
            raise unsupported_part(OPENAI_PROFILE, "user", part.type, "Responses")
    return content


def _assistant_items(message: Message) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if message.text:
        items.append({"role": "assistant", "content": message.text})
    for part in message.content:
        if isinstance(part, ToolCallPart):
            items.append(
                {
                    "type": "function_call",
                    "call_id": part.id,
                    "name": part.name,
                    "arguments": json.dumps(part.input, ensure_ascii=False),
                }
            )
        elif not isinstance(part, TextPart | ThinkingPart):
            # Thinking stays out: OpenAI takes reasoning back only as its own items.
            raise unsupported_part(OPENAI_PROFILE, "assistant", part.type, "Responses")
    return items


class ResponsesStep:
    """Reads one streamed response: ``accept`` each event, then ``finish``."""

    def __init__(self, model_input: ModelInput) -> None:
        self.model_input = model_input
        self.text: list[str] = []
        self.drafts: dict[int, ToolCallDraft] = {}
        self.output_items: list[dict[str, Any]] = []
        self.reasoning: list[str] = []
        self.end = StepEnd()
        self.usage = Usage()
        self.completed = False
        # Text and tool calls as stream-layer blocks (see drain).
        self.blocks = ContentBlocks()
        self.status: str | None = None

    def drain(self) -> list[ModelStreamEvent]:
        """The block and tool-input events of the events accepted since the last drain."""
        return self.blocks.drain()

    def accept(self, event: Any) -> str | None:
        """Take one SDK event; returns visible output text to stream, if any (and keeps
        its tool-call events for ``drain``)."""
        kind = getattr(event, "type", None)
        if kind == "response.output_text.delta":
            self.text.append(event.delta)
            self.blocks.text(event.output_index)
            return str(event.delta)
        if kind == "response.refusal.delta":
            self.end.refusal += event.delta
        elif kind == "response.output_item.added":
            item = event.item
            if item.type == "function_call":
                self.drafts[event.output_index] = ToolCallDraft(
                    item.call_id, item.name, [item.arguments or ""]
                )
                self.blocks.fragment(
                    event.output_index, item.call_id, item.name, item.arguments or ""
                )
        elif kind == "response.function_call_arguments.delta":
            self._draft(event.output_index).fragments.append(event.delta)
            draft = self._draft(event.output_index)
            self.blocks.fragment(event.output_index, draft.call_id, draft.name, event.delta)
        elif kind == "response.function_call_arguments.done":
            self._draft(event.output_index).final_arguments = event.arguments
        elif kind == "response.output_item.done":
            self._item_done(event.output_index, event.item)
        elif kind in ("response.completed", "response.incomplete"):
            self._response_done(event.response)
        elif kind == "response.failed":
            error = getattr(event.response, "error", None)
            raise error_from_stream_event(
                OPENAI_PROFILE,
                getattr(error, "code", None),
                getattr(error, "message", None) or "the response failed.",
            )
        elif kind == "error":
            raise error_from_stream_event(OPENAI_PROFILE, event.code, event.message)
        return None

    def _draft(self, output_index: int) -> ToolCallDraft:
        return self.drafts.setdefault(output_index, ToolCallDraft())

    def _item_done(self, index: int, item: Any) -> None:
        self.output_items.append(item.to_dict(mode="json", exclude_none=True))
        self.blocks.stop(index)
        if item.type == "function_call":
            draft = self._draft(index)
            draft.call_id = item.call_id
            draft.name = item.name
            draft.final_arguments = item.arguments
        elif item.type == "reasoning":
            texts = [part.text for part in item.summary or ()]
            texts = texts or [part.text for part in getattr(item, "content", None) or ()]
            self.reasoning.extend(texts)

    def _response_done(self, response: Any) -> None:
        self.completed = True
        self.status = getattr(response, "status", None)
        self.blocks.stop_all()  # every item has ended with the response
        usage = response.usage
        if usage is not None:
            input_details = getattr(usage, "input_tokens_details", None)
            output_details = getattr(usage, "output_tokens_details", None)
            self.usage = Usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                total_tokens=usage.total_tokens,
                cached_input_tokens=getattr(input_details, "cached_tokens", None),
                reasoning_tokens=getattr(output_details, "reasoning_tokens", None),
            )
        details = getattr(response, "incomplete_details", None)
        if getattr(response, "status", None) == "incomplete" or details is not None:
            self.end.incomplete_reason = getattr(details, "reason", None) or "incomplete"

    def finish(self) -> ModelResult:
        if not self.completed:
            raise provider_error(
                _PROVIDER,
                "PROVIDER_ERROR",
                "The OpenAI stream ended before the response was complete.",
                recoverable=True,
            )
        result = finish_step(
            OPENAI_PROFILE,
            text="".join(self.text),
            drafts=[self.drafts[index] for index in sorted(self.drafts)],
            end=self.end,
            usage=self.usage,
            output_schema=self.model_input.output_schema,
            max_output_tokens=self.model_input.max_output_tokens,
            reasoning="\n\n".join(self.reasoning),
            ended_because=self.end.incomplete_reason or self.status,
        )
        if not result.tool_calls:
            return result
        state = {
            "kind": _STATE_KIND,
            "call_ids": [call.id for call in result.tool_calls],
            "output": self.output_items,
        }
        return dataclasses.replace(result, provider_state=state)
