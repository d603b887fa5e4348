"""Refusing, where an agent or a tool is defined, a schema fevex cannot validate with.

Compiling the schema there (pydantic adapters are cached, so ``create_fevex`` pays nothing
again) turns a mistake such as ``output_schema=42`` into the entity's own code and a
message in fevex's terms, instead of pydantic's advice about its model configuration.
"""

from __future__ import annotations

from typing import Any

from fevex.errors import FevexConfigurationError
from fevex.schemas.schema import compile_schema

__all__ = ["check_schema", "schema_problem"]

_ACCEPTED = (
    "give a type pydantic can validate (a BaseModel, a dataclass, a TypedDict, "
    "list[int], ...) or an object with validate(value) and json_schema()"
)


def check_schema(source: Any, code: str, owner: str) -> None:
    """Raise ``FevexConfigurationError(code)`` unless ``source`` compiles as a schema."""
    try:
        compile_schema(source)
    except Exception as error:
        raise FevexConfigurationError(code, f"{owner}: {schema_problem(source, error)}") from error


def schema_problem(source: Any, error: BaseException) -> str:
    """Why ``source`` is not a schema, and what would be one."""
    from pydantic.errors import PydanticSchemaGenerationError, PydanticUndefinedAnnotation

    what = _describe(source)
    if isinstance(error, PydanticUndefinedAnnotation):
        return (
            f"{what} refers to {error.name!r}, which is not defined yet; define it first "
            "(or call model_rebuild() on the model)."
        )
    if isinstance(source, dict):
        return (
            f"{what} is a JSON Schema document, not a schema fevex can validate with; {_ACCEPTED}."
        )
    if isinstance(error, PydanticSchemaGenerationError):
        return f"{what} is not a schema fevex can validate with; {_ACCEPTED}."
    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return f"{what} is not a valid schema ({reason}); {_ACCEPTED}."


def _describe(source: Any) -> str:
    if isinstance(source, type):
        return f"the type {source.__qualname__}"
    text = repr(source)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} (of type {type(source).__name__})"
