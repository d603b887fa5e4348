from fevex.schemas.json_schema import JsonSchema
from fevex.schemas.pattern import LinearPattern, linear_pattern
from fevex.schemas.schema import Schema

__all__ = ["JsonSchema", "LinearPattern", "Schema", "linear_pattern"]
