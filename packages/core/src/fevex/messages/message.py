"""Messages: a role and an ordered tuple of content parts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from fevex.messages.content import (
    ContentPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    content_part_from_json,
)

__all__ = ["Message", "Role", "message_from_json"]

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(slots=True)
class Message:
    """One conversation message.

    ``system`` and ``user`` messages carry text, image and file parts; ``assistant`` messages
    carry text, thinking and tool-call parts; ``tool`` messages carry tool-result parts.
    """

    role: Role
    content: tuple[ContentPart, ...]

    @classmethod
    def system(cls, text: str) -> Message:
        return cls("system", (TextPart(text),))

    @classmethod
    def user(cls, content: str | Iterable[ContentPart]) -> Message:
        parts = (TextPart(content),) if isinstance(content, str) else tuple(content)
        return cls("user", parts)

    @classmethod
    def assistant(cls, content: str | Iterable[ContentPart]) -> Message:
        parts = (TextPart(content),) if isinstance(content, str) else tuple(content)
        return cls("assistant", parts)

    @property
    def text(self) -> str:
        """The concatenated text parts."""
        return "".join(part.text for part in self.content if isinstance(part, TextPart))

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        return tuple(part for part in self.content if isinstance(part, ToolCallPart))

    @property
    def tool_results(self) -> tuple[ToolResultPart, ...]:
        return tuple(part for part in self.content if isinstance(part, ToolResultPart))

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "content": [part.to_json() for part in self.content]}


_ROLES = frozenset(("system", "user", "assistant", "tool"))


def message_from_json(data: dict[str, Any]) -> Message:
    role = data.get("role")
    if role not in _ROLES:
        raise ValueError(f"unknown message role {role!r}")
    return Message(role, tuple(content_part_from_json(part) for part in data["content"]))
