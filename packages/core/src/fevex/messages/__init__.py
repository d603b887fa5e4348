from fevex.messages.content import (
    ContentPart,
    FilePart,
    ImagePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    content_part_from_json,
)
from fevex.messages.message import Message, Role, message_from_json

__all__ = [
    "ContentPart",
    "FilePart",
    "ImagePart",
    "Message",
    "Role",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "ToolResultPart",
    "content_part_from_json",
    "message_from_json",
]
