"""A deterministic model for tests: scripted responses, every input recorded."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from fevex.errors import FevexRunError
from fevex.models import (
    Completed,
    ModelInput,
    ModelResult,
    ModelStreamEvent,
    OutputDelta,
    ToolCall,
    Usage,
)

__all__ = ["FakeModel", "FakeResponse"]

FakeResponse = Mapping[str, Any] | ModelResult | BaseException | Callable[[ModelInput], Any]


class FakeModel:
    """Answers each model step with the next scripted response, in order.

    A response is a mapping with any of ``output`` (text, or a JSON value for structured
    output), ``tool_calls`` (mappings with ``id``, ``name``, ``input``), ``usage`` (a
    mapping of token counts: a total not given is input plus output), ``reasoning``,
    ``provider_state`` and ``stop_reason`` (by default ``"tool_use"`` for a response with
    tool calls, ``"end_turn"`` otherwise); a
    :class:`~fevex.models.ModelResult`; an exception to raise; or a function of the
    :class:`~fevex.models.ModelInput` returning one of those. Output text streams as
    ``chunk_size``-character deltas. Every input is recorded in ``calls``.
    """

    def __init__(self, *responses: FakeResponse, chunk_size: int | None = None) -> None:
        self._responses: deque[FakeResponse] = deque(responses)
        self.chunk_size = chunk_size
        self.calls: list[ModelInput] = []

    def respond(self, *responses: FakeResponse) -> FakeModel:
        """Queue more responses; returns the model."""
        self._responses.extend(responses)
        return self

    @property
    def pending(self) -> int:
        return len(self._responses)

    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        self.calls.append(input)
        if not self._responses:
            raise FevexRunError(
                "FAKE_MODEL_EXHAUSTED",
                f"FakeModel has no response left for call {len(self.calls)}.",
                category="model",
            )
        response = self._responses.popleft()
        if callable(response) and not isinstance(response, ModelResult | Mapping):
            response = response(input)
        if isinstance(response, BaseException):
            raise response
        result = response if isinstance(response, ModelResult) else _result(response)
        text = result.output
        if text is not None and not isinstance(text, str):
            text = json.dumps(text)
        if text:
            size = self.chunk_size or len(text)
            for start in range(0, len(text), size):
                yield OutputDelta(text[start : start + size])
        yield Completed(result)


def _result(response: Mapping[str, Any]) -> ModelResult:
    unknown = set(response) - {
        "output",
        "tool_calls",
        "usage",
        "reasoning",
        "provider_state",
        "stop_reason",
    }
    if unknown:
        raise ValueError(f"FakeModel responses take no {sorted(unknown)}")
    usage = response.get("usage")
    calls = tuple(
        call
        if isinstance(call, ToolCall)
        else ToolCall(call["id"], call["name"], call.get("input"))
        for call in response.get("tool_calls", ())
    )
    return ModelResult(
        output=response.get("output"),
        tool_calls=calls,
        stop_reason=response.get("stop_reason") or ("tool_use" if calls else "end_turn"),
        usage=usage if isinstance(usage, Usage) else Usage(**(usage or {})),
        provider_state=response.get("provider_state"),
        reasoning=response.get("reasoning"),
    )
