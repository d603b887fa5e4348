"""A server's resources as three read-only tools the app may allow: ``resources_list``,
``resources_templates`` and ``resources_read``.

All return data, like any tool output: the core hands it to the model as a tool result,
never as instructions. Only a resource the server listed, or a URI that matches one of
the resource templates it listed (RFC 6570, matched by the SDK's non-backtracking
matcher), can be read, and only while its pin holds: a model chooses a template's values,
never a URI the server did not offer. What a read returns is bounded: text beyond
``max_resource_chars`` in all is cut (``"truncated": true``), and binary content becomes a
placeholder with its MIME type and size.
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
    "RESOURCES_TEMPLATES",
    "RESOURCE_TOOL_NAMES",
    "Listed",
    "list_value",
    "listed",
    "matching_template",
    "read_value",
    "resource_tools",
    "templates_value",
]

RESOURCES_LIST = "resources_list"
RESOURCES_READ = "resources_read"
RESOURCES_TEMPLATES = "resources_templates"
RESOURCE_TOOL_NAMES = frozenset({RESOURCES_LIST, RESOURCES_READ, RESOURCES_TEMPLATES})
MAX_TEXT_FIELD = 1024
MAX_URI_CHARS = 2048

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
            name=RESOURCES_TEMPLATES,
            description=(
                "List the resource templates this server offers (RFC 6570 URI template, "
                "name, MIME type); read a resource by a URI built from one."
            ),
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            annotations=read_only,
        ),
        RemoteTool(
            name=RESOURCES_READ,
            description=(
                "Read one resource the server listed, or one a listed template describes, "
                "by its URI."
            ),
            input_schema={
                "type": "object",
                "properties": {"uri": {"type": "string", "minLength": 1, "maxLength": 2048}},
                "required": ["uri"],
                "additionalProperties": False,
            },
            annotations=read_only,
        ),
    ]


def listed(items: list[Any], pins: Pins, key: str = "uri") -> Listed:
    """The items whose pin (name and MIME type) holds, by their ``key`` attribute (a
    resource's ``uri``, a template's ``uri_template``), and the keys withheld because the
    item changed."""
    available: dict[str, Any] = {}
    withheld: list[str] = []
    for item in items:
        named = str(getattr(item, key))
        if pins.holds(named, {"name": item.name, "mime_type": item.mime_type}):
            available[named] = item
        else:
            withheld.append(named)
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


def templates_value(available: dict[str, Any], withheld: list[str]) -> dict[str, Any]:
    return {
        "resource_templates": [
            {
                "uri_template": _bounded(key),
                "name": _bounded(template.name),
                "description": _bounded(template.description or ""),
                "mime_type": template.mime_type,
            }
            for key, template in available.items()
        ],
        "withheld_changed": [_bounded(key) for key in withheld],
    }


def matching_template(uri: str, available: dict[str, Any]) -> str | None:
    """The first listed template ``uri`` matches; a template the SDK cannot parse (or
    longer than ``MAX_URI_CHARS``) matches nothing."""
    from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

    if len(uri) > MAX_URI_CHARS:
        return None
    for key in available:
        if len(key) > MAX_URI_CHARS:
            continue
        try:
            template = UriTemplate.parse(key)
        except (InvalidUriTemplate, ValueError):
            continue
        if template.match(uri, max_uri_length=MAX_URI_CHARS) is not None:
            return key
    return None


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
