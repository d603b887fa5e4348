"""The content blocks of a tool result as what the model reads: text, and image and file
parts.

- ``text`` is passed on as it is.
- ``image`` becomes an :class:`~fevex.messages.ImagePart` when its media type is one of
  ``IMAGE_TYPES`` and its bytes are that format (PNG, JPEG, GIF or WebP signature);
  ``audio`` becomes a :class:`~fevex.messages.FilePart` when its type is one of
  ``AUDIO_TYPES``.
- An embedded ``resource`` with text becomes text headed by its URI (``[resource <uri>]``),
  bounded like a resource read (``max_resource_chars`` for all of a result's resources);
  one with a blob becomes an image part (an image type), a file part (an audio type or
  ``application/pdf``, named after the URI's last segment), or a placeholder.
- A ``resource_link`` becomes ``[resource link <uri>]``.

Any other kind or media type, and an image whose bytes are not its declared format, become
a labelled placeholder text (``"[image content omitted: image/svg+xml is not passed on]"``),
so the model sees that something was left out. What a hostile server can send is bounded:
data that is not strict base64 ends the call with ``MCP_CONTENT_INVALID``, and more than
:attr:`fevex.tools.ToolOutput.MAX_PARTS` media parts, a part over ``MAX_PART_BYTES`` or all
over ``MAX_BYTES`` with ``MCP_CONTENT_TOO_LARGE``, measured before anything is decoded.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fevex.messages import FilePart, ImagePart
from fevex.tools import ToolOutput
from fevex_mcp.errors import CONTENT_INVALID, CONTENT_TOO_LARGE, run_error

__all__ = ["AUDIO_TYPES", "FILE_TYPES", "IMAGE_TYPES", "ResultContent", "result_content"]

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
AUDIO_TYPES = frozenset(
    {
        "audio/wav",
        "audio/x-wav",
        "audio/wave",
        "audio/mpeg",
        "audio/mp3",
        "audio/mp4",
        "audio/aac",
        "audio/ogg",
        "audio/webm",
        "audio/flac",
    }
)
FILE_TYPES = AUDIO_TYPES | {"application/pdf"}
MAX_URI_CHARS = 2048
MAX_NAME_CHARS = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")
# Text no store keeps (NUL, lone surrogates): replaced, as the core would refuse it.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


@dataclass(slots=True)
class ResultContent:
    """A result's texts and media parts, in the order the server sent them."""

    texts: list[str] = field(default_factory=list)
    parts: list[ImagePart | FilePart] = field(default_factory=list)
    text_left: int = 0
    bytes_left: int = ToolOutput.MAX_BYTES


def result_content(blocks: Iterable[Any], tool_name: str, max_text_chars: int) -> ResultContent:
    """The texts and parts of ``blocks`` (a ``CallToolResult``'s content)."""
    content = ResultContent(text_left=max_text_chars)
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            content.texts.append(str(block.text))
        elif kind == "image":
            _add_image(content, block.data, _media_type(block.mime_type), tool_name)
        elif kind == "audio":
            media_type = _media_type(block.mime_type)
            if media_type in AUDIO_TYPES:
                _add_file(content, block.data, media_type, None, tool_name)
            else:
                content.texts.append(_omitted("audio", media_type))
        elif kind == "resource":
            _add_resource(content, block.resource, tool_name)
        elif kind == "resource_link":
            content.texts.append(f"[resource link {_clean_uri(block.uri)}]")
        else:
            label = kind if isinstance(kind, str) and kind.isidentifier() else "unknown"
            content.texts.append(f"[{label} content omitted]")
    return content


def _add_resource(content: ResultContent, resource: Any, tool_name: str) -> None:
    uri = _clean_uri(resource.uri)
    text = getattr(resource, "text", None)
    if isinstance(text, str):
        if len(text) > content.text_left:
            text = text[: content.text_left] + "\n[truncated]"
        content.text_left = max(content.text_left - len(text), 0)
        text = _UNSTORABLE.sub("\ufffd", text)
        content.texts.append(f"[resource {uri}]\n{text}")
        return
    blob = getattr(resource, "blob", None)
    media_type = _media_type(resource.mime_type or "application/octet-stream")
    if media_type in IMAGE_TYPES:
        _add_image(content, blob, media_type, tool_name)
    elif media_type in FILE_TYPES:
        _add_file(content, blob, media_type, _file_name(uri), tool_name)
    else:
        content.texts.append(f"[resource {uri}: {media_type} content omitted]")


