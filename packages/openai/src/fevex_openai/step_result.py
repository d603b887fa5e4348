"""What both APIs share at the end of a model step: tool calls from their argument
fragments, the final output, and the ways a step can end without a usable answer."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from fevex.models import ModelResult, ToolCall, Usage
from fevex_openai.error_mapping import provider_error

__all__ = ["StepEnd", "ToolCallDraft", "finish_step"]


@dataclass
class ToolCallDraft:
    """A tool call while its arguments still arrive in fragments."""

    call_id: str | None = None
    name: str | None = None
    fragments: list[str] = field(default_factory=list)
    # The complete argument text, when the provider repeats it at the end.
    final_arguments: str | None = None

    @property
    def arguments(self) -> str:
        if self.final_arguments is not None:
            return self.final_arguments
        return "".join(self.fragments)


@dataclass
class StepEnd:
    """How the provider ended the step, beyond text and tool calls."""

    refusal: str = ""
    # Why the output was cut short: "max_output_tokens" / "length", or a content filter.
    incomplete_reason: str | None = None


def finish_step(
    *,
    text: str,
    drafts: list[ToolCallDraft],
    end: StepEnd,
    usage: Usage,
    output_schema: dict[str, Any] | None,
    max_output_tokens: int | None,
    reasoning: str | None = None,
) -> ModelResult:
    if end.refusal:
        raise provider_error(
            "MODEL_REFUSAL", f"The model refused: {end.refusal}", refusal=end.refusal
        )
    reason = end.incomplete_reason
    if reason == "content_filter":
        raise provider_error(
            "MODEL_REFUSAL",
            "OpenAI's content filter stopped the model's output.",
            reason=reason,
        )
    if reason is not None:
        if reason not in ("max_output_tokens", "length"):
            cause = f"the provider stopped it ({reason})"
        elif max_output_tokens is not None:
            cause = f"the output-token cap of {max_output_tokens} (the run's remaining budget)"
        else:
            cause = "the model's output limit"
        raise provider_error(
            "MODEL_OUTPUT_TRUNCATED",
            f"The model's output was cut short by {cause}.",
            reason=reason,
            max_output_tokens=max_output_tokens,
        )
    calls = [_tool_call(draft) for draft in drafts]
    output: Any
    if calls:
        # Text beside tool calls is commentary; the final answer comes in a later step.
        output = text or None
    elif output_schema is not None:
        try:
            output = json.loads(text)
        except ValueError as error:
            raise provider_error(
                "MODEL_INVALID_JSON",
                f"The model's structured output is not valid JSON ({error}).",
                recoverable=True,
                where="output",
            ) from None
    else:
        output = text
    return ModelResult(
        output=output,
        tool_calls=calls,
        usage=usage,
        reasoning=reasoning or None,
    )


def _tool_call(draft: ToolCallDraft) -> ToolCall:
    if not draft.name:
        raise provider_error(
            "PROVIDER_ERROR", "OpenAI sent a tool call without a tool name.", recoverable=True
        )
    arguments = draft.arguments
    try:
        # Some OpenAI-compatible servers send no text at all for a call without arguments.
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError as error:
        raise provider_error(
            "MODEL_INVALID_JSON",
            f"The arguments of the model's call to tool {draft.name!r} are not valid JSON "
            f"({error}).",
            recoverable=True,
            where="tool_call",
            tool_name=draft.name,
            tool_call_id=draft.call_id,
        ) from None
    # Some OpenAI-compatible servers leave ids out; the runtime needs unique ones.
    call_id = draft.call_id or f"call_{uuid.uuid4().hex}"
    return ToolCall(id=call_id, name=draft.name, input=value)
