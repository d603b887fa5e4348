"""A tool result as the JSON value fevex hands to the model, with its media, or a safe
error.

The value is the result's ``structuredContent`` when the server sent one, otherwise its
text: one string for one text, a list of strings for several (embedded text resources and
placeholders count as texts; see :mod:`fevex_mcp.media`). Images, audio and embedded
blobs go to the model beside the value, as the image and file parts of a
:class:`~fevex.tools.ToolOutput`. A result with ``isError`` becomes ``MCP_TOOL_ERROR``,
whose message carries at most a bounded, labelled excerpt of what the server said.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from fevex.tools import ToolOutput
from fevex_mcp.errors import TOOL_ERROR, remote_excerpt, run_error
from fevex_mcp.media import result_content

if TYPE_CHECKING:
    from mcp.types import CallToolResult

__all__ = ["block_text", "result_value"]


# What an embedded text resource may hold, in all, when the provider names no bound.
MAX_EMBEDDED_TEXT_CHARS = 100_000


def result_value(
    result: CallToolResult,
    tool_name: str,
    secrets: Iterable[str],
    max_text_chars: int = MAX_EMBEDDED_TEXT_CHARS,
) -> Any:
    """The JSON value of ``result`` for the tool fevex calls ``tool_name``, as a
    :class:`~fevex.tools.ToolOutput` when it carries images, audio or files;
    ``max_text_chars`` bounds its embedded text resources in all."""
    if result.is_error:
        message = _error_message(result, tool_name, secrets)
        # What the server said may hold a secret it echoed, and error reporters read the
        # locals of the frames an error passed through.
        del result
        raise run_error(TOOL_ERROR, message, tool_name=tool_name)
    content = result_content(result.content, tool_name, max_text_chars)
    texts = content.texts
    value: Any = texts[0] if len(texts) == 1 else texts
    if result.structured_content is not None:
        value = result.structured_content
    elif not texts and content.parts:
        value = ""  # media only: the parts say it all
    return ToolOutput(value, tuple(content.parts)) if content.parts else value


def _error_message(result: CallToolResult, tool_name: str, secrets: Iterable[str]) -> str:
    texts = (block_text(block) for block in result.content)
    said = next((text for text in texts if text.strip()), "")
    return f"Tool {tool_name} reported an error. {remote_excerpt(said, secrets)}"


def block_text(block: Any) -> str:
    """A content block as text: its text, or a placeholder naming a kind that is not."""
    if getattr(block, "type", None) == "text":
        return str(block.text)
    kind = getattr(block, "type", None)
    if not (isinstance(kind, str) and kind.isidentifier()):
        kind = "unknown"
    return f"[{kind} content omitted]"
