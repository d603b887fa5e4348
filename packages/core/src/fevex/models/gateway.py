"""The model contract: any object whose ``stream(input)`` yields these events is a model.

A stream is zero or more :class:`OutputDelta` events with the visible text (or JSON) in
fragments, then exactly one :class:`Completed` event. A gateway that streams its content
in blocks may also send, before the terminal, :class:`BlockStarted` and
:class:`BlockStopped` around each block and :class:`ToolInputDelta` fragments of a tool
call's JSON arguments inside a ``tool_use`` block; all three are optional, and the
arguments they spell must equal the call's input. ``provider_state`` is opaque
continuation data: the runtime hands it unchanged to the next model step of the same run
and never puts it in messages, events, results or stores.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from fevex.messages import Message

__all__ = [
    "BlockKind",
    "BlockStarted",
    "BlockStopped",
    "Completed",
    "ModelGateway",
    "ModelInput",
    "ModelResult",
    "ModelStreamEvent",
    "OutputDelta",
    "StopReason",
    "ToolCall",
    "ToolInputDelta",
    "ToolSpec",
    "Usage",
]


@dataclass(slots=True)
class Usage:
    """Token counts as the provider reported them; ``None`` means not reported.

    ``total_tokens`` not reported beside input and output counts is their sum: many
    providers report only those two, and prices and budgets read the total.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cached_input_tokens: int | None = None
    reasoning_tokens: int | None = None

    def __post_init__(self) -> None:
        if (
            self.total_tokens is None
            and isinstance(self.input_tokens, int)
            and isinstance(self.output_tokens, int)
        ):
            self.total_tokens = self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            _add(self.input_tokens, other.input_tokens),
            _add(self.output_tokens, other.output_tokens),
            _add(self.total_tokens, other.total_tokens),
            _add(self.cached_input_tokens, other.cached_input_tokens),
            _add(self.reasoning_tokens, other.reasoning_tokens),
        )

    def to_json(self) -> dict[str, int]:
        # Written out: it runs several times per model step.
        data = {}
        if self.input_tokens is not None:
            data["input_tokens"] = self.input_tokens
        if self.output_tokens is not None:
            data["output_tokens"] = self.output_tokens
        if self.total_tokens is not None:
            data["total_tokens"] = self.total_tokens
        if self.cached_input_tokens is not None:
            data["cached_input_tokens"] = self.cached_input_tokens
        if self.reasoning_tokens is not None:
            data["reasoning_tokens"] = self.reasoning_tokens
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Usage:
        if not data:
            return cls()
        return cls(**{name: data.get(name) for name in cls.__slots__})


def _add(left: int | None, right: int | None) -> int | None:
    if left is None:
        return right
    if right is None:
        return left
    return left + right


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    input: Any


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: name, description and JSON Schema 2020-12 input."""

    name: str
    description: str
    input_schema: dict[str, Any]


# Why a model step ended: its answer was complete, it asked for tools, it reached its
# output-token limit or a stop sequence, a content filter stopped it, or it failed.
StopReason = Literal[
    "end_turn", "tool_use", "max_tokens", "stop_sequence", "content_filter", "error"
]
STOP_REASONS: tuple[str, ...] = StopReason.__args__  # type: ignore[attr-defined]


@dataclass(slots=True)
class ModelResult:
    """The terminal result of one model step.

    ``output`` is the final text, or a JSON value when the step produced structured
    output; it must match the accumulated deltas. ``reasoning`` is visible model thinking,
    kept in the conversation as a thinking part. ``stop_reason`` is why the step ended, as
    the provider said (``None`` when it did not).
    """

    output: Any = None
    tool_calls: tuple[ToolCall, ...] | list[ToolCall] = ()
    usage: Usage = field(default_factory=Usage)
    provider_state: Any = None
    reasoning: str | None = None
    stop_reason: StopReason | None = None


@dataclass(slots=True)
class OutputDelta:
    delta: str
    type: Literal["output.delta"] = "output.delta"


@dataclass(slots=True)
class Completed:
    result: ModelResult
    type: Literal["completed"] = "completed"


BlockKind = Literal["text", "thinking", "tool_use"]


@dataclass(slots=True)
class BlockStarted:
    """A content block begins: ``index`` numbers it in the step (from 0); a ``tool_use``
    block names its call's id (when the provider gave one yet) and tool."""

    index: int
    block: BlockKind
    tool_call_id: str | None = None
    tool_name: str | None = None
    type: Literal["block.started"] = "block.started"


@dataclass(slots=True)
class ToolInputDelta:
    """A fragment of the JSON arguments of the tool call in the open block ``index``."""

    index: int
    delta: str
    type: Literal["tool_input.delta"] = "tool_input.delta"


@dataclass(slots=True)
class BlockStopped:
    """The content block ``index`` is complete."""

    index: int
    type: Literal["block.stopped"] = "block.stopped"


ModelStreamEvent = OutputDelta | BlockStarted | ToolInputDelta | BlockStopped | Completed


@dataclass(slots=True)
class ModelInput:
    """Everything one model step needs.

    ``tools`` and ``output_schema`` are plain JSON Schema, never the application's
    validators. ``max_output_tokens`` is the remaining output budget of the run.
    """

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    output_schema: dict[str, Any] | None = None
    max_output_tokens: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    provider_state: Any = None


@runtime_checkable
class ModelGateway(Protocol):
    """A model: ``stream`` returns an async iterator of :data:`ModelStreamEvent`.

    A gateway holding connections may also define ``async aclose()``; an app closes the
    gateways it built from ``provider:model`` references when it closes.
    """

    def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]: ...
