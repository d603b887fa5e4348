"""Four views of one run, projected from its committed events.

The event log is the only truth; each view reads it for a different consumer:

- stream: text as it streamed, content blocks as they started and stopped, tool-call
  arguments as they streamed (from gateways that stream them), and tool calls as they were
  asked for, reported progress and were answered, for a typewriter-style UI;
- state: the transitions the run went through, for status indicators;
- messages: whole messages (user, assistant per model step with its thinking, text and
  tool calls, tool results per step), for chat history;
- turn: the run as one request and its response, with duration, usage and cost, for
  analytics and billing.

``project_run`` is pure: the same events always give the same view, so a view can be
rebuilt at any time from the store, and a live run can be re-projected after each event.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, TypeAlias

from fevex.errors import FevexRunError
from fevex.events.cost import Cost, CostCalculator, total_cost
from fevex.events.run_event import RunEvent
from fevex.messages import (
    ContentPart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    content_part_from_json,
)
from fevex.models import Usage

__all__ = [
    "BlockStart",
    "BlockStop",
    "Cost",
    "CostCalculator",
    "RunState",
    "RunView",
    "StateTransition",
    "StreamItem",
    "TextDelta",
    "ToolCallRequested",
    "ToolInputFragment",
    "ToolProgress",
    "ToolResultReceived",
    "Turn",
    "TurnStatus",
    "project_run",
]

RunState = Literal[
    "started",
    "thinking",
    "responding",
    "tool_planned",
    "tool_executing",
    "tool_completed",
    "tool_failed",
    "paused",
    "completed",
    "failed",
    "cancelled",
]
TurnStatus = Literal["completed", "failed", "cancelled"]

_TERMINAL: dict[str, TurnStatus] = {
    "run.completed": "completed",
    "run.failed": "failed",
    "run.cancelled": "cancelled",
}


# -- stream layer -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A fragment of a model step's visible output, in the order it streamed."""

    sequence: int
    step: int
    text: str
    kind: Literal["text-delta"] = "text-delta"


@dataclass(frozen=True, slots=True)
class ToolCallRequested:
    """The model asked for a tool call at the end of its step."""

    sequence: int
    step: int
    call: ToolCallPart
    kind: Literal["tool-call"] = "tool-call"


@dataclass(frozen=True, slots=True)
class ToolResultReceived:
    """A tool call ended; a failed call carries the error as its output and ``is_error``."""

    sequence: int
    step: int
    result: ToolResultPart
    kind: Literal["tool-result"] = "tool-result"


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """A running tool call reported how far it is: ``progress`` of ``total`` (``None``:
    not known), with the tool's ``message`` (cleaned and bounded; from a remote server,
    untrusted text)."""

    sequence: int
    step: int
    tool_call_id: str
    tool_name: str
    progress: float
    total: float | None = None
    message: str | None = None
    kind: Literal["tool-progress"] = "tool-progress"


@dataclass(frozen=True, slots=True)
class BlockStart:
    """A content block of a model step began (``block``: text, thinking or tool_use);
    a ``tool_use`` block names its call when the gateway knew it."""

    sequence: int
    step: int
    index: int
    block: str
    tool_call_id: str | None = None
    tool_name: str | None = None
    kind: Literal["block-start"] = "block-start"


@dataclass(frozen=True, slots=True)
class ToolInputFragment:
    """A fragment of a tool call's JSON arguments, in the order it streamed; the
    fragments of one block concatenate to the call's input."""

    sequence: int
    step: int
    index: int
    delta: str
    kind: Literal["tool-input-delta"] = "tool-input-delta"


@dataclass(frozen=True, slots=True)
class BlockStop:
    """A content block of a model step is complete."""

    sequence: int
    step: int
    index: int
    kind: Literal["block-stop"] = "block-stop"


StreamItem: TypeAlias = (
    TextDelta
    | BlockStart
    | ToolInputFragment
    | BlockStop
    | ToolCallRequested
    | ToolProgress
    | ToolResultReceived
)


# -- state layer ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StateTransition:
    """The run entered ``state`` at the event numbered ``sequence``.

    ``step`` is the model step the state belongs to, and ``tool_call_id`` the tool call,
    for the states that have one.
    """

    state: RunState
    sequence: int
    occurred_at: str
    step: int | None = None
    tool_call_id: str | None = None


# -- turn layer -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Turn:
    """A finished run as one request and its response.

    ``response`` is the last assistant message (``None`` when no model step completed);
    on a failed or cancelled run it may be a message that only asks for tools.
    ``steps`` counts the model steps started and ``tool_calls`` the tool calls started.
    ``cost`` is the sum of the model steps' costs (``None`` when no step was priced).
    ``error`` is the ``run.failed`` error.
    """

    run_id: str
    status: TurnStatus
    request: Message
    response: Message | None
    started_at: str
    ended_at: str
    duration_ms: float
    usage: Usage
    cost: Cost | None
    steps: int
    tool_calls: int
    error: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class RunView:
    """Every layer of one run; ``turn`` stays ``None`` until the run has ended."""

    run_id: str
    stream: tuple[StreamItem, ...]
    state: tuple[StateTransition, ...]
    messages: tuple[Message, ...]
    turn: Turn | None


