from fevex.schemas.json_schema import JsonSchema
from fevex.schemas.schema import Schema

__all__ = ["JsonSchema", "Schema"]
