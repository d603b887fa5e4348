"""What one MCP session knows of the server's lists (tools, resources, prompts): the ones
the server promises to notify changes of, the copies kept until such a change, and
whether the tools changed since the run last asked.

Servers on handshake-era protocols send ``notifications/*/list_changed`` (the session's
``message_handler``, :meth:`ListWatch.notice`); 2026-07-28 servers send change events on
a ``subscriptions/listen`` stream only (:meth:`ListWatch.watch`). Either way
:meth:`ListWatch.changed` drops the kept copy, so the next listing reads the server
again, and marks the kind changed, which the provider reports to the core
(``tools_changed``) so that a running agent discovers its tools again before its next
model step. A list the server does not promise to notify is never kept.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp import Client, MCPError
from mcp.client import IncomingMessage
from mcp.client.subscriptions import (
    ListenNotSupportedError,
    PromptsListChanged,
    ResourcesListChanged,
    Subscription,
    SubscriptionLost,
    ToolsListChanged,
)
from mcp.types import (
    PromptListChangedNotification,
    ResourceListChangedNotification,
    ServerCapabilities,
    ToolListChangedNotification,
)

from fevex_mcp.operations import Kind

__all__ = ["ListWatch"]

_EVENTS: dict[type[Any], Kind] = {
    ToolsListChanged: "tools",
    ResourcesListChanged: "resources",
    PromptsListChanged: "prompts",
}
_NOTIFICATIONS: dict[type[Any], Kind] = {
    ToolListChangedNotification: "tools",
    ResourceListChangedNotification: "resources",
    PromptListChangedNotification: "prompts",
}


class ListWatch:
    """The lists of one session: ``lists`` holds the kept copies, ``watched`` the kinds
    the server notifies changes of."""

    def __init__(self) -> None:
        self.lists: dict[Kind, list[Any]] = {}
        self.watched: set[Kind] = set()
        self._changes: dict[Kind, int] = {}
        self._unreported: set[Kind] = set()

    def changed(self, kind: Kind) -> None:
        self._changes[kind] = self._changes.get(kind, 0) + 1
        self._unreported.add(kind)
        self.lists.pop(kind, None)

    def changes(self, kind: Kind) -> int:
        """How many changes of ``kind`` were notified so far."""
        return self._changes.get(kind, 0)

    def keep(self, kind: Kind, items: list[Any], seen: int) -> None:
        """Keep ``items``, listed when ``seen`` changes had been notified, unless one came
        while the request was under way (its answer is stale) or nothing would say when
        the copy goes stale."""
        if self._changes.get(kind, 0) == seen and kind in self.watched:
            self.lists[kind] = items

    def take_change(self, kind: Kind) -> bool:
        """Whether ``kind`` changed since this was last asked."""
        if kind in self._unreported:
            self._unreported.discard(kind)
            return True
        return False

    async def notice(self, message: IncomingMessage) -> None:
        """The session's ``message_handler``: a handshake-era change notification."""
        kind = _NOTIFICATIONS.get(type(message))
        if kind is not None:
            self.changed(kind)

    @contextlib.asynccontextmanager
    async def watch(self, client: Client) -> AsyncIterator[None]:
        """While the context is open, follow the changes of the lists the server declares
        ``listChanged`` for, on a listen stream when the server has one."""
        declared = {kind for kind in _NOTIFICATIONS.values() if _declares(client, kind)}
        async with contextlib.AsyncExitStack() as stack:
            subscription: Subscription | None = None
            if declared:
                try:
                    subscription = await stack.enter_async_context(
                        client.listen(
                            tools_list_changed="tools" in declared,
                            resources_list_changed="resources" in declared,
                            prompts_list_changed="prompts" in declared,
                        )
                    )
                except ListenNotSupportedError:
                    pass  # a handshake-era server: its notifications reach `notice`
                except (SubscriptionLost, MCPError, TimeoutError):
                    declared = set()
                else:
                    # Only what the server agreed to notify can be kept.
                    honored = subscription.honored
                    declared = {
                        kind
                        for kind in declared
                        if getattr(honored, f"{kind}_list_changed", None) is True
                    }
            self.watched = declared
            async with anyio.create_task_group() as followers:
                if subscription is not None:
                    followers.start_soon(self._follow, subscription)
                try:
                    yield
                finally:
                    followers.cancel_scope.cancel()

    async def _follow(self, subscription: Subscription) -> None:
        """Mark each change the stream reports; if the stream is lost, keep no list any
        more (nothing would say when it goes stale) and report every kind changed."""
        try:
            async for event in subscription:
                kind = _EVENTS.get(type(event))
                if kind is not None:
                    self.changed(kind)
        except (SubscriptionLost, MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        lost, self.watched = self.watched, set()
        for kind in lost:
            self.changed(kind)


def _declares(client: Client, kind: Kind) -> bool:
    capabilities: ServerCapabilities = client.server_capabilities
    declared = getattr(capabilities, kind, None)
    return bool(getattr(declared, "list_changed", False))
