"""A server's resources as two read-only tools the app may allow: ``resources_list`` and
``resources_read``.

Both return data, like any tool output: the core hands it to the model as a tool result,
never as instructions. Only resources the server listed (and whose pin holds) can be
read, so a model cannot make the server read a URI of its choosing; resource templates
are not offered. What a read returns is bounded: text beyond ``max_resource_chars`` in
all is cut (``"truncated": true``), and binary content becomes a placeholder with its
MIME type and size.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from fevex.tools import RemoteTool
from fevex_mcp.pins import Pins

__all__ = [
    "RESOURCES_LIST",
    "RESOURCES_READ",
    "RESOURCE_TOOL_NAMES",
    "Listed",
    "list_value",
    "listed",
    "read_value",
    "resource_tools",
]

RESOURCES_LIST = "resources_list"
RESOURCES_READ = "resources_read"
RESOURCE_TOOL_NAMES = frozenset({RESOURCES_LIST, RESOURCES_READ})
MAX_TEXT_FIELD = 1024

Listed = tuple[dict[str, Any], list[str]]


def resource_tools() -> list[RemoteTool]:
    read_only = {"readOnlyHint": True, "destructiveHint": False}
    return [
        RemoteTool(
            name=RESOURCES_LIST,
            description="List the resources this server offers (URI, name, MIME type).",
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            annotations=read_only,
        ),
        RemoteTool(
            name=RESOURCES_READ,
            description="Read one resource the server listed, by its URI.",
            input_schema={
                "type": "object",
                "properties": {"uri": {"type": "string", "minLength": 1, "maxLength": 2048}},
                "required": ["uri"],
                "additionalProperties": False,
            },
            annotations=read_only,
        ),
    ]


def listed(resources: list[Any], pins: Pins) -> Listed:
    """The resources whose pin holds, by URI, and the URIs withheld because they changed."""
    available: dict[str, Any] = {}
    withheld: list[str] = []
    for resource in resources:
        uri = str(resource.uri)
        if pins.holds(uri, {"name": resource.name, "mime_type": resource.mime_type}):
            available[uri] = resource
        else:
            withheld.append(uri)
    return available, withheld


def list_value(available: dict[str, Any], withheld: list[str]) -> dict[str, Any]:
    return {
        "resources": [
            {
                "uri": uri,
                "name": _bounded(resource.name),
                "description": _bounded(resource.description or ""),
                "mime_type": resource.mime_type,
            }
            for uri, resource in available.items()
        ],
        "withheld_changed": withheld,
    }


def read_value(uri: str, contents: list[Any], max_chars: int) -> dict[str, Any]:
    """The JSON value of a read: each content's text, bounded in all, or a placeholder."""
    left = max_chars
    truncated = False
    parts: list[dict[str, Any]] = []
    for content in contents:
        part: dict[str, Any] = {"uri": str(content.uri), "mime_type": content.mime_type}
        text = getattr(content, "text", None)
        if isinstance(text, str):
            if len(text) > left:
                text, truncated = text[:left], True
            left -= len(text)
            part["text"] = text
        else:
            part["text"] = f"[binary content omitted: {_size(getattr(content, 'blob', ''))} bytes]"
        parts.append(part)
    return {"uri": uri, "contents": parts, "truncated": truncated}


def _size(blob: object) -> int:
    if not isinstance(blob, str):
        return 0
    try:
        return len(base64.b64decode(blob, validate=False))
    except (binascii.Error, ValueError):
        return len(blob)


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_TEXT_FIELD else text[: MAX_TEXT_FIELD - 1] + "…"
