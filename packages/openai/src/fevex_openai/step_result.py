"""What both APIs share at the end of a model step: tool calls from their argument
fragments, the final output, and the ways a step can end without a usable answer.

These rules hold for every provider that uses this layer:

- a refusal, or a content filter that stops the output, is ``MODEL_REFUSAL``;
- tool-call arguments that are not valid JSON are ``MODEL_INVALID_JSON`` (recoverable),
  never passed on as text: a tool whose input is a string would otherwise run with the
  model's broken JSON as its input;
- structured output that is not valid JSON is ``MODEL_INVALID_JSON`` too, and blank
  structured output is ``PROVIDER_EMPTY_OUTPUT`` (recoverable: a retry usually succeeds).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fevex.models import (
    BlockStarted,
    BlockStopped,
    ModelResult,
    ModelStreamEvent,
    StopReason,
    ToolCall,
    ToolInputDelta,
    Usage,
)
from fevex_openai.error_mapping import provider_error

if TYPE_CHECKING:
    from fevex_openai.profile import ProviderProfile

__all__ = ["ContentBlocks", "StepEnd", "ToolCallDraft", "finish_step", "stop_reason"]


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


class ContentBlocks:
    """The stream-layer bounds of a step's content: a ``text`` block around the visible
    output and a ``tool_use`` block per tool call, with its argument fragments. Blocks are
    keyed by the API's own index (an output item, a tool call's index) and numbered from
    0 in the order they start; the text itself streams as ``OutputDelta`` events."""

    def __init__(self) -> None:
        self._blocks: dict[int, int] = {}
        self._open: list[int] = []
        self._events: list[ModelStreamEvent] = []

    def _start(self, key: int, event: BlockStarted) -> None:
        self._blocks[key] = event.index
        self._open.append(key)
        self._events.append(event)

    def text(self, key: int) -> None:
        """Visible text of block ``key`` arrived (starting the block the first time)."""
        if key not in self._blocks:
            self._start(key, BlockStarted(len(self._blocks), "text"))

    def fragment(self, key: int, call_id: str | None, name: str | None, arguments: str) -> None:
        """Arguments of call ``key`` arrived (starting its block the first time)."""
        if key not in self._blocks:
            block = BlockStarted(len(self._blocks), "tool_use", call_id or None, name or None)
            self._start(key, block)
        if arguments and key in self._open:
            self._events.append(ToolInputDelta(self._blocks[key], arguments))

    def stop(self, key: int) -> None:
        if key in self._open:
            self._open.remove(key)
            self._events.append(BlockStopped(self._blocks[key]))

    def stop_all(self) -> None:
        for key in list(self._open):
            self.stop(key)

    def drain(self) -> list[ModelStreamEvent]:
        """The events since the last drain, in order."""
        events, self._events = self._events, []
        return events


# The APIs' own reasons a step ended, as fevex names them.
_STOP_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "completed": "end_turn",
    "end_turn": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "max_output_tokens": "max_tokens",
    "content_filter": "content_filter",
}


def stop_reason(reason: str | None, *, has_tool_calls: bool) -> StopReason | None:
    """``reason`` (a Chat ``finish_reason`` or a Responses status or incomplete reason)
    as a :data:`~fevex.models.StopReason`; a step that asks for tools is ``tool_use``
    whatever a provider said."""
    if has_tool_calls:
        return "tool_use"
    if reason is None:
        return None
    return _STOP_REASONS.get(reason)


@dataclass
class StepEnd:
    """How the provider ended the step, beyond text and tool calls."""

    refusal: str = ""
    # Why the output was cut short: "max_output_tokens" / "length", or a content filter.
    incomplete_reason: str | None = None


def finish_step(
    profile: ProviderProfile,
    *,
    text: str,
    drafts: list[ToolCallDraft],
    end: StepEnd,
    usage: Usage,
    output_schema: dict[str, Any] | None,
    max_output_tokens: int | None,
    reasoning: str | None = None,
    ended_because: str | None = None,
) -> ModelResult:
    """The step's result; ``ended_because`` is the API's own word for why it ended
    (mapped to the result's ``stop_reason``)."""
    name = profile.name
    if end.refusal:
        raise provider_error(
            name, "MODEL_REFUSAL", f"The model refused: {end.refusal}", refusal=end.refusal
        )
    reason = end.incomplete_reason
    if reason == "content_filter":
        raise provider_error(
            name,
            "MODEL_REFUSAL",
            f"{profile.label}'s content filter stopped the model's output.",
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
            name,
            "MODEL_OUTPUT_TRUNCATED",
            f"The model's output was cut short by {cause}.",
            reason=reason,
            max_output_tokens=max_output_tokens,
        )
    calls = [_tool_call(profile, draft) for draft in drafts]
    output: Any
    if calls:
        # Text beside tool calls is commentary; the final answer comes in a later step.
        output = text or None
    elif output_schema is not None:
        output = _structured_output(profile, text)
    else:
        output = text
    return ModelResult(
        output=output,
        tool_calls=calls,
        usage=usage,
        reasoning=reasoning or None,
        stop_reason=stop_reason(ended_because, has_tool_calls=bool(calls)),
    )


def _structured_output(profile: ProviderProfile, text: str) -> Any:
    if not text.strip():
        raise provider_error(
            profile.name,
            "PROVIDER_EMPTY_OUTPUT",
            f"{profile.label} returned blank content where the structured output belongs; "
            "retrying the step usually succeeds (a larger output-token limit may help).",
            recoverable=True,
        )
    try:
        value = json.loads(text)
    except ValueError as error:
        raise provider_error(
            profile.name,
            "MODEL_INVALID_JSON",
            f"The model's structured output is not valid JSON ({error}).",
            recoverable=True,
            where="output",
        ) from None
    # A bare JSON string would read back as different text: the text itself is the output.
    return text if isinstance(value, str) else value


def _tool_call(profile: ProviderProfile, draft: ToolCallDraft) -> ToolCall:
    if not draft.name:
        raise provider_error(
            profile.name,
            "PROVIDER_ERROR",
            f"{profile.label} sent a tool call without a tool name.",
            recoverable=True,
        )
    arguments = draft.arguments
    try:
        # Some OpenAI-compatible servers send no text at all for a call without arguments.
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError as error:
        raise provider_error(
            profile.name,
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
