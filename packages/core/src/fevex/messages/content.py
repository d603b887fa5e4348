"""Content parts: the pieces a message is made of.

Every part is a frozen dataclass with a ``type`` discriminator and a JSON form, so
messages cross stores and wires as plain JSON and are rebuilt only from these known shapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "ContentPart",
    "FilePart",
    "ImagePart",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "ToolResultPart",
    "content_part_from_json",
]


@dataclass(slots=True)
class TextPart:
    text: str
    type: Literal["text"] = "text"

    def to_json(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@dataclass(slots=True)
class ThinkingPart:
    """Model reasoning; ``signature`` is provider data some APIs need returned verbatim."""

    reasoning: str
    signature: str | None = None
    type: Literal["thinking"] = "thinking"

    def to_json(self) -> dict[str, Any]:
        return {"type": "thinking", "reasoning": self.reasoning, "signature": self.signature}


@dataclass(slots=True)
class ImagePart:
    """An image as base64 ``data`` or as a ``url``, with its media type."""

    media_type: str
    data: str | None = None
    url: str | None = None
    type: Literal["image"] = "image"

    def to_json(self) -> dict[str, Any]:
        return {"type": "image", "media_type": self.media_type, "data": self.data, "url": self.url}


@dataclass(slots=True)
class FilePart:
    """A file as base64 ``data`` or as a ``url``, with its media type and optional name."""

    media_type: str
    data: str | None = None
    url: str | None = None
    name: str | None = None
    type: Literal["file"] = "file"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "file",
            "media_type": self.media_type,
            "data": self.data,
            "url": self.url,
            "name": self.name,
        }


@dataclass(slots=True)
class ToolCallPart:
    id: str
    name: str
    input: Any
    type: Literal["tool-call"] = "tool-call"

    def to_json(self) -> dict[str, Any]:
        return {"type": "tool-call", "id": self.id, "name": self.name, "input": self.input}


@dataclass(slots=True)
class ToolResultPart:
    """A tool call's result: its JSON ``output``, and the images and files it returned
    beside it (``content``, from :class:`fevex.tools.ToolOutput`), in order."""

    id: str
    name: str
    output: Any
    is_error: bool = False
    content: tuple[ImagePart | FilePart, ...] = ()
    type: Literal["tool-result"] = "tool-result"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "type": "tool-result",
            "id": self.id,
            "name": self.name,
            "output": self.output,
            "is_error": self.is_error,
        }
        # Only when there is some: a result without media keeps the JSON (and so the
        # checkpoint signatures and cassettes) of earlier versions.
        if self.content:
            data["content"] = [part.to_json() for part in self.content]
        return data


ContentPart = TextPart | ThinkingPart | ImagePart | FilePart | ToolCallPart | ToolResultPart


def content_part_from_json(data: dict[str, Any]) -> ContentPart:
    """Rebuild a part from its JSON form; unknown types are rejected, never guessed."""
    kind = data.get("type")
    if kind == "text":
        return TextPart(text=str(data["text"]))
    if kind == "thinking":
        return ThinkingPart(reasoning=str(data["reasoning"]), signature=data.get("signature"))
    if kind == "image":
        return ImagePart(media_type=data["media_type"], data=data.get("data"), url=data.get("url"))
    if kind == "file":
        return FilePart(
            media_type=data["media_type"],
            data=data.get("data"),
            url=data.get("url"),
            name=data.get("name"),
        )
    if kind == "tool-call":
        return ToolCallPart(id=data["id"], name=data["name"], input=data.get("input"))
    if kind == "tool-result":
        return ToolResultPart(
            id=data["id"],
            name=data["name"],
            output=data.get("output"),
            is_error=bool(data.get("is_error", False)),
            content=tuple(_media_part(item) for item in data.get("content") or ()),
        )
    raise ValueError(f"unknown content part type {kind!r}")


def _media_part(data: dict[str, Any]) -> ImagePart | FilePart:
    part = content_part_from_json(data)
    if not isinstance(part, ImagePart | FilePart):
        raise ValueError(f"a tool result carries image and file parts, not {part.type!r}")
    return part
