"""What a tool returns when its result carries images or files beside its JSON value.

A tool returns :class:`ToolOutput` instead of a plain value to hand the model media parts
with it: the value is validated as any output (the tool's output schema, JSON), and the
parts ride on the call's :class:`~fevex.messages.ToolResultPart` as its ``content``. They
are kept as plain JSON, with the rest of the tool result, in the run's checkpoint and in
the session's history, so they are bounded: at most ``ToolOutput.MAX_PARTS`` parts, each
at most ``ToolOutput.MAX_PART_BYTES`` bytes once decoded, and ``ToolOutput.MAX_BYTES`` for
all of a result's parts. A part holds strict base64 ``data`` or an ``http``/``https``
``url``, and a media type (``type/subtype``; an image's is ``image/...``); anything else
fails the call with ``TOOL_OUTPUT_INVALID``, and nothing of it reaches the model or a store.
Events do not repeat the data: ``tool.completed`` lists each part's type, media type,
name and size (its ``content``).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fevex.messages import FilePart, ImagePart

__all__ = ["ToolOutput", "checked_media", "media_summary"]

_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
MAX_URL_CHARS = 2048
MAX_NAME_CHARS = 255


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A tool's ``value`` (its JSON output, as the tool would return it alone) and the
    image and file ``parts`` that go to the model with it, in order."""

    value: Any
    # Any sequence; kept as a tuple.
    parts: Sequence[ImagePart | FilePart] = field(default=())

    MAX_PARTS: ClassVar[int] = 8
    MAX_PART_BYTES: ClassVar[int] = 5 * 1024 * 1024
    MAX_BYTES: ClassVar[int] = 10 * 1024 * 1024

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", tuple(self.parts))


def checked_media(parts: Iterable[Any]) -> tuple[ImagePart | FilePart, ...]:
    """``parts`` as a tool result's content, or ``ValueError`` saying which bound or rule
    one breaks (never quoting its data)."""
    checked: list[ImagePart | FilePart] = []
    total = 0
    for index, part in enumerate(parts):
        if index >= ToolOutput.MAX_PARTS:
            raise ValueError(f"more than {ToolOutput.MAX_PARTS} media parts")
        if not isinstance(part, ImagePart | FilePart):
            raise ValueError(f"part {index} is a {type(part).__name__}, not an image or a file")
        where = f"part {index} ({part.type})"
        media_type = part.media_type
        if not (isinstance(media_type, str) and _MEDIA_TYPE.fullmatch(media_type)):
            raise ValueError(f"{where} has no valid media type (type/subtype, lower case)")
        if isinstance(part, ImagePart) and not media_type.startswith("image/"):
            raise ValueError(f"{where} has media type {media_type}, not an image type")
        total += _checked_source(part, where)
        if total > ToolOutput.MAX_BYTES:
            raise ValueError(f"the media parts exceed {ToolOutput.MAX_BYTES} bytes in all")
        if isinstance(part, FilePart):
            name = part.name
            if name is not None and not (
                isinstance(name, str) and len(name) <= MAX_NAME_CHARS and not _CONTROL.search(name)
            ):
                raise ValueError(f"{where} has a name that is not short printable text")
            checked.append(FilePart(media_type, part.data, part.url, name))
        else:
            checked.append(ImagePart(media_type, part.data, part.url))
    return tuple(checked)


def _checked_source(part: ImagePart | FilePart, where: str) -> int:
    """The decoded size of the part's data (0 for a URL)."""
    if (part.data is None) == (part.url is None):
        raise ValueError(f"{where} must have either base64 data or a url")
    if part.url is not None:
        url = part.url
        if not (
            isinstance(url, str)
            and len(url) <= MAX_URL_CHARS
            and url.lower().startswith(("https://", "http://"))
            and not _CONTROL.search(url)
            and " " not in url
        ):
            raise ValueError(f"{where} has a url that is not a short http(s) URL")
        return 0
    data = part.data
    if not isinstance(data, str):
        raise ValueError(f"{where} has data that is not base64 text")
    # Measured before decoding: a part far over the bound costs no decode.
    if len(data) > 4 * (-(-ToolOutput.MAX_PART_BYTES // 3)):
        raise ValueError(f"{where} exceeds {ToolOutput.MAX_PART_BYTES} bytes")
    try:
        size = len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        raise ValueError(f"{where} has data that is not valid base64") from None
    if size > ToolOutput.MAX_PART_BYTES:
        raise ValueError(f"{where} exceeds {ToolOutput.MAX_PART_BYTES} bytes")
    return size


def media_summary(parts: Iterable[ImagePart | FilePart]) -> list[dict[str, Any]]:
    """What events say of a result's media: each part's type, media type, name and size
    (decoded bytes, or ``None`` for a URL), never its data."""
    summary: list[dict[str, Any]] = []
    for part in parts:
        item: dict[str, Any] = {"type": part.type, "media_type": part.media_type}
        if isinstance(part, FilePart) and part.name is not None:
            item["name"] = part.name
        item["bytes"] = None if part.data is None else _decoded_size(part.data)
        summary.append(item)
    return summary


def _decoded_size(data: str) -> int:
    return len(data) * 3 // 4 - data[-2:].count("=")
