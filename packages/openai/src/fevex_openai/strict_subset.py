"""``StrictSubset``: the part of JSON Schema a provider's strict mode accepts, as data.

A :class:`~fevex_openai.ProviderProfile` holds one, and the strict-mode checker
(:mod:`fevex_openai.strict_schema`) reads it from the profile; this module needs neither,
so a profile can be described without the checker and its errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["OPENAI_STRICT_SUBSET", "StrictSubset"]


@dataclass(frozen=True, slots=True)
class StrictSubset:
    """The part of JSON Schema a provider's strict mode accepts.

    - ``keywords``: for each JSON type the provider supports, the keywords a schema of that
      type may use (besides ``type``, the annotations and the definitions);
    - ``untyped_keywords``: the keywords a schema without ``type`` may use, and
      ``type_stand_ins`` the ones that make a schema without ``type`` acceptable;
    - ``annotations``: accepted on any schema (beside a ``$ref`` too, unless ``ref_alone``);
    - ``formats``: the accepted ``format`` values;
    - ``definitions``: the keywords that hold reusable schemas;
    - ``type_lists``: whether ``"type": ["string", "null"]`` is accepted;
    - ``refs_into_definitions_only``: ``$ref`` may point only at ``#`` or into the
      definitions, rather than anywhere in the document.
    """

    keywords: Mapping[str, frozenset[str]]
    untyped_keywords: frozenset[str]
    type_stand_ins: frozenset[str]
    annotations: frozenset[str]
    formats: frozenset[str]
    definitions: frozenset[str] = frozenset({"$defs", "definitions"})
    type_lists: bool = True
    ref_alone: bool = True
    refs_into_definitions_only: bool = False


_OPENAI_KEYWORDS = frozenset(
    {
        "enum",
        "const",
        "anyOf",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)

OPENAI_STRICT_SUBSET = StrictSubset(
    # OpenAI lists its keywords without tying them to types.
    keywords={
        kind: _OPENAI_KEYWORDS
        for kind in ("string", "number", "integer", "boolean", "object", "array", "null")
    },
    untyped_keywords=_OPENAI_KEYWORDS,
    type_stand_ins=frozenset({"anyOf"}),
    annotations=frozenset({"title", "description"}),
    formats=frozenset(
        {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
    ),
)