def _add_image(content: ResultContent, data: Any, media_type: str, tool_name: str) -> None:
    if media_type not in IMAGE_TYPES:
        content.texts.append(_omitted("image", media_type))
        return
    raw = _decoded(content, data, tool_name)
    if not _is_format(raw, media_type):
        content.texts.append(f"[image content omitted: the data is not {media_type}]")
        return
    content.parts.append(ImagePart(media_type, data=data))


def _add_file(
    content: ResultContent, data: Any, media_type: str, name: str | None, tool_name: str
) -> None:
    _decoded(content, data, tool_name)
    content.parts.append(FilePart(media_type, data=data, name=name))


def _decoded(content: ResultContent, data: Any, tool_name: str) -> bytes:
    """``data``'s bytes, within the bounds of one more part; the bounds and base64 are
    checked before the part is kept."""
    if len(content.parts) >= ToolOutput.MAX_PARTS:
        raise _too_large(tool_name, f"more than {ToolOutput.MAX_PARTS} images, audio or files")
    if not isinstance(data, str):
        raise _invalid(tool_name)
    # 4 characters per 3 bytes: a part over the bound is refused before any decoding.
    if len(data) > 4 * (-(-min(ToolOutput.MAX_PART_BYTES, content.bytes_left) // 3)):
        raise _too_large(
            tool_name,
            f"a part over {ToolOutput.MAX_PART_BYTES} bytes, or parts over "
            f"{ToolOutput.MAX_BYTES} bytes in all",
        )
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise _invalid(tool_name) from None
    if len(raw) > min(ToolOutput.MAX_PART_BYTES, content.bytes_left):
        raise _too_large(tool_name, f"a part over {ToolOutput.MAX_PART_BYTES} bytes")
    content.bytes_left -= len(raw)
    return raw


def _is_format(raw: bytes, media_type: str) -> bool:
    """Whether ``raw`` starts with the signature of the image format ``media_type``."""
    if media_type == "image/png":
        return raw.startswith(b"\x89PNG\r\n\x1a\n")
    if media_type == "image/jpeg":
        return raw.startswith(b"\xff\xd8\xff")
    if media_type == "image/gif":
        return raw[:6] in (b"GIF87a", b"GIF89a")
    return raw[:4] == b"RIFF" and raw[8:12] == b"WEBP"


def _media_type(value: Any) -> str:
    """A declared media type, lower case and without parameters, bounded."""
    text = str(value or "")[:200].split(";", 1)[0].strip().lower()
    return _CONTROL.sub("", text)[:100] or "unknown"


def _omitted(kind: str, media_type: str) -> str:
    return f"[{kind} content omitted: {media_type!r} is not passed on]"


def _clean_uri(uri: Any) -> str:
    """A URI the model reads: NFKC, without control or format characters (bidi
    overrides included), bounded."""
    text = unicodedata.normalize("NFKC", str(uri)[: MAX_URI_CHARS * 2])
    text = "".join(" " if unicodedata.category(c)[0] == "C" else c for c in text).strip()
    return text if len(text) <= MAX_URI_CHARS else text[: MAX_URI_CHARS - 1] + "…"


def _file_name(uri: str) -> str | None:
    last = uri.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0].strip()
    return last[:MAX_NAME_CHARS] or None


def _invalid(tool_name: str) -> Exception:
    return run_error(
        CONTENT_INVALID,
        f"Tool {tool_name} returned image, audio or file data that is not valid base64.",
        tool_name=tool_name,
    )


def _too_large(tool_name: str, what: str) -> Exception:
    return run_error(
        CONTENT_TOO_LARGE,
        f"Tool {tool_name} returned more media than fevex passes on: {what}.",
        tool_name=tool_name,
    )
