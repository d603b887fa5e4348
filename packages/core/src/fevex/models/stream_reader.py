"""Reading a model stream against the contract, for the runtime and for adapter tests.

A stream is ``output.delta`` events then exactly one ``completed``. The reader rejects a
missing or duplicate terminal, events after the terminal, unknown events, and a final
output that does not equal the accumulated deltas, each with its own stable code.

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

from fevex._internal.storable_text import UNSTORABLE_TEXT
from fevex.errors import FevexRunError
from fevex.models.gateway import ModelResult, ToolCall, Usage
from fevex.schemas.schema import ensure_json

__all__ = ["ModelStreamReader"]


def _violation(code: str, message: str) -> FevexRunError:
    return FevexRunError(code, message, category="model")


class ModelStreamReader:
    __slots__ = ("_buffer", "_text", "result")

    def __init__(self) -> None:
        self._buffer = io.StringIO()
        # The text once the stream has finished (read once from the buffer, then kept).
        self._text: str | None = None
        self.result: ModelResult | None = None

    def accept(self, event: Any) -> str | None:
        """Take the next event; returns the delta text for ``output.delta`` events."""
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
            return delta
        if kind == "completed":
            self.result = _checked_result(getattr(event, "result", None))
            return None
        raise _violation(
            "MODEL_STREAM_INVALID_EVENT", f"The model stream sent an unknown event {kind!r}."
        )

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
        return result


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
