"""A completion a tool asks of one of the app's models, on its run's behalf
(:meth:`~fevex.ToolContext.complete`): what it asks, checked where it asks, and what it
gets back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fevex.errors import FevexRunError
from fevex.messages import ImagePart, Message, TextPart
from fevex.models import StopReason, Usage

__all__ = ["Completion", "CompletionRequest"]


@dataclass(frozen=True, slots=True)
class Completion:
    """One answer of an app model to a tool's request.

    ``text`` is the answer; ``model`` the model's name as its gateway gives it (the app's
    key for it otherwise); ``stop_reason`` why it ended, as the gateway said; ``usage`` the
    tokens it used, which the run's usage already counts.
    """

    text: str
    model: str
    stop_reason: StopReason | None = None
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """What a tool asks for: checked when made (``COMPLETION_INVALID``)."""

    messages: tuple[Message, ...]
    model: str | None = None
    system: str | None = None
    max_output_tokens: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        messages: str | Sequence[Message],
        model: str | None,
        system: str | None,
        max_output_tokens: int | None,
        options: Mapping[str, Any] | None,
        tool_name: str,
    ) -> CompletionRequest:
        conversation = (Message.user(messages),) if isinstance(messages, str) else tuple(messages)
        problem = _problem(conversation, model, system, max_output_tokens, options)
        if problem is not None:
            raise FevexRunError(
                "COMPLETION_INVALID",
                f"Tool {tool_name} asked for a completion that fevex refuses: {problem}.",
                category="validation",
                details={"tool_name": tool_name},
            )
        return cls(conversation, model, system, max_output_tokens, dict(options or {}))

    def to_json(self) -> dict[str, Any]:
        """The request as policies see it (``PolicyRequest.input`` at stage ``completion``)."""
        return {
            "model": self.model,
            "system": self.system,
            "messages": [message.to_json() for message in self.messages],
            "max_output_tokens": self.max_output_tokens,
        }


def _problem(
    messages: tuple[Message, ...],
    model: str | None,
    system: str | None,
    max_output_tokens: int | None,
    options: Mapping[str, Any] | None,
) -> str | None:
    if not messages:
        return "it has no messages"
    for message in messages:
        if not isinstance(message, Message) or message.role not in ("user", "assistant"):
            return "its messages are user and assistant Messages (the system prompt is system=)"
        allowed = (TextPart, ImagePart) if message.role == "user" else (TextPart,)
        if not all(isinstance(part, allowed) for part in message.content):
            return "user messages carry text and images, assistant messages text"
    if model is not None and not isinstance(model, str):
        return "model names a model of the app's models= by its key"
    if system is not None and not isinstance(system, str):
        return "system is text"
    if max_output_tokens is not None and (
        not isinstance(max_output_tokens, int)
        or isinstance(max_output_tokens, bool)
        or max_output_tokens < 1
    ):
        return "max_output_tokens is a positive integer"
    if options is not None and not isinstance(options, Mapping):
        return "options is a mapping"
    return None
