"""One model step as a DeepSeek Chat Completions request, checked before it is sent.

Everything that can be refused locally is refused here, so no request leaves the machine
with a schema, an option or a content part the provider would reject.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from fevex.models import ModelInput, ToolSpec
from fevex_deepseek.chat_messages import ChatMessage, chat_messages
from fevex_deepseek.errors import (
    PROVIDER_OPTION_NOT_ALLOWED,
    PROVIDER_SCHEMA_UNSUPPORTED,
    provider_error,
)
from fevex_deepseek.strict_schema import check_strict_tool_schema

__all__ = ["OWNED_FIELDS", "ChatRequest", "SchemaPolicy", "build_chat_request"]

SchemaPolicy = Literal["strict", "best-effort"]

# Request fields fevex sets itself. Model options may not replace them: the run's
# conversation, tools, output contract and token budget stay what the runtime decided.
OWNED_FIELDS = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "functions",
        "function_call",
        "response_format",
        "parallel_tool_calls",
        "max_tokens",
        "max_completion_tokens",
        "stream",
        "stream_options",
        "n",
    }
)


@dataclass(frozen=True, slots=True)
class ChatRequest:
    messages: list[ChatMessage]
    tools: list[dict[str, Any]]
    # Strict tools are a beta feature: they are served only under the beta base URL.
    beta: bool
    json_output: bool
    max_tokens: int | None
    options: dict[str, Any] = field(default_factory=dict)


def build_chat_request(model_input: ModelInput, schema_policy: SchemaPolicy) -> ChatRequest:
    options = _options(model_input.options)
    strict = schema_policy == "strict"
    if model_input.output_schema is not None and strict:
        raise provider_error(
            PROVIDER_SCHEMA_UNSUPPORTED,
            "DeepSeek has no strict structured output for final answers. Create the model "
            'with schema_policy="best-effort" (for example models={"default": '
            'create_deepseek(schema_policy="best-effort")("deepseek-v4-flash")}) to use its '
            "JSON output mode, with the answer validated locally by fevex.",
            category="validation",
            boundary="output",
        )
    if model_input.output_schema is not None:
        _check_json_output_schema(model_input.output_schema)
    tools = [_tool(spec, strict) for spec in model_input.tools]
    reasoning_by_call = _reasoning_by_call(model_input.provider_state)
    messages = chat_messages(model_input.messages, reasoning_by_call)
    if model_input.output_schema is not None:
        messages = _with_json_instruction(messages, model_input.output_schema)
    return ChatRequest(
        messages=messages,
        tools=tools,
        beta=strict and bool(tools),
        json_output=model_input.output_schema is not None,
        max_tokens=model_input.max_output_tokens,
        options=options,
    )


def _options(options: Mapping[str, Any]) -> dict[str, Any]:
    owned = sorted(name for name in options if name in OWNED_FIELDS)
    if owned:
        raise provider_error(
            PROVIDER_OPTION_NOT_ALLOWED,
            f"Model options may not set {', '.join(owned)}: fevex owns the model, messages, "
            "tools, tool choice, response format, parallelism, output-token cap and "
            "streaming of each request. Use agent tools, output_schema and limits instead.",
            category="configuration",
            options=owned,
        )
    return dict(options)


def _tool(spec: ToolSpec, strict: bool) -> dict[str, Any]:
    function: dict[str, Any] = {
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.input_schema,
    }
    if strict:
        check_strict_tool_schema(spec.name, spec.input_schema)
        function["strict"] = True
    return {"type": "function", "function": function}


def _check_json_output_schema(output_schema: Mapping[str, Any]) -> None:
    kind = output_schema.get("type")
    if kind is not None and kind != "object":
        raise provider_error(
            PROVIDER_SCHEMA_UNSUPPORTED,
            f"DeepSeek's JSON output mode answers with a JSON object, but the output schema "
            f"has type {kind!r}. Wrap the answer in an object (a model with one field).",
            category="validation",
            boundary="output",
            keyword="type",
            path="#",
        )


def _reasoning_by_call(provider_state: Any) -> dict[str, str]:
    if isinstance(provider_state, Mapping):
        found = provider_state.get("reasoning_by_tool_call")
        if isinstance(found, Mapping):
            return {str(k): v for k, v in found.items() if isinstance(v, str)}
    return {}


def _with_json_instruction(
    messages: list[ChatMessage], output_schema: Mapping[str, Any]
) -> list[ChatMessage]:
    """Ask for the answer as JSON in the system prompt.

    JSON output mode only guarantees syntactically valid JSON, and DeepSeek requires the
    word "json" in the prompt to enable it; the schema itself is validated locally.
    """
    instruction = (
        "Give your final answer in json: a single JSON object, with no text around it, "
        "that conforms to this JSON Schema:\n"
        + json.dumps(output_schema, ensure_ascii=False, separators=(",", ":"))
    )
    if messages and messages[0]["role"] == "system":
        first = messages[0]
        content = first["content"]
        merged = f"{content}\n\n{instruction}" if content else instruction
        return [{**first, "content": merged}, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]
