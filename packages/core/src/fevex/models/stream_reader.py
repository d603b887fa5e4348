"""Reading a model stream against the contract, for the runtime and for adapter tests.

A stream is ``output.delta`` events then exactly one ``completed``, with optional
``block.started``/``block.stopped`` around content blocks and ``tool_input.delta``
fragments inside a ``tool_use`` block. The reader rejects a missing or duplicate
terminal, events after the terminal, unknown or malformed events, a block left open or
stopped twice, a final output that does not equal the accumulated deltas, and tool
arguments that do not equal the input of the call they belong to, each with its own
stable code.

It is also where model output enters a run, so it refuses what no store can keep (NUL
characters, lone surrogates, NaN, non-JSON values, excessive nesting: see
:func:`fevex.schemas.schema.ensure_json`) before any of it is committed:
``MODEL_OUTPUT_UNSTORABLE`` for text, reasoning and tool-call ids and names,
``TOOL_INPUT_INVALID`` for a tool call's input, so that no tool starts with it.

The text is accumulated in one buffer, not kept delta by delta: a model may stream a long
answer a character at a time, and what a step needs is its text.
"""

from __future__ import annotations

import io
import json
from typing import Any

from fevex._ground.storable_text import UNSTORABLE_TEXT
from fevex.errors import FevexRunError
from fevex.models.gateway import STOP_REASONS, ModelResult, ToolCall, Usage
from fevex.schemas.schema import ensure_json

__all__ = ["ModelStreamReader"]


def _violation(code: str, message: str) -> FevexRunError:
    return FevexRunError(code, message, category="model")


