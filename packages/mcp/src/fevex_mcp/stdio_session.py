"""One long-lived stdio server for a provider: started on first use, shared by every
discovery and call, restarted after a crash, stopped (with its process group) on close.

A stdio server is a process the app starts; starting it for every operation, as the
HTTP transport opens a session, would cost a process start per tool call and lose the
server's state between calls. So the process and its session live in one task of their
own (anyio cancel scopes must be left by the task that entered them); operations from
any task send their requests over that session.

Failures get stable codes: the process cannot be started or exits before the handshake
(``MCP_STARTUP_FAILED``), the handshake takes longer than ``startup_timeout``
(``MCP_STARTUP_TIMEOUT``, the group is killed), the process exits or closes its output
while an operation waits (``MCP_SERVER_EXITED``; the next operation starts it again), a
request takes longer than ``call_timeout`` (``MCP_CALL_TIMEOUT``; the SDK sends the
server a cancellation and the session stays up). A caller that is cancelled (a run
cancelled, the connection's timeout) abandons only its own request.

The lists the server declares ``listChanged`` for are kept between operations and
dropped when its ``notifications/*/list_changed`` arrives, so the next discovery reads
them again; the pinning rules (the core's for tools, the provider's for resources and
prompts) then apply to the fresh list.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

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

from fevex.errors import FevexError
from fevex_mcp.command import StdioCommand
from fevex_mcp.errors import (
    CALL_TIMEOUT,
    PROTOCOL_ERROR,
    SERVER_EXITED,
    STARTUP_FAILED,
    STARTUP_TIMEOUT,
    remote_excerpt,
    run_error,
)
from fevex_mcp.failures import translate
from fevex_mcp.operations import CLIENT_INFO, Kind, list_all
from fevex_mcp.stdio_transport import (
    EXIT_GRACE,
    MAX_MESSAGE_BYTES,
    ProcessRecord,
    kill_group,
    stdio_streams,
)

__all__ = ["StdioServer"]

T = TypeVar("T")

_EVENTS: dict[type[Any], Kind] = {
    ToolsListChanged: "tools",
    ResourcesListChanged: "resources",
    PromptsListChanged: "prompts",
}
_CHANGED: dict[type[Any], Kind] = {
    ToolListChangedNotification: "tools",
    ResourceListChangedNotification: "resources",
    PromptListChangedNotification: "prompts",
}


@dataclass(eq=False)
class _Live:
    """One run of the server process: its session once the handshake is done."""

    record: ProcessRecord = field(default_factory=ProcessRecord)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    client: Client | None = None
    failure: FevexError | None = None
    lists: dict[Kind, list[Any]] = field(default_factory=dict)
    changes: dict[Kind, int] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None
    finalizer: weakref.finalize[Any, Any] | None = None

    watched: set[Kind] = field(default_factory=set)

    def changed(self, kind: Kind) -> None:
        self.changes[kind] = self.changes.get(kind, 0) + 1
        self.lists.pop(kind, None)

    @property
    def running(self) -> bool:
        return self.client is not None and not self.finished.is_set()


class StdioServer:
    """The process behind one stdio provider."""

    def __init__(self, command: StdioCommand, options: Mapping[str, Any] | None = None) -> None:
        self.command = command
        # The SDK Client's keywords for what the provider offers (client_features.py).
        self._options = dict(options or {})
        self.where = f"{command.display!r} (stdio)"
        self._live: _Live | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._starting = asyncio.Lock()
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    async def run(self, operation: Callable[[Client], Awaitable[T]]) -> T:
        """Run ``operation`` on the live session, starting the server if needed."""
        live = await self._ready()
        assert live.client is not None
        try:
            if self.command.call_timeout is None:
                return await operation(live.client)
            with anyio.fail_after(self.command.call_timeout):
                return await operation(live.client)
        except TimeoutError:
            if live.finished.is_set():
                raise self._exited(live) from None
            raise run_error(
                CALL_TIMEOUT,
                f"The MCP server {self.where} did not answer within "
                f"{self.command.call_timeout} s; the request was cancelled at the server.",
                recoverable=True,
            ) from None
        except FevexError:
            raise
        except Exception as error:
            if live.record.ended.is_set() or live.scope.cancel_called:
                # The exit status and stderr are known once the owner has stopped it.
                with anyio.move_on_after(EXIT_GRACE + 1.0):
                    await asyncio.shield(live.finished.wait())
                raise self._exited(live) from None
            raise translate(error, self.where, self.command.secrets) from None

    async def listing(self, kind: Kind) -> list[Any]:
        """The server's list of ``kind``: the one kept since the last change notification
        when the server declares ``listChanged`` for it, a fresh one otherwise."""

        async def fetch(client: Client) -> list[Any]:
            return await list_all(client, kind, self.where)

        live = await self._ready()
        if kind in live.lists:
            return list(live.lists[kind])
        seen = live.changes.get(kind, 0)
        items = await self.run(fetch)
        # A change notified while the request was under way makes its answer stale.
        if live.running and live.changes.get(kind, 0) == seen and kind in live.watched:
            live.lists[kind] = items
        return list(items)

    async def aclose(self) -> None:
        """Stop the server (stdin closed, then its whole process group terminated) and
        wait until it is gone. The provider may be used again: it starts a new one."""
        live = self._live
        self._live = None
        if live is None:
            return
        live.scope.cancel()
        if live.task is not None and asyncio.get_running_loop() is self._loop:
            await asyncio.shield(live.finished.wait())
        elif live.record.pid is not None:
            kill_group(live.record.pid)

    # -- the server's lifetime ---------------------------------------------------------

    async def _ready(self) -> _Live:
        loop = asyncio.get_running_loop()
        if self._lock_loop is not loop:
            # An asyncio lock belongs to the loop it was first used in.
            self._starting, self._lock_loop = asyncio.Lock(), loop
        async with self._starting:
            live = self._live
            if live is not None and self._loop is not loop:
                # The loop that owned the session is gone (a blocking twin's loop, a
                # test's): its task cannot run again, so its process is killed here.
                if self._loop is not None and not self._loop.is_closed():
                    raise run_error(
                        STARTUP_FAILED,
                        f"The MCP server {self.where} is running in another event loop; "
                        "use one stdio provider per event loop.",
                    )
                if live.record.pid is not None:
                    kill_group(live.record.pid)
                live = self._live = None
            if live is None or live.finished.is_set():
                live = self._live = _Live()
                self._loop = loop
                live.task = loop.create_task(self._own(live))
            # Shielded: a caller that gives up (its own timeout, a cancelled run) stops
            # waiting, and the start, bounded by startup_timeout, goes on for the next.
            await asyncio.shield(live.started.wait())
        if live.failure is not None:
            raise live.failure
        if not live.running:
            raise self._exited(live)
        return live

    async def _own(self, live: _Live) -> None:
        command = self.command

        async def notice(message: IncomingMessage) -> None:
            kind = _CHANGED.get(type(message))
            if kind is not None:
                live.changed(kind)

        refused: tuple[Exception, bool] | None = None
        try:
            with live.scope:
                live.scope.deadline = anyio.current_time() + command.startup_timeout
                try:
                    async with stdio_streams(command, live.record) as streams:
                        if live.record.pid is not None:
                            # Dropped or left running at exit: the group is still killed.
                            live.finalizer = weakref.finalize(self, kill_group, live.record.pid)
                        try:
                            async with Client(
                                _Transport(streams),
                                cache=None,
                                client_info=CLIENT_INFO,
                                message_handler=notice,
                                **self._options,
                            ) as client:
                                await self._serve(live, client)
                        except Exception as error:
                            if live.client is None:
                                # Whether it had exited, or refused the handshake while
                                # alive, is known only now; its exit status after the stop.
                                refused = (error, live.record.ended.is_set())
                    if refused is not None:
                        live.failure = self._start_failure(live, *refused)
                except OSError as error:
                    live.failure = run_error(
                        STARTUP_FAILED,
                        f"The MCP server {self.where} could not be started "
                        f"({type(error).__name__}: {error.strerror or 'failed'}). Check the "
                        "command, its PATH (env or inherit_env) and cwd.",
                    )
            if live.client is None and live.failure is None:
                live.failure = run_error(
                    STARTUP_TIMEOUT,
                    f"The MCP server {self.where} did not complete the MCP handshake within "
                    f"{command.startup_timeout} s; its process group was killed.",
                    recoverable=True,
                )
        finally:
            if live.finalizer is not None:
                live.finalizer.detach()
            live.finished.set()
            live.started.set()

    async def _serve(self, live: _Live, client: Client) -> None:
        """Watch the lists the server says it notifies changes of, mark the session
        started, and hold it until the process's output ends or the provider closes."""
        declared = {kind for kind in _CHANGED.values() if _declares_list_changed(client, kind)}
        async with contextlib.AsyncExitStack() as stack:
            subscription: Subscription | None = None
            if declared:
                # 2026-07-28 servers send change events on a listen stream only; earlier
                # ones send notifications, which `notice` sees (ListenNotSupportedError).
                try:
                    subscription = await stack.enter_async_context(
                        client.listen(
                            tools_list_changed="tools" in declared,
                            resources_list_changed="resources" in declared,
                            prompts_list_changed="prompts" in declared,
                        )
                    )
                except ListenNotSupportedError:
                    pass
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
            live.watched = declared
            live.scope.deadline = math.inf
            live.client = client
            live.started.set()
            async with anyio.create_task_group() as watchers:
                if subscription is not None:
                    watchers.start_soon(_follow, live, subscription)
                await live.record.ended.wait()
                watchers.cancel_scope.cancel()

    def _start_failure(self, live: _Live, error: Exception, exited: bool) -> FevexError:
        if live.record.oversized:
            return self._exited(live)
        if exited:
            return run_error(
                STARTUP_FAILED,
                f"The MCP server {self.where} exited before it was ready{self._how(live)}",
            )
        translated = translate(error, self.where, self.command.secrets)
        if isinstance(translated, FevexError):
            return translated
        return run_error(
            STARTUP_FAILED,
            f"The MCP server {self.where} failed its MCP handshake ({type(error).__name__}).",
        )

    def _exited(self, live: _Live) -> FevexError:
        if live.record.oversized:
            return run_error(
                PROTOCOL_ERROR,
                f"The MCP server {self.where} sent a message over {MAX_MESSAGE_BYTES} bytes; "
                "fevex stopped the server.",
            )
        return run_error(
            SERVER_EXITED,
            f"The MCP server {self.where} exited or closed its output while fevex waited "
            f"for it{self._how(live)} The next operation starts it again.",
            recoverable=True,
            returncode=live.record.returncode,
        )

    def _how(self, live: _Live) -> str:
        code = live.record.returncode
        status = "" if code is None else f" (exit status {code})"
        said = live.record.last_stderr_line()
        if not said:
            return f"{status}."
        return f"{status}. Its stderr ends with: {remote_excerpt(said, self.command.secrets)}"


class _Transport:
    """The SDK's ``Transport`` over streams that already exist: the process belongs to
    the owner task, not to the session."""

    def __init__(self, streams: Any) -> None:
        self._streams = streams

    async def __aenter__(self) -> Any:
        return self._streams

    async def __aexit__(self, *exc_info: object) -> None:
        return None


def _declares_list_changed(client: Client, kind: Kind) -> bool:
    capabilities: ServerCapabilities = client.server_capabilities
    declared = getattr(capabilities, kind, None)
    return bool(getattr(declared, "list_changed", False))


async def _follow(live: _Live, subscription: Subscription) -> None:
    """Drop a kept list when its change event arrives; if the stream is lost, keep no
    list any more (nothing would say when it goes stale)."""
    try:
        async for event in subscription:
            kind = _EVENTS.get(type(event))
            if kind is not None:
                live.changed(kind)
    except (SubscriptionLost, MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    live.watched = set()
    for kind in list(live.lists):
        live.changed(kind)
