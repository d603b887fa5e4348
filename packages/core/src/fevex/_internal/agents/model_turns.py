"""What the agent loop makes of a model's turn: the model's name and provider for its
events, the assistant message's parts, and the error a failed call becomes."""

from __future__ import annotations

from fevex._internal.composition.registry import DEFAULT_MODEL_KEY, PreparedAgent
from fevex.errors import FevexRunError
from fevex.messages import TextPart, ThinkingPart, ToolCallPart
from fevex.models import ModelResult

__all__ = ["assistant_parts", "model_error", "model_identity"]


def model_identity(agent: PreparedAgent) -> tuple[str, str | None]:
    """The model's name (the gateway's ``model_name``, else the agent's model reference)
    and its provider (the ``provider`` of a ``provider:model`` reference)."""
    reference = agent.definition.model or DEFAULT_MODEL_KEY
    provider, separator, named = reference.partition(":")
    gateway_name = getattr(agent.model, "model_name", None)
    if isinstance(gateway_name, str) and gateway_name:
        named = gateway_name
    elif not separator:
        named = reference
    return named, provider if separator else None


def assistant_parts(
    result: ModelResult, text: str
) -> tuple[TextPart | ThinkingPart | ToolCallPart, ...]:
    parts: list[TextPart | ThinkingPart | ToolCallPart] = []
    if result.reasoning:
        parts.append(ThinkingPart(result.reasoning))
    if text:
        parts.append(TextPart(text))
    parts.extend(ToolCallPart(c.id, c.name, c.input) for c in result.tool_calls)
    return tuple(parts)


def model_error(error: Exception) -> FevexRunError:
    return FevexRunError(
        "MODEL_ERROR",
        f"The model failed: {type(error).__name__}: {error}",
        category="model",
        recoverable=True,
    )
