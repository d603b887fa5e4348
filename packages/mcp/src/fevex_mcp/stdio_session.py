"""One stdio server process and its MCP session: started on first use, shared by every
discovery and call of the run it serves (:mod:`fevex_mcp.channels` holds one per run),
restarted after a crash, stopped (with its process group) on close.

The process and its session live in one task of their own (anyio cancel scopes must be
left by the task that entered them); operations from any task send their requests over
that session.

Failures get stable codes: the process cannot be started or exits before the handshake
(``MCP_STARTUP_FAILED``), the handshake takes longer than ``startup_timeout``
(``MCP_STARTUP_TIMEOUT``, the group is killed), the process exits or closes its output
while an operation waits (``MCP_SERVER_EXITED``; the next operation starts it again), a
request takes longer than ``call_timeout`` (``MCP_CALL_TIMEOUT``; the SDK sends the
server a cancellation and the session stays up). A caller that is cancelled (a run
cancelled, the connection's timeout) abandons only its own request.

The lists the server declares ``listChanged`` for are kept between operations of the
run and dropped when the server says one changed (:mod:`fevex_mcp.list_changes`), so the
next discovery reads it again; the pinning rules (the core's for tools, the provider's
for resources and prompts) then apply to the fresh list.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
from mcp import Client

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
from fevex_mcp.list_changes import ListWatch
from fevex_mcp.notifications import SessionNotices
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


@dataclass(eq=False)
class _Live:
    """One run of the server process: its session once the handshake is done."""

    record: ProcessRecord = field(default_factory=ProcessRecord)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    client: Client | None = None
    failure: FevexError | None = None
    lists: ListWatch = field(default_factory=ListWatch)
    task: asyncio.Task[None] | None = None
    finalizer: weakref.finalize[Any, Any] | None = None

    @property
    def running(self) -> bool:
        return self.client is not None and not self.finished.is_set()


class StdioServer:
    """The process behind one run of a stdio provider."""

    def __init__(
        self, command: StdioCommand, client_options: Mapping[str, Any] | None = None
    ) -> None:
        self.command = command
        # What the SDK's Client is given besides the transport (the client's callbacks).
        self._client_options = dict(client_options or {})
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
        if kind in live.lists.lists:
            return list(live.lists.lists[kind])
        seen = live.lists.changes(kind)
        items = await self.run(fetch)
        if live.running:
            live.lists.keep(kind, items, seen)
        return list(items)

    def tools_changed(self) -> bool:
        """Whether the server said its tools changed since this was last asked."""
        live = self._live
        return live is not None and live.lists.take_change("tools")

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

        refused: tuple[Exception, bool] | None = None
        try:
            with live.scope:
                live.scope.deadline = anyio.current_time() + command.startup_timeout
                try:
                    async with stdio_streams(command, live.record) as streams:
                        if live.record.pid is not None:
                            # Dropped or left running at exit: the group is still killed.
                            live.finalizer = weakref.finalize(self, kill_group, live.record.pid)
                        notices = SessionNotices(command.secrets)
                        try:
                            async with Client(
                                _Transport(streams),
                                cache=None,
                                client_info=CLIENT_INFO,
                                message_handler=live.lists.notice,
                                **self._client_options,
                                **notices.callbacks,
                            ) as client:
                                notices.attach(client)
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
        async with live.lists.watch(client):
            live.scope.deadline = math.inf
            live.client = client
            live.started.set()
            await live.record.ended.wait()

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
