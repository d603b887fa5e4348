"""Sampling: an MCP server asks the client's model for a message (``sampling/createMessage``).

fevex answers with a model of the app (:class:`MCPSampling` names it), through
:meth:`fevex.ToolContext.complete` of the tool call the request arrived during: a model
step of that call's run, checked by the app's policies and the run's limits, counted in
its usage and cost. What the server sends is untrusted: its text is cleaned of control
characters and of every secret the provider sent the server, and bounded
(``max_prompt_chars``); what fevex does not offer (tool use inside sampling, audio, images
unless the app says its model takes them) is refused with a stable code.

Importing this module imports no MCP SDK; the functions that read requests do.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fevex.messages import ContentPart, ImagePart, Message, TextPart
from fevex.tools import redact_secrets
from fevex_mcp.errors import (
    SAMPLING_INVALID,
    SAMPLING_TOO_LARGE,
    SAMPLING_UNSUPPORTED,
    configuration_error,
    run_error,
)

if TYPE_CHECKING:
    from mcp.types import CreateMessageRequestParams

__all__ = ["MCPSampling", "SamplingAsk", "sampling_ask", "sampling_config", "stopped"]

DEFAULT_MAX_TOKENS = 1024
DEFAULT_MAX_REQUESTS = 4
DEFAULT_MAX_PROMPT_CHARS = 32_000
# Beyond these a request is refused whatever the configuration says.
MAX_MESSAGES = 100
MAX_STOP_SEQUENCES = 4
MAX_STOP_SEQUENCE_CHARS = 100
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# What a server's text may not carry to the model, each replaced by a space: the C0
# controls but tab and newline, DEL, the C1 controls and the bidirectional controls (the
# same set the core removes from remote tool descriptions).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_STOP_REASONS = {"end_turn": "endTurn", "max_tokens": "maxTokens", "stop_sequence": "stopSequence"}


@dataclass(frozen=True, slots=True)
class MCPSampling:
    """How a provider answers its server's sampling requests.

    ``model`` is the key of one of the app's ``create_fevex(models={...})``. Each answer
    is at most ``max_tokens`` tokens (the server's ``maxTokens`` is capped to it, and the
    run's remaining output budget caps both); one tool call may ask at most
    ``max_requests`` times, and each request's text (system prompt, messages and image
    data together) is at most ``max_prompt_chars`` characters. ``images`` says the model
    takes images (a server's image is refused otherwise); ``options`` are the gateway's
    options for each answer, over the server's ``temperature``. Tool use inside sampling
    is not offered (``sampling.tools`` is not declared).
    """

    model: str
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_requests: int = DEFAULT_MAX_REQUESTS
    max_prompt_chars: int = DEFAULT_MAX_PROMPT_CHARS
    images: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SamplingAsk:
    """A server's request as the completion fevex asks for."""

    messages: tuple[Message, ...]
    system: str | None
    max_output_tokens: int
    options: Mapping[str, Any]
    stop_sequences: tuple[str, ...]


def sampling_config(value: MCPSampling | str | None) -> MCPSampling | None:
    """The provider's ``sampling=``, checked (``MCP_SAMPLING_INVALID``): an
    :class:`MCPSampling`, or a model's key alone."""
    if value is None:
        return None
    config = MCPSampling(value) if isinstance(value, str) else value
    if not isinstance(config, MCPSampling):
        raise _invalid(
            f"sampling must be an MCPSampling or a model's key, not {type(value).__name__}"
        )
    if not (isinstance(config.model, str) and config.model.strip()):
        raise _invalid("sampling names a model of the app (a key of create_fevex(models=...))")
    for name in ("max_tokens", "max_requests", "max_prompt_chars"):
        number = getattr(config, name)
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise _invalid(f"sampling's {name} must be a positive integer")
    if not isinstance(config.images, bool):
        raise _invalid("sampling's images is True or False")
    if not isinstance(config.options, Mapping) or not all(
        isinstance(k, str) for k in config.options
    ):
        raise _invalid("sampling's options map option names to values")
    return config


def sampling_ask(
    params: CreateMessageRequestParams, config: MCPSampling, secrets: Sequence[str], where: str
) -> SamplingAsk:
    """The completion a server's ``params`` ask for, or the refusal of a request fevex does
    not answer (``MCP_SAMPLING_UNSUPPORTED``, ``MCP_SAMPLING_TOO_LARGE``)."""
    if params.tools or params.tool_choice is not None:
        raise _unsupported(where, "tool use inside sampling is not offered")
    if len(params.messages) > MAX_MESSAGES:
        raise _too_large(where, f"more than {MAX_MESSAGES} messages")
    known = [secret for secret in secrets if secret]
    budget = [config.max_prompt_chars]
    system = None
    if params.system_prompt is not None:
        system = _text(params.system_prompt, known, budget, where)
    messages = tuple(_message(message, config, known, budget, where) for message in params.messages)
    if not messages:
        raise _unsupported(where, "it has no messages")
    options: dict[str, Any] = {}
    temperature = params.temperature
    if temperature is not None and math.isfinite(temperature) and 0 <= temperature <= 2:
        options["temperature"] = temperature
    options.update(config.options)
    stops = tuple(params.stop_sequences or ())
    if len(stops) > MAX_STOP_SEQUENCES or any(
        len(stop) > MAX_STOP_SEQUENCE_CHARS for stop in stops
    ):
        raise _too_large(
            where,
            f"more than {MAX_STOP_SEQUENCES} stop sequences, or one over "
            f"{MAX_STOP_SEQUENCE_CHARS} characters",
        )
    tokens = max(1, min(params.max_tokens, config.max_tokens))
    return SamplingAsk(messages, system, tokens, options, tuple(stop for stop in stops if stop))


def stopped(
    text: str, stop_sequences: Sequence[str], stop_reason: str | None
) -> tuple[str, str | None]:
    """The answer cut before the first of ``stop_sequences`` it holds (fevex applies them
    itself: gateways name them differently), and the MCP stop reason."""
    cuts = [text.find(stop) for stop in stop_sequences if stop in text]
    if cuts:
        return text[: min(cuts)], "stopSequence"
    if stop_reason is None:
        return text, None
    return text, _STOP_REASONS.get(stop_reason, stop_reason)


def _message(
    message: Any, config: MCPSampling, known: list[str], budget: list[int], where: str
) -> Message:
    blocks = message.content if isinstance(message.content, list) else [message.content]
    parts: list[ContentPart] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(TextPart(_text(block.text, known, budget, where)))
        elif kind == "image" and config.images and message.role == "user":
            if block.mime_type not in IMAGE_TYPES:
                raise _unsupported(where, "an image that is not PNG, JPEG, GIF or WebP")
            _spend(budget, len(block.data), where)
            parts.append(ImagePart(block.mime_type, data=block.data))
        elif kind == "image":
            raise _unsupported(where, "an image (the provider's sampling model takes none)")
        else:
            raise _unsupported(
                where,
                f"{kind if kind in ('audio', 'tool_use', 'tool_result') else 'unknown'} content",
            )
    return Message(message.role, tuple(parts))


def _text(text: str, known: list[str], budget: list[int], where: str) -> str:
    _spend(budget, len(text), where)
    clean = _CONTROL.sub(" ", text)
    return redact_secrets(clean, known) if known else clean


def _spend(budget: list[int], chars: int, where: str) -> None:
    budget[0] -= chars
    if budget[0] < 0:
        raise _too_large(where, "more text than the provider's max_prompt_chars")


def _unsupported(where: str, what: str) -> Exception:
    return run_error(
        SAMPLING_UNSUPPORTED,
        f"The MCP server {where} sent a sampling request fevex does not answer: {what}.",
    )


def _too_large(where: str, what: str) -> Exception:
    return run_error(
        SAMPLING_TOO_LARGE,
        f"The MCP server {where} sent a sampling request with {what}; fevex refused it.",
    )


def _invalid(message: str) -> Exception:
    return configuration_error(SAMPLING_INVALID, f"MCP provider: {message}.")
