"""``ProviderProfile``: what an OpenAI-compatible provider changes in fevex-openai's wire code.

A provider that speaks OpenAI's Chat Completions API (DeepSeek, ...) is a base URL plus
one of these profiles, never a second copy of the request builder, the stream reader or
the error mapping. Every field has OpenAI's behaviour as its default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fevex.errors import FevexConfigurationError
from fevex_openai.strict_subset import OPENAI_STRICT_SUBSET, StrictSubset

__all__ = ["OPENAI_PROFILE", "ProviderProfile"]


@dataclass(frozen=True, slots=True)
class ProviderProfile:
    """The provider-specific rules of one OpenAI-compatible API.

    - ``name`` goes into every error's ``details["provider"]``; ``label`` names the provider
      in messages; ``install_hint`` is what a missing SDK's ``ImportError`` tells the user
      to run; ``api_key_variable`` is the variable a credentials error points to.
    - ``strict_subset``: the JSON Schema subset its strict mode accepts, checked before any
      request under ``schema_policy="strict"``.
    - ``structured_output``: ``"json_schema"`` sends the output schema as the response format
      (strict under the strict policy); ``"json_object"`` asks for JSON mode and puts the
      schema into the system prompt, which only the best-effort policy allows.
    - ``output_token_field``: the request field that carries the run's output-token budget.
    - ``parallel_tool_calls``: whether to send ``parallel_tool_calls: false``.
    - ``media_parts``: whether user messages may carry images and files.
    - ``reasoning_fields``: the fields of a streamed delta that carry the model's reasoning,
      in order of preference. OpenAI-compatible servers differ: DeepSeek and llama.cpp send
      ``reasoning_content``, OpenRouter and vLLM (since late 2025) send ``reasoning``, and a
      server keeping both names sends the same text twice; each delta's reasoning is the
      first of these fields that holds text, so it counts once.
    - ``reasoning_passback``: whether assistant messages of a turn with tool calls carry
      their thinking back as ``reasoning_content`` (the model's rule, not OpenAI's).
    - ``openai_environment``: whether the SDK may add ``OPENAI_ORG_ID``,
      ``OPENAI_PROJECT_ID`` and ``OPENAI_CUSTOM_HEADERS`` to requests; another provider
      must never receive OpenAI's settings or credentials.
    """

    name: str = "openai"
    label: str = "OpenAI"
    install_hint: str = 'pip install "fevex[openai]"'
    api_key_variable: str = "OPENAI_API_KEY"
    strict_subset: StrictSubset = OPENAI_STRICT_SUBSET
    structured_output: Literal["json_schema", "json_object"] = "json_schema"
    output_token_field: str = "max_completion_tokens"
    parallel_tool_calls: bool = True
    media_parts: bool = True
    reasoning_fields: tuple[str, ...] = ("reasoning_content", "reasoning")
    reasoning_passback: bool = False
    openai_environment: bool = True

    def __post_init__(self) -> None:
        fields = self.reasoning_fields
        if not (isinstance(fields, tuple) and all(isinstance(f, str) and f for f in fields)):
            raise FevexConfigurationError(
                "INVALID_MODEL",
                f"reasoning_fields must be a tuple of field names, not {fields!r}.",
                details={"provider": self.name},
            )


OPENAI_PROFILE = ProviderProfile()
