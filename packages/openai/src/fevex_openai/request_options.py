"""Model options: the escape hatch into the request body, minus the fields fevex owns.

fevex decides the model, the conversation, the tools and tool choice, the output format,
tool-call parallelism (one call at a time: fevex runs tools sequentially), the output-token
cap and streaming. An option that names one of those fails with
``PROVIDER_OPTION_NOT_ALLOWED`` rather than being dropped, so a setting never silently
does nothing. Every other option is sent as a field of the JSON request body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fevex_openai.error_mapping import invalid_request

__all__ = ["CHAT_OWNED_FIELDS", "RESPONSES_OWNED_FIELDS", "passthrough_options"]

RESPONSES_OWNED_FIELDS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "prompt",
        "previous_response_id",
        "conversation",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_output_tokens",
        "stream",
    }
)
CHAT_OWNED_FIELDS = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "functions",
        "function_call",
        "parallel_tool_calls",
        "response_format",
        "max_tokens",
        "max_completion_tokens",
        "n",
        "stream",
        "stream_options",
    }
)


def passthrough_options(
    options: Mapping[str, Any], owned: frozenset[str], provider: str
) -> dict[str, Any]:
    """The options to send, or ``PROVIDER_OPTION_NOT_ALLOWED`` for one fevex owns."""
    for name in options:
        if name in owned:
            raise invalid_request(
                provider,
                "PROVIDER_OPTION_NOT_ALLOWED",
                f"The model option {name!r} sets a request field that fevex owns (model, "
                "conversation, tools, tool choice, output format, parallelism, output-token "
                "cap, streaming); remove it from model_options.",
                option=name,
            )
    return dict(options)