class ModelStreamReader:
    """Checks one model step's stream; ``accept`` returns what the run records of each
    event: ``(run event type, payload)``, or ``None`` for the terminal."""

    __slots__ = ("_buffer", "_text", "blocks", "result", "tool_inputs")

    def __init__(self) -> None:
        self._buffer = io.StringIO()
        # The text once the stream has finished (read once from the buffer, then kept).
        self._text: str | None = None
        self.result: ModelResult | None = None
        # Block index -> its start (kind, tool call id) while open, and each block's
        # tool-input fragments.
        self.blocks: dict[int, tuple[str, str | None, bool]] = {}
        self.tool_inputs: dict[int, list[str]] = {}

    def accept(self, event: Any) -> tuple[str, dict[str, Any]] | None:
        """Take the next event; returns the run event it becomes, if any."""
        kind = getattr(event, "type", None)
        if self.result is not None:
            if kind == "completed":
                raise _violation(
                    "MODEL_STREAM_DUPLICATE_TERMINAL",
                    "The model stream sent more than one completed event.",
                )
            raise _violation(
                "MODEL_STREAM_EVENT_AFTER_TERMINAL",
                f"The model stream sent {kind!r} after its completed event.",
            )
        if kind == "output.delta":
            delta = getattr(event, "delta", None)
            if not isinstance(delta, str):
                raise _violation(
                    "MODEL_STREAM_INVALID_EVENT", "An output.delta must carry a string."
                )
            # What ensure_json checks of a text, without its walk: this runs per delta.
            if UNSTORABLE_TEXT.search(delta) is not None:
                _check_storable(delta, "an output delta")
            self._buffer.write(delta)
            return "model.output.delta", {"delta": delta}
        if kind == "block.started":
            return self._block_started(event)
        if kind == "tool_input.delta":
            return self._tool_input(event)
        if kind == "block.stopped":
            index = getattr(event, "index", None)
            if not isinstance(index, int) or not _is_index(index) or not self._open(index):
                raise _violation(
                    "MODEL_STREAM_INVALID_EVENT",
                    f"The model stream stopped block {index!r}, which is not open.",
                )
            block, call_id, _ = self.blocks[index]
            self.blocks[index] = (block, call_id, False)
            return "model.block.stopped", {"index": index}
        if kind == "completed":
            open_blocks = [index for index in self.blocks if self._open(index)]
            if open_blocks:
                raise _violation(
                    "MODEL_STREAM_INVALID_EVENT",
                    f"The model stream completed with block {open_blocks[0]} still open.",
                )
            self.result = _checked_result(getattr(event, "result", None))
            return None
        raise _violation(
            "MODEL_STREAM_INVALID_EVENT", f"The model stream sent an unknown event {kind!r}."
        )

    def _open(self, index: int) -> bool:
        return index in self.blocks and self.blocks[index][2]

    def _block_started(self, event: Any) -> tuple[str, dict[str, Any]]:
        index = getattr(event, "index", None)
        block = getattr(event, "block", None)
        call_id = getattr(event, "tool_call_id", None)
        name = getattr(event, "tool_name", None)
        if (
            not isinstance(index, int)
            or not _is_index(index)
            or index in self.blocks
            or block not in ("text", "thinking", "tool_use")
            or not (call_id is None or (isinstance(call_id, str) and call_id))
            or not (name is None or (isinstance(name, str) and name))
        ):
            raise _violation(
                "MODEL_STREAM_INVALID_EVENT",
                f"Invalid block.started (index {index!r}, block {block!r}): each block has a "
                "new index from 0 and a kind of text, thinking or tool_use.",
            )
        _check_storable([call_id, name], "a tool call's id or name")
        self.blocks[index] = (block, call_id, True)
        payload: dict[str, Any] = {"index": index, "block": block}
        if call_id is not None:
            payload["tool_call_id"] = call_id
        if name is not None:
            payload["tool_name"] = name
        return "model.block.started", payload

    def _tool_input(self, event: Any) -> tuple[str, dict[str, Any]]:
        index = getattr(event, "index", None)
        delta = getattr(event, "delta", None)
        if (
            not isinstance(index, int)
            or not _is_index(index)
            or not self._open(index)
            or self.blocks[index][0] != "tool_use"
            or not isinstance(delta, str)
        ):
            raise _violation(
                "MODEL_STREAM_INVALID_EVENT",
                f"A tool_input.delta must carry text for an open tool_use block, not block "
                f"{index!r}.",
            )
        _check_storable(delta, "a tool input delta")
        self.tool_inputs.setdefault(index, []).append(delta)
        return "model.tool_input.delta", {"index": index, "delta": delta}

    @property
    def text(self) -> str:
        """The text of the deltas taken so far."""
        if self._text is not None:
            return self._text
        return self._buffer.getvalue()

    def finish(self) -> ModelResult:
        """The terminal result, once the stream has ended."""
        result = self.result
        if result is None:
            raise _violation(
                "MODEL_STREAM_MISSING_TERMINAL", "The model stream ended without a completed event."
            )
        text = self._text = self._buffer.getvalue()
        self._buffer = io.StringIO()  # the text is kept once, not also in the buffer
        output = result.output
        if output is None or isinstance(output, str):
            matches = (output or "") == text
        else:
            try:
                matches = json.loads(text) == output
            except ValueError:
                matches = False
        if not matches:
            raise _violation(
                "MODEL_OUTPUT_MISMATCH",
                "The model's final output does not equal the output deltas it streamed.",
            )
        self._check_tool_inputs(result)
        return result

    def _check_tool_inputs(self, result: ModelResult) -> None:
        inputs = {call.id: call.input for call in result.tool_calls}
        for index, fragments in self.tool_inputs.items():
            call_id = self.blocks[index][1]
            if call_id is None or call_id not in inputs:
                continue  # a call whose id the provider gave only at the end
            text = "".join(fragments)
            try:
                matches = (json.loads(text) if text.strip() else {}) == inputs[call_id]
            except ValueError:
                matches = False
            if not matches:
                raise _violation(
                    "MODEL_OUTPUT_MISMATCH",
                    f"The input of tool call {call_id!r} does not equal the argument deltas "
                    "the model streamed for it.",
                )


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _checked_result(result: Any) -> ModelResult:
    if not isinstance(result, ModelResult):
        raise _violation(
            "MODEL_STREAM_INVALID_EVENT", "A completed event must carry a ModelResult."
        )
    for call in result.tool_calls:
        if not (
            isinstance(call, ToolCall)
            and isinstance(call.id, str)
            and call.id
            and isinstance(call.name, str)
            and call.name
        ):
            raise _violation(
                "MODEL_STREAM_INVALID_EVENT", f"Invalid tool call in the model result: {call!r}"
            )
    if not isinstance(result.usage, Usage):
        raise _violation("MODEL_STREAM_INVALID_EVENT", "ModelResult.usage must be a Usage value.")
    if result.stop_reason is not None and result.stop_reason not in STOP_REASONS:
        raise _violation(
            "MODEL_STREAM_INVALID_EVENT",
            f"ModelResult.stop_reason {result.stop_reason!r} is not one of "
            f"{', '.join(STOP_REASONS)}.",
        )
    _check_storable(result.output, "the output")
    _check_storable(result.reasoning, "the reasoning")
    for call in result.tool_calls:
        _check_storable([call.id, call.name], "a tool call's id or name")
        try:
            ensure_json(call.input)
        except TypeError as error:
            raise FevexRunError(
                "TOOL_INPUT_INVALID",
                f"The model called tool {call.name!r} with input that cannot be stored: {error}; "
                "the tool did not run.",
                category="validation",
                details={"tool_name": call.name},
            ) from None
    return result


def _check_storable(value: Any, what: str) -> None:
    try:
        ensure_json(value)
    except TypeError as error:
        raise _violation(
            "MODEL_OUTPUT_UNSTORABLE",
            f"The model sent {what} that no run store can keep ({error}).",
        ) from None