# -- projection -------------------------------------------------------------------------


def project_run(
    events: Iterable[RunEvent], *, calculate_cost: CostCalculator | None = None
) -> RunView:
    """Project a run's events, from its ``run.started`` on, into the four layers.

    The events may stop anywhere: a running or paused run gets every layer so far and no
    turn. Events of several runs, events that do not number 1, 2, 3... in order, and
    events after the run ended raise ``FevexRunError`` with code ``INVALID_EVENTS``.
    Event types this version does not know are skipped. The turn's cost is the sum of
    its model steps' costs: those the run committed on ``model.completed`` (an app with
    ``Observability(calculate_cost=...)``), or, when ``calculate_cost`` is given, each
    step's usage priced by it with the step's model (``calculate_cost(usage, model)``).
    """
    checked = _checked(events)
    projection = _Projection(calculate_cost)
    for event in checked:
        try:
            projection.apply(event)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise _invalid(
                f"Event {event.sequence} ({event.type}) has a malformed payload: {error!r}.",
                sequence=event.sequence,
            ) from error
    return projection.view(checked[0].run_id)


def _invalid(message: str, **details: Any) -> FevexRunError:
    return FevexRunError("INVALID_EVENTS", message, category="validation", details=details)


def _checked(events: Iterable[RunEvent]) -> tuple[RunEvent, ...]:
    checked = tuple(events)
    if not checked:
        raise _invalid("There are no events to project; a run starts with run.started.")
    run_id = checked[0].run_id
    ended_at: int | None = None
    for position, event in enumerate(checked, start=1):
        if event.run_id != run_id:
            raise _invalid(
                f"Events of runs {run_id} and {event.run_id} are mixed; project one run.",
                run_ids=[run_id, event.run_id],
            )
        if event.sequence != position:
            raise _invalid(
                f"Expected event sequence {position}, got {event.sequence}: pass all of the "
                "run's events from the first one, in order.",
                expected=position,
                sequence=event.sequence,
            )
        if (event.type == "run.started") != (position == 1):
            raise _invalid(
                "A run's events start with exactly one run.started, as event 1.",
                sequence=event.sequence,
            )
        if ended_at is not None:
            raise _invalid(
                f"Event {event.sequence} follows the run's end at event {ended_at}.",
                sequence=event.sequence,
            )
        if event.type in _TERMINAL:
            ended_at = event.sequence
    return checked


