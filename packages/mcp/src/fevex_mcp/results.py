"""A tool result as the JSON value fevex hands to the model, or a safe error.

The value is the result's ``structuredContent`` when the server sent one, otherwise its
text: one string for one content block, a list of strings for several. Content fevex
does not pass on (images, audio, resources) is replaced by a labelled placeholder rather
than dropped without a trace. A result with ``isError`` becomes ``MCP_TOOL_ERROR``,
whose message carries at most a bounded, labelled excerpt of what the server said.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from fevex_mcp.errors import TOOL_ERROR, remote_excerpt, run_error

if TYPE_CHECKING:
    from mcp.types import CallToolResult

__all__ = ["block_text", "result_value"]


def result_value(result: CallToolResult, tool_name: str, secrets: Iterable[str]) -> Any:
    """The JSON value of ``result`` for the tool fevex calls ``tool_name``."""
    if result.is_error:
        message = _error_message(result, tool_name, secrets)
        # What the server said may hold a secret it echoed, and error reporters read the
        # locals of the frames an error passed through.
        del result
        raise run_error(TOOL_ERROR, message, tool_name=tool_name)
    texts = [block_text(block) for block in result.content]
    if result.structured_content is not None:
        return result.structured_content
    if len(texts) == 1:
        return texts[0]
    return texts


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
