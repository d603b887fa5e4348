"""Schemas: what fevex validates values with, and what it sends to models as JSON Schema.

A schema is either a type that pydantic's ``TypeAdapter`` accepts (models, dataclasses,
TypedDict, annotated types) or any object that follows the small :class:`Schema` protocol.
pydantic is imported only when a type needs it, so ``import fevex`` stays light.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from fevex._ground.storable_text import UNSTORABLE_TEXT
from fevex.errors import FevexRunError
from fevex.schemas.json_schema_visitor import JsonSchemaVisitor

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = ["CompiledSchema", "Schema", "compile_schema", "ensure_json"]

_EVERY_SUBSCHEMA = JsonSchemaVisitor()


@runtime_checkable
class Schema(Protocol):
    """An executable validator that can also describe itself as JSON Schema 2020-12.

    ``validate`` returns the (possibly transformed) value or raises; the value it returns
    must be JSON-safe. ``json_schema`` raises when the schema cannot be described.
    """

    def validate(self, value: Any) -> Any: ...

    def json_schema(self) -> dict[str, Any]: ...


class CompiledSchema:
    """One schema ready to validate values and to dump them back to plain JSON."""

    __slots__ = ("_adapter", "_json_schema", "_protocol", "source")

    def __init__(self, source: Any) -> None:
        self.source = source
        self._json_schema: dict[str, Any] | None = None
        self._protocol: Schema | None = None
        self._adapter: TypeAdapter[Any] | None = None
        if _is_schema_object(source):
            self._protocol = source
        else:
            self._adapter = _type_adapter(source)

    def validate(self, value: Any) -> Any:
        """Return the validated Python value; raises ``ValueError`` subclasses on failure."""
        if self._adapter is not None:
            return self._adapter.validate_python(value)
        assert self._protocol is not None
        return self._protocol.validate(value)

    def validate_json_text(self, text: str) -> Any:
        if self._adapter is not None:
            return self._adapter.validate_json(text)
        import json

        return self.validate(json.loads(text))

    def to_json(self, value: Any) -> Any:
        """The plain-JSON form of a validated value, as it crosses stores and wires."""
        if self._adapter is not None:
            return self._adapter.dump_python(value, mode="json")
        ensure_json(value)
        return value

    def json_schema(self) -> dict[str, Any]:
        """JSON Schema 2020-12; raises ``SCHEMA_NOT_TRANSPORTABLE`` when it cannot be built."""
        if self._json_schema is None:
            try:
                if self._adapter is not None:
                    built = _closed(self._adapter.json_schema())
                else:
                    assert self._protocol is not None
                    built = self._protocol.json_schema()
                ensure_json(built)
                if not isinstance(built, dict):
                    raise TypeError("a JSON Schema must be an object")
            except Exception as error:
                raise FevexRunError(
                    "SCHEMA_NOT_TRANSPORTABLE",
                    f"The schema {_describe(self.source)} cannot be converted to JSON Schema: "
                    f"{error}",
                    category="validation",
                ) from error
            self._json_schema = built
        return self._json_schema


def _closed(schema: Any) -> Any:
    """Mark every object schema that lists its properties as closed.

    Models are told to send no extra fields, which providers' strict modes require; local
    validation still follows the type's own rules.
    """
    if isinstance(schema, dict):
        if "properties" in schema and "additionalProperties" not in schema:
            schema["additionalProperties"] = False
        # Subschemas only: a field named "properties", or a default that holds one, is data.
        for child in _EVERY_SUBSCHEMA.subschemas(schema):
            _closed(child.schema)
    return schema


def _is_schema_object(source: Any) -> bool:
    return (
        not isinstance(source, type)
        and callable(getattr(source, "validate", None))
        and callable(getattr(source, "json_schema", None))
    )


def compile_schema(source: Any) -> CompiledSchema:
    """Compile a schema once; pydantic adapters are cached per type across apps."""
    if isinstance(source, CompiledSchema):
        return source
    try:
        return _compile_cached(source)
    except TypeError:  # unhashable annotated types
        return CompiledSchema(source)


@functools.lru_cache(maxsize=1024)
def _compile_cached(source: Any) -> CompiledSchema:
    return CompiledSchema(source)


def _type_adapter(source: Any) -> TypeAdapter[Any]:
    from pydantic import TypeAdapter

    return TypeAdapter(source)


def _describe(source: Any) -> str:
    return getattr(source, "__name__", None) or repr(source)


# What every store can keep: PostgreSQL's jsonb refuses NUL and lone surrogates (UTF-8 cannot
# encode them) and NaN; Python's json module recurses per level and stops printing integers
# past 4,300 digits. Values are checked against these limits where they enter a run, so that
# every store sees the same, storable values and a run ends with a code instead of a commit
# that fails again on every recovery.
MAX_JSON_DEPTH = 64
_MAX_INT_BITS = 14_000


def ensure_json(value: Any) -> None:
    """Raise ``TypeError`` unless ``value`` is plain JSON that every store can keep.

    Plain JSON is dict (string keys), list, str, int, float, bool and None; refused are
    NaN and infinities, NUL characters and lone surrogates (in keys too), integers over
    4,000 digits and nesting deeper than ``MAX_JSON_DEPTH``. The walk is iterative and
    linear in the size of the value; the message says where, never what the value is.
    """
    stack: list[tuple[Any, int, Any]] = [(value, 0, None)]
    while stack:
        item, depth, path = stack.pop()
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, str):
            if UNSTORABLE_TEXT.search(item) is not None:
                raise TypeError(f"{_where(path)}: text holds a NUL character or a lone surrogate")
        elif isinstance(item, int):
            if item.bit_length() > _MAX_INT_BITS:
                raise TypeError(f"{_where(path)}: integer too large")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise TypeError(f"{_where(path)}: JSON has no NaN or infinity")
        elif isinstance(item, dict | list):
            if depth >= MAX_JSON_DEPTH:
                raise TypeError(f"value: nested deeper than {MAX_JSON_DEPTH} levels")
            if isinstance(item, list):
                stack.extend((child, depth + 1, (path, index)) for index, child in enumerate(item))
                continue
            for key, child in item.items():
                if not isinstance(key, str):
                    raise TypeError(
                        f"{_where(path)}: JSON object keys must be strings, not "
                        f"{type(key).__name__}"
                    )
                if UNSTORABLE_TEXT.search(key) is not None:
                    raise TypeError(
                        f"{_where(path)}: a key holds a NUL character or a lone surrogate"
                    )
                stack.append((child, depth + 1, (path, key)))
        else:
            raise TypeError(f"{_where(path)}: {type(item).__name__} is not JSON")


def _where(path: Any) -> str:
    """``value[3][<key>]``: positions only, since keys can be data (even secrets)."""
    parts: list[str] = []
    while path is not None:
        path, key = path
        parts.append(f"[{key}]" if isinstance(key, int) else "[<key>]")
    return "value" + "".join(reversed(parts))
