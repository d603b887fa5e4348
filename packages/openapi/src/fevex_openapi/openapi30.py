"""OpenAPI 3.0's Schema Object, read as the JSON Schema 2020-12 the core's engine checks.

OpenAPI 3.0 schemas are an older, extended subset of JSON Schema. Each schema object is
translated on its own (its subschemas are translated as the subset builder reaches them),
keyword by keyword, into what it means in 2020-12:

- ``nullable: true`` lets ``null`` through: ``"type": "string"`` becomes
  ``["string", "null"]``, an ``enum`` gains ``null``, and a schema without ``type``
  becomes ``{"anyOf": [<the schema>, {"type": "null"}]}``. That is how services such as
  GitHub's use it (their enums of nullable fields leave ``null`` out), slightly wider than
  the letter of 3.0.3 for the two last cases;
- ``exclusiveMinimum: true`` with ``minimum: n`` becomes ``exclusiveMinimum: n`` (likewise
  for the maximum); ``false`` leaves ``minimum`` as it is;
- ``example`` becomes ``examples: [example]``;
- a ``$ref`` stands alone: 3.0 says the other keywords of a Reference Object are ignored.

Keywords 3.0 does not have (``const``, ``examples``, ``$id``, ``$anchor``, ``$schema``, a
list or ``"null"`` as ``type``...) are refused in a 3.0 document, as they would mean
something else there.
"""

from __future__ import annotations

from typing import Any

from fevex_openapi.errors import configuration_error

__all__ = ["NOT_IN_30", "nullable_schema", "translate_30_schema"]

#: 2020-12 keywords that OpenAPI 3.0's Schema Object does not have.
NOT_IN_30 = frozenset({"const", "examples", "$id", "$anchor", "$schema", "$vocabulary", "$comment"})
_TYPES_30 = frozenset({"object", "array", "string", "integer", "number", "boolean"})


def translate_30_schema(schema: dict[str, Any], location: str) -> tuple[dict[str, Any], bool]:
    """One 3.0 schema object as 2020-12 (its subschemas still in 3.0's dialect), and whether
    it is ``nullable``: :func:`nullable_schema` applies that once the subschemas are read."""
    if "$ref" in schema:
        return {"$ref": schema["$ref"]}, False
    for keyword in NOT_IN_30 & schema.keys():
        raise configuration_error(
            "OPENAPI_SCHEMA_UNSUPPORTED",
            f"The keyword {keyword!r} at {location} is not part of OpenAPI 3.0's Schema "
            "Object; declare the document as openapi 3.1.x to use JSON Schema 2020-12.",
            {"keyword": keyword, "location": location},
        )
    result = dict(schema)
    kind = result.get("type")
    if kind is not None and not (isinstance(kind, str) and kind in _TYPES_30):
        raise configuration_error(
            "OPENAPI_SCHEMA_INVALID",
            f"The schema at {location} is invalid: in OpenAPI 3.0, type is one of "
            f"{sorted(_TYPES_30)} (use nullable: true for null).",
            {"location": location},
        )
    for bound, exclusive in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if exclusive not in result:
            continue
        flag = result.pop(exclusive)
        if not isinstance(flag, bool):
            raise configuration_error(
                "OPENAPI_SCHEMA_INVALID",
                f"The schema at {location} is invalid: in OpenAPI 3.0, {exclusive} is a "
                f"boolean that makes {bound} exclusive.",
                {"location": location},
            )
        if flag and bound in result:
            result[exclusive] = result.pop(bound)
    if "example" in result:
        result["examples"] = [result.pop("example")]
    nullable = result.pop("nullable", False)
    if not isinstance(nullable, bool):
        raise configuration_error(
            "OPENAPI_SCHEMA_INVALID",
            f"The schema at {location} is invalid: nullable must be a boolean.",
            {"location": location},
        )
    return result, nullable


def nullable_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (2020-12) letting ``null`` through as well, as 3.0's ``nullable: true``."""
    if "type" in schema:
        schema["type"] = [schema["type"], "null"]
        enum = schema.get("enum")
        if isinstance(enum, list) and None not in enum:
            schema["enum"] = [*enum, None]
        return schema
    if not (schema.keys() - _ANNOTATIONS):
        return schema  # accepts null already
    annotations = {key: schema.pop(key) for key in list(schema) if key in _ANNOTATIONS}
    return {**annotations, "anyOf": [schema, {"type": "null"}]}


# Kept on the outside of the anyOf a nullable schema becomes, where a model reads them.
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "deprecated"})
