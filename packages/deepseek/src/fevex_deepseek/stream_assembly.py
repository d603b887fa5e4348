"""Chat Completions chunks put back together into one model step.

Text deltas pass straight through; reasoning, tool-call fragments (joined by their
``index``, since ids and names arrive only on a call's first fragment), usage and the
finish reason are collected for the terminal result.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fevex.models import ModelResult, ToolCall, Usage
from fevex_deepseek.errors import (
    PROVIDER_EMPTY_OUTPUT,
    PROVIDER_ERROR,
    PROVIDER_REFUSAL,
    provider_error,
)

__all__ = ["StepAssembler"]


@dataclass(slots=True)
class _CallFragments:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class StepAssembler:
    """Feed it every chunk with :meth:`add`; :meth:`result` builds the terminal result."""

    def __init__(self, *, json_output: bool) -> None:
        self.json_output = json_output
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, _CallFragments] = {}
        self.usage = Usage()
        self.finish_reason: str | None = None

    def add(self, chunk: Any) -> list[str]:
        """Take one ``chat.completion.chunk``; returns its visible text deltas."""
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            # Usage is cumulative for the request: the last report is the whole step's.
            self.usage = _usage(usage)
        deltas: list[str] = []
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "index", 0) != 0:
                continue
            delta = choice.delta
            if delta is not None:
                reasoning = getattr(delta, "reasoning_content", None)
                if isinstance(reasoning, str) and reasoning:
                    self.reasoning.append(reasoning)
                if isinstance(delta.content, str) and delta.content:
                    self.text.append(delta.content)
                    deltas.append(delta.content)
                for fragment in delta.tool_calls or ():
                    self._add_call_fragment(fragment)
            if choice.finish_reason is not None:
                self.finish_reason = str(choice.finish_reason)
        return deltas

    def _add_call_fragment(self, fragment: Any) -> None:
        call = self.calls.setdefault(fragment.index, _CallFragments())
        if fragment.id and not call.id:
            call.id = fragment.id
        function = fragment.function
        if function is None:
            return
        if function.name and not call.name:
            call.name = function.name
        if function.arguments:
            call.arguments.append(function.arguments)

    def result(self, provider_state: Any) -> ModelResult:
        self._check_finish()
        tool_calls = [self._tool_call(index) for index in sorted(self.calls)]
        reasoning = "".join(self.reasoning) or None
        return ModelResult(
            output=self._output(has_tool_calls=bool(tool_calls)),
            tool_calls=tool_calls,
            usage=self.usage,
            provider_state=_next_state(provider_state, tool_calls, reasoning),
            reasoning=reasoning,
        )

    def _check_finish(self) -> None:
        reason = self.finish_reason
        if reason is None:
            raise provider_error(
                PROVIDER_ERROR,
                "The DeepSeek stream ended before the model finished its answer.",
                recoverable=True,
            )
        if reason == "content_filter":
            raise provider_error(
                PROVIDER_REFUSAL,
                "DeepSeek stopped the answer with its content filter.",
                finish_reason=reason,
            )
        if reason == "insufficient_system_resource":
            raise provider_error(
                PROVIDER_ERROR,
                "DeepSeek interrupted the answer for lack of inference capacity; retry later.",
                recoverable=True,
                finish_reason=reason,
            )

    def _tool_call(self, index: int) -> ToolCall:
        fragments = self.calls[index]
        if not fragments.name:
            raise provider_error(
                PROVIDER_ERROR,
                f"DeepSeek streamed a tool call (index {index}) without a function name.",
                recoverable=True,
            )
        text = "".join(fragments.arguments)
        arguments: Any
        if not text.strip():
            arguments = {}
        else:
            try:
                arguments = json.loads(text)
            except ValueError:
                # Kept as written: fevex's tool input validation reports it to the model,
                # which can then correct the call.
                arguments = text
        call_id = fragments.id or f"call_{uuid.uuid4().hex}"
        return ToolCall(id=call_id, name=fragments.name, input=arguments)

    def _output(self, *, has_tool_calls: bool) -> Any:
        text = "".join(self.text)
        if not self.json_output:
            return text
        if not text.strip():
            if has_tool_calls:
                return None
            raise provider_error(
                PROVIDER_EMPTY_OUTPUT,
                "DeepSeek's JSON output mode returned blank content; retrying the step "
                "usually succeeds (a larger output-token limit may help).",
                recoverable=True,
                finish_reason=self.finish_reason,
            )
        try:
            value = json.loads(text)
        except ValueError:
            # Left as text: the runtime's local validation reports it as invalid output.
            return text
        # A bare JSON string would read back as different text; keep the text itself.
        return text if isinstance(value, str) else value


def _usage(usage: Any) -> Usage:
    cached = _int(getattr(usage, "prompt_cache_hit_tokens", None))
    if cached is None:
        cached = _int(getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", None))
    details = getattr(usage, "completion_tokens_details", None)
    return Usage(
        input_tokens=_int(getattr(usage, "prompt_tokens", None)),
        output_tokens=_int(getattr(usage, "completion_tokens", None)),
        total_tokens=_int(getattr(usage, "total_tokens", None)),
        cached_input_tokens=cached,
        reasoning_tokens=_int(getattr(details, "reasoning_tokens", None)),
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _next_state(previous: Any, tool_calls: list[ToolCall], reasoning: str | None) -> Any:
    """Provider state: the reasoning behind each tool call of the run so far.

    The runtime keeps reasoning in the conversation as a thinking part; this copy lets a
    direct gateway caller that passes provider state along, but drops thinking parts,
    still satisfy DeepSeek's rule that tool-call turns carry their reasoning back.
    """
    if not (tool_calls and reasoning):
        return previous
    known: dict[str, str] = {}
    if isinstance(previous, Mapping) and isinstance(
        previous.get("reasoning_by_tool_call"), Mapping
    ):
        known.update(previous["reasoning_by_tool_call"])
    known.update({call.id: reasoning for call in tool_calls})
    return {"reasoning_by_tool_call": known}
