"""First-seen pins for what a server lists besides tools: its resources and prompts.

The core pins each remote tool's input schema the first time an app sees it and refuses
a tool whose schema later differs (``TOOL_SCHEMA_CHANGED``). A provider applies the same
rule to resources (a URI's name and MIME type) and prompts (a prompt's arguments): the
first listing pins each item, a new item is pinned when it first appears, and an item
whose pinned description changed is withheld and refused (``MCP_RESOURCE_CHANGED``,
``MCP_PROMPT_CHANGED``) until the app is restarted with a new provider. A server cannot
turn a resource the app reviewed into another kind of thing under the same name.
"""

from __future__ import annotations

from typing import Any

from fevex.schemas import json_digest

__all__ = ["Pins"]


class Pins:
    """The digest each item had when this provider first saw it (the core's one digest of a
    JSON value, which pins remote tool schemas too)."""

    def __init__(self) -> None:
        self._first: dict[str, str] = {}

    def holds(self, key: str, value: Any) -> bool:
        """Whether ``value`` is what ``key`` was first seen as (pinning it if new)."""
        seen = json_digest(value)
        return self._first.setdefault(key, seen) == seen
