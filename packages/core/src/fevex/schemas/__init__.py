from fevex.schemas.json_schema import JsonSchema
from fevex.schemas.json_schema_engine import (
    CompiledJsonSchema,
    JsonSchemaError,
    compile_json_schema,
)
from fevex.schemas.pattern import LinearPattern, linear_pattern
from fevex.schemas.schema import Schema

__all__ = [
    "CompiledJsonSchema",
    "JsonSchema",
    "JsonSchemaError",
    "LinearPattern",
    "Schema",
    "compile_json_schema",
    "linear_pattern",
]
