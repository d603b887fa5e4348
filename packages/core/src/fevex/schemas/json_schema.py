"""A plain JSON Schema document used as a schema, for tools whose schema comes as data
(connections) or is written by hand.

It is checked whole when it is made (see :func:`fevex.schemas.compile_json_schema`): a
document that is not JSON Schema 2020-12, a ``pattern`` no linear-time engine can run or a
``$ref`` that points at nothing raises :class:`fevex.schemas.JsonSchemaError`, a
``ValueError``. Values are then checked against every keyword of the document, with
patterns matched in linear time and nothing fetched from the network.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fevex.schemas.json_schema_engine import CompiledJsonSchema, compile_json_schema

__all__ = ["JsonSchema"]


class JsonSchema:
    """Validates JSON values against a JSON Schema 2020-12 document."""

    __slots__ = ("_compiled", "document")

    def __init__(self, document: Mapping[str, Any]) -> None:
        self._compiled: CompiledJsonSchema = compile_json_schema(document)
        self.document = dict(document)

    def json_schema(self) -> dict[str, Any]:
        return self.document

    def validate(self, value: Any) -> Any:
        """Return ``value`` when it is valid; ``ValueError`` naming where it is not."""
        problems = self._compiled.problems(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value