class _Projection:
    """Reads events one at a time and keeps each layer up to date."""

    def __init__(self, calculate_cost: CostCalculator | None) -> None:
        self.calculate_cost = calculate_cost
        self.stream: list[StreamItem] = []
        self.state: list[StateTransition] = []
        self.messages: list[Message] = []
        self.step_text: dict[int, list[str]] = {}
        # A step's tool message is closed by the next model step or the run's end, so a
        # pause between two tool calls does not split it in two.
        self.open_results: list[ToolResultPart] = []
        self.usage = Usage()
        # The model of each step (as model.started records it); each completed step's
        # usage, model and committed cost.
        self.models: dict[int, str | None] = {}
        self.priced: list[tuple[Usage, str | None, Cost | None]] = []
        self.steps = 0
        self.tool_calls = 0
        self.started: RunEvent | None = None
        self.ended: RunEvent | None = None
        self.duration_ms = 0.0

    def enter(self, state: RunState, event: RunEvent, **where: Any) -> None:
        self.state.append(StateTransition(state, event.sequence, event.occurred_at, **where))

    def close_tool_message(self) -> None:
        if self.open_results:
            self.messages.append(Message("tool", tuple(self.open_results)))
            self.open_results = []

    def apply(self, event: RunEvent) -> None:
        payload = event.payload
        kind = event.type
        if kind == "run.started":
            self.started = event
            self.messages.append(_user_message(payload["input"]))
            self.enter("started", event)
        elif kind == "model.started":
            self.steps += 1
            model = payload.get("model")
            self.models[payload["step"]] = model if isinstance(model, str) else None
            if "tool_call_id" not in payload:  # a completion a tool asked for stays inside it
                self.close_tool_message()
                self.enter("thinking", event, step=payload["step"])
        elif kind == "model.output.delta":
            step: int = payload["step"]
            text: str = payload["delta"]
            if step not in self.step_text:
                self.step_text[step] = []
                self.enter("responding", event, step=step)
            self.step_text[step].append(text)
            self.stream.append(TextDelta(event.sequence, step, text))
        elif kind == "model.block.started":
            self.stream.append(
                BlockStart(
                    event.sequence,
                    payload["step"],
                    payload["index"],
                    payload["block"],
                    payload.get("tool_call_id"),
                    payload.get("tool_name"),
                )
            )
        elif kind == "model.tool_input.delta":
            self.stream.append(
                ToolInputFragment(
                    event.sequence, payload["step"], payload["index"], payload["delta"]
                )
            )
        elif kind == "model.block.stopped":
            self.stream.append(BlockStop(event.sequence, payload["step"], payload["index"]))
        elif kind == "model.completed":
            self.complete_step(event)
        elif kind == "tool.started":
            self.tool_calls += 1
            self.enter("tool_executing", event, **_tool_where(payload))
        elif kind == "tool.progress":
            self.stream.append(
                ToolProgress(
                    event.sequence,
                    payload["step"],
                    payload["tool_call_id"],
                    payload["tool_name"],
                    payload["progress"],
                    payload.get("total"),
                    payload.get("message"),
                )
            )
        elif kind in ("tool.completed", "tool.failed"):
            failed = kind == "tool.failed"
            result = ToolResultPart(
                payload["tool_call_id"],
                payload["tool_name"],
                payload["error"] if failed else payload["output"],
                is_error=failed,
            )
            self.open_results.append(result)
            self.stream.append(ToolResultReceived(event.sequence, payload["step"], result))
            self.enter("tool_failed" if failed else "tool_completed", event, **_tool_where(payload))
        elif kind == "run.paused":
            self.enter("paused", event)
        elif kind in _TERMINAL:
            self.close_tool_message()
            self.enter(_TERMINAL[kind], event)
            self.ended = event
            assert self.started is not None
            elapsed = _instant(event.occurred_at) - _instant(self.started.occurred_at)
            # Wall clocks can step back (NTP); a turn never lasts less than nothing.
            self.duration_ms = max(elapsed / timedelta(milliseconds=1), 0.0)

    def complete_step(self, event: RunEvent) -> None:
        payload = event.payload
        step: int = payload["step"]
        if "tool_call_id" in payload:
            # A completion a tool asked for: the run's usage and cost, not its conversation.
            usage = Usage.from_json(payload.get("usage"))
            self.usage = self.usage + usage
            self.priced.append((usage, self.models.get(step), Cost.from_json(payload.get("cost"))))
            return
        calls = [ToolCallPart(c["id"], c["name"], c.get("input")) for c in payload["tool_calls"]]
        # The assistant keeps its thinking and the text it streamed, as the engine does.
        text = "".join(self.step_text.get(step, ()))
        reasoning = payload.get("reasoning")
        parts: list[ContentPart] = [ThinkingPart(reasoning)] if reasoning else []
        if text:
            parts.append(TextPart(text))
        parts.extend(calls)
        self.messages.append(Message("assistant", tuple(parts)))
        usage = Usage.from_json(payload.get("usage"))
        self.usage = self.usage + usage
        self.priced.append((usage, self.models.get(step), Cost.from_json(payload.get("cost"))))
        for call in calls:
            self.stream.append(ToolCallRequested(event.sequence, step, call))
            self.enter("tool_planned", event, step=step, tool_call_id=call.id)

    def view(self, run_id: str) -> RunView:
        return RunView(
            run_id,
            tuple(self.stream),
            tuple(self.state),
            tuple(self.messages),
            self.turn(run_id),
        )

    def turn(self, run_id: str) -> Turn | None:
        started, ended = self.started, self.ended
        if started is None or ended is None:
            return None
        # run.completed records the run's total; failed and cancelled runs sum their steps.
        reported = ended.payload.get("usage")
        usage = self.usage if reported is None else Usage.from_json(reported)
        error = ended.payload.get("error") if ended.type == "run.failed" else None
        return Turn(
            run_id=run_id,
            status=_TERMINAL[ended.type],
            request=self.messages[0],
            response=next((m for m in reversed(self.messages) if m.role == "assistant"), None),
            started_at=started.occurred_at,
            ended_at=ended.occurred_at,
            duration_ms=self.duration_ms,
            usage=usage,
            cost=self.cost(),
            steps=self.steps,
            tool_calls=self.tool_calls,
            error=None if error is None else dict(error),
        )

    def cost(self) -> Cost | None:
        calculate = self.calculate_cost
        if calculate is None:
            return total_cost(committed for _, _, committed in self.priced)
        return total_cost(calculate(usage, model) for usage, model, _ in self.priced)


def _user_message(input: Any) -> Message:
    """The request: text, content parts, or, for any other JSON input (an agent's input
    schema, a workflow's or a team's input), that JSON as text, as the engine hands it to
    the model."""
    if isinstance(input, str):
        return Message.user(input)
    if isinstance(input, list) and input and all(_is_part(part) for part in input):
        return Message.user(content_part_from_json(part) for part in input)
    return Message.user(json.dumps(input, ensure_ascii=False))


def _is_part(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("type"), str)


def _tool_where(payload: dict[str, Any]) -> dict[str, Any]:
    return {"step": payload["step"], "tool_call_id": payload["tool_call_id"]}


def _instant(timestamp: str) -> datetime:
    instant = datetime.fromisoformat(timestamp)
    if instant.tzinfo is None:
        raise ValueError(f"time stamp {timestamp!r} has no time zone")
    return instant
