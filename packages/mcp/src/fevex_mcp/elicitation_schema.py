"""What a server may ask in an elicitation, and what fevex-mcp sends back.

The server's message and requested schema are untrusted: the message is cleaned of
control characters and bounded; the schema must be MCP's restricted form (a flat object
whose properties are strings, numbers, integers, booleans, single-select enums or
multi-select string arrays), is bounded in size and fields, and is rebuilt from the
keywords that form allows, its texts cleaned. The content sent back (a handler's or a
person's) takes the schema's defaults for the fields it leaves out (SEP-1034), then must
match the schema: only its fields, each a value of its kind.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from fevex.schemas import JsonSchema
from fevex_mcp.errors import ELICITATION_CONTENT_INVALID, ELICITATION_INVALID, run_error

__all__ = [
    "MAX_FIELDS",
    "MAX_MESSAGE_CHARS",
    "MAX_SCHEMA_CHARS",
    "checked_content",
    "checked_schema",
    "clean_text",
]

MAX_MESSAGE_CHARS = 2_000
MAX_SCHEMA_CHARS = 20_000
MAX_FIELDS = 50
_MAX_NAME_CHARS = 100
_MAX_TEXT_CHARS = 500
_MAX_OPTIONS = 100
# As for remote tool descriptions: C0 controls but tab and newline, DEL, C1 controls and
# the bidirectional controls, each replaced by a space.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
_FORMATS = frozenset({"email", "uri", "date", "date-time"})
_BOUNDS = {
    "string": ("minLength", "maxLength"),
    "number": ("minimum", "maximum"),
    "integer": ("minimum", "maximum"),
    "boolean": (),
    "array": ("minItems", "maxItems"),
}


def clean_text(text: Any, limit: int = _MAX_TEXT_CHARS) -> str:
    """Remote text as data: NFKC-normalised, without control characters, at most
    ``limit`` characters."""
    if not isinstance(text, str):
        return ""
    clean = _CONTROL.sub(" ", unicodedata.normalize("NFKC", text[: limit * 4])).strip()
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


def checked_schema(schema: Any, where: str) -> dict[str, Any]:
    """The requested schema, rebuilt from what MCP's restricted form allows;
    ``MCP_ELICITATION_INVALID`` for anything else."""
    try:
        size = len(json.dumps(schema, allow_nan=False))
    except (TypeError, ValueError):
        raise _invalid(where, "it is not JSON") from None
    if size > MAX_SCHEMA_CHARS:
        raise _invalid(where, f"it is over {MAX_SCHEMA_CHARS} characters")
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise _invalid(where, "it is not an object schema")
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping) or len(properties) > MAX_FIELDS:
        raise _invalid(where, f"it needs at most {MAX_FIELDS} properties")
    rebuilt: dict[str, Any] = {}
    for name, described in properties.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise _invalid(where, "a property name is not a plain identifier")
        rebuilt[name] = _field(described, name, where)
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(item in rebuilt for item in required):
        raise _invalid(where, "'required' names a field it does not define")
    checked: dict[str, Any] = {
        "type": "object",
        "properties": rebuilt,
        "required": list(dict.fromkeys(required)),
        "additionalProperties": False,
    }
    try:
        JsonSchema(checked)
    except ValueError:
        raise _invalid(where, "it is not a JSON Schema fevex can check") from None
    return checked


def _field(described: Any, name: str, where: str) -> dict[str, Any]:
    if not isinstance(described, Mapping):
        raise _invalid(where, f"field {name!r} is not a schema")
    kind = described.get("type")
    if kind not in _BOUNDS:
        raise _invalid(where, f"field {name!r} is not a string, number, boolean or list")
    field: dict[str, Any] = {"type": kind}
    for key in ("title", "description"):
        if key in described:
            field[key] = clean_text(described[key])
    for key in _BOUNDS[kind]:
        value = described.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            field[key] = value
    if kind == "string":
        _string_options(described, field, name, where)
    if kind == "array":
        items = described.get("items")
        if not isinstance(items, Mapping):
            raise _invalid(where, f"field {name!r} lists no options")
        options: dict[str, Any] = {"type": "string"}
        _string_options(items, options, name, where)
        if "enum" not in options and "anyOf" not in options:
            raise _invalid(where, f"field {name!r} lists no options")
        field["items"] = options
    if "default" in described:
        field["default"] = _default(described["default"], kind, name, where)
    return field


def _string_options(
    described: Mapping[str, Any], field: dict[str, Any], name: str, where: str
) -> None:
    """A string's format, or its options: ``enum`` (with ``enumNames``), or ``oneOf`` /
    ``anyOf`` of ``{"const", "title"}``."""
    if described.get("format") in _FORMATS:
        field["format"] = described["format"]
    enum = described.get("enum")
    if enum is not None:
        if not isinstance(enum, list) or not enum or len(enum) > _MAX_OPTIONS:
            raise _invalid(where, f"field {name!r} has no usable options")
        field["enum"] = [_option(item, name, where) for item in enum]
        names = described.get("enumNames")
        if isinstance(names, list) and len(names) == len(enum):
            field["enumNames"] = [clean_text(item) for item in names]
    for key in ("oneOf", "anyOf"):
        listed = described.get(key)
        if listed is None:
            continue
        if not isinstance(listed, list) or not listed or len(listed) > _MAX_OPTIONS:
            raise _invalid(where, f"field {name!r} has no usable options")
        field[key] = [
            {
                "const": _option(item.get("const"), name, where),
                "title": clean_text(item.get("title")),
            }
            if isinstance(item, Mapping)
            else _option(None, name, where)
            for item in listed
        ]


def _option(value: Any, name: str, where: str) -> str:
    if not isinstance(value, str) or len(value) > _MAX_TEXT_CHARS or _CONTROL.search(value):
        raise _invalid(where, f"an option of field {name!r} is not plain text")
    return value


def _default(value: Any, kind: str, name: str, where: str) -> Any:
    expected: tuple[type, ...] = {
        "string": (str,),
        "number": (int, float),
        "integer": (int,),
        "boolean": (bool,),
        "array": (list,),
    }[kind]
    if (isinstance(value, bool) and kind != "boolean") or not isinstance(value, expected):
        raise _invalid(where, f"the default of field {name!r} is not a {kind}")
    return value


def checked_content(content: Any, schema: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``content`` with the schema's defaults for the fields it leaves out, once it
    matches ``schema``; ``MCP_ELICITATION_CONTENT_INVALID`` naming where it does not
    (never the values)."""
    if not isinstance(content, Mapping):
        raise _content_invalid(where, "the content is not a mapping of field values")
    filled = dict(content)
    for name, described in schema.get("properties", {}).items():
        if name not in filled and "default" in described:
            filled[name] = described["default"]
    try:
        JsonSchema(schema).validate(filled)
    except ValueError as error:
        raise _content_invalid(where, str(error)[:500]) from None
    return filled


def _invalid(where: str, why: str) -> Exception:
    return run_error(
        ELICITATION_INVALID,
        f"The MCP server {where} asked for input fevex-mcp does not accept ({why}); "
        "the request was refused and the tool call ended.",
    )


def _content_invalid(where: str, why: str) -> Exception:
    return run_error(
        ELICITATION_CONTENT_INVALID,
        f"The answer to the elicitation of the MCP server {where} does not match the "
        f"requested schema ({why}); the request was cancelled and the tool call ended.",
    )
