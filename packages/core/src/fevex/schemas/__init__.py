from fevex._ground.canonical_json import json_digest
from fevex.schemas.json_schema import JsonSchema
from fevex.schemas.json_schema_engine import (
    CompiledJsonSchema,
    JsonSchemaError,
    compile_json_schema,
)
from fevex.schemas.json_schema_visitor import JsonSchemaVisitor, Subschema, SubschemaShapeError
from fevex.schemas.pattern import LinearPattern, linear_pattern
from fevex.schemas.schema import Schema

__all__ = [
    "CompiledJsonSchema",
    "JsonSchema",
    "JsonSchemaError",
    "JsonSchemaVisitor",
    "LinearPattern",
    "Schema",
    "Subschema",
    "SubschemaShapeError",
    "compile_json_schema",
    "json_digest",
    "linear_pattern",
]
