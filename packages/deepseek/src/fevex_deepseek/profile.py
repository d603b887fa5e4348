"""What DeepSeek changes in fevex-openai's Chat Completions layer.

DeepSeek speaks OpenAI's Chat Completions wire format; the request builder, the stream
reader, the strict-schema checker and the error mapping are fevex-openai's. This profile
is what DeepSeek adds:

- its strict function-calling subset of JSON Schema (beta): the types ``object``,
  ``string``, ``number``, ``integer``, ``boolean`` and ``array``, plus ``enum``, ``anyOf``
  and local ``$ref`` into ``$defs``; every object lists all of its properties in
  ``required`` and sets ``additionalProperties`` to ``false``; strings take ``pattern`` and
  a few ``format`` values (not ``minLength``/``maxLength``); numbers take ``const``,
  ``minimum``, ``maximum``, the exclusive bounds and ``multipleOf``; arrays take ``items``
  (not ``minItems``/``maxItems``); ``description``, ``title``, ``default`` and
  ``$comment`` are accepted anywhere;
- no strict structured output: JSON output mode with the schema in the system prompt;
- ``max_tokens`` for the output-token budget, no ``parallel_tool_calls``, text-only
  messages;
- thinking: read from ``reasoning_content`` only (DeepSeek's field), and sent back in it on
  the assistant messages of turns with tool calls, as DeepSeek requires;
- none of the environment's OpenAI settings (organization, project, custom headers).
"""

from __future__ import annotations

from fevex_openai import ProviderProfile, StrictSubset

__all__ = ["DEEPSEEK_PROFILE", "DEEPSEEK_STRICT_SUBSET"]

_NUMBER = frozenset(
    {"const", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)

DEEPSEEK_STRICT_SUBSET = StrictSubset(
    keywords={
        "object": frozenset({"properties", "required", "additionalProperties"}),
        "string": frozenset({"pattern", "format", "enum"}),
        "number": _NUMBER,
        "integer": _NUMBER,
        "boolean": frozenset({"enum"}),
        "array": frozenset({"items"}),
    },
    untyped_keywords=frozenset({"anyOf", "enum"}),
    type_stand_ins=frozenset({"anyOf", "enum"}),
    annotations=frozenset({"description", "title", "default", "$comment"}),
    formats=frozenset({"email", "hostname", "ipv4", "ipv6", "uuid"}),
    definitions=frozenset({"$defs", "$def"}),
    type_lists=False,
    ref_alone=False,
    refs_into_definitions_only=True,
)

DEEPSEEK_PROFILE = ProviderProfile(
    name="deepseek",
    label="DeepSeek",
    install_hint='pip install "fevex[deepseek]"',
    api_key_variable="DEEPSEEK_API_KEY",
    strict_subset=DEEPSEEK_STRICT_SUBSET,
    structured_output="json_object",
    output_token_field="max_tokens",
    parallel_tool_calls=False,
    media_parts=False,
    reasoning_fields=("reasoning_content",),
    reasoning_passback=True,
    openai_environment=False,
)
