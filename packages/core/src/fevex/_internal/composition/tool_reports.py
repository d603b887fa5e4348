"""What a running tool call reports through its :class:`~fevex.ToolContext`: progress, as
``tool.progress`` run events, and trace events, on the call's span.

A call may report as often as it likes (a remote server can send a progress notification
per item of a million): reporting only keeps the latest value and wakes the agent loop
once, from the loop's thread or a worker thread, and never waits. The loop runs the call
in a task of its own and, while it runs, commits a ``tool.progress`` event for the latest
report at most once per ``PROGRESS_INTERVAL`` seconds and at most ``MAX_PROGRESS_EVENTS``
times per call; a report superseded in between is never recorded. Each is committed at
once (also when nobody streams the run), so that the store shows a running call's
progress. Trace events go to the app's tracer (nothing without one), at most
``MAX_TRACE_EVENTS`` per call, through its bounded queue. Text in either is cleaned of
control characters and bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any

from fevex._ground.clock import new_sequential_id, utc_now
from fevex._ground.untrusted_text import clean_text
from fevex._internal.engine.event_sink import EventSink
from fevex.events import RunEvent
from fevex.tools.context import TraceAttribute

__all__ = [
    "MAX_PROGRESS_EVENTS",
    "MAX_TRACE_EVENTS",
    "PROGRESS_INTERVAL",
    "TRACE_EVENT",
    "CallReports",
]

PROGRESS_INTERVAL = 0.25
MAX_PROGRESS_EVENTS = 100
MAX_TRACE_EVENTS = 100
MAX_MESSAGE_CHARS = 500
MAX_NAME_CHARS = 100
MAX_ATTRIBUTES = 16
MAX_ATTRIBUTE_CHARS = 1000
# What the tracer receives for a trace event: no run event, never stored (see SpanBuilder).
TRACE_EVENT = "fevex.tool.trace_event"

Progress = tuple[float, float | None, str | None]


class CallReports:
    """The reports of one tool call; :meth:`relay` runs the call and yields its events.
    ``reporting``: whether the call can report at all (its tool takes a context)."""

    def __init__(
        self,
        sink: EventSink,
        base: Mapping[str, Any],
        call: Callable[[], Awaitable[Any]],
        reporting: bool,
    ) -> None:
        self._sink = sink
        self._base = dict(base)
        self._call = call
        self._reporting = reporting
        self._loop = asyncio.get_running_loop()
        self._latest: Progress | None = None
        self._signalled = False
        self._wake = asyncio.Event()
        self._next_at = 0.0
        self._traced = 0
        self.recorded = 0
        self.closed = False
        self.output: Any = None

    # -- what the tool calls (any thread) ------------------------------------------

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self.closed or self.recorded >= MAX_PROGRESS_EVENTS:
            return
        if not _finite(progress) or not (total is None or _finite(total)):
            return
        # Cut now and cleaned once recorded: a flood pays for a slice per report, not a scan.
        text = message[: MAX_MESSAGE_CHARS * 2] if isinstance(message, str) else None
        # The value first, the flag second: the loop clears the flag, then reads the value.
        self._latest = (float(progress), None if total is None else float(total), text)
        if not self._signalled:
            self._signalled = True
            self._soon(self._wake.set)

    def trace_event(self, name: str, attributes: Mapping[str, TraceAttribute]) -> None:
        if self.closed or self._traced >= MAX_TRACE_EVENTS or self._sink.tracer is None:
            return
        self._traced += 1
        payload = {
            "tool_call_id": self._base.get("tool_call_id"),
            "name": clean_text(str(name), MAX_NAME_CHARS) or "event",
            "attributes": _attributes(attributes),
        }
        self._soon(lambda: self._trace(payload))

    def _soon(self, callback: Any) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            callback()
        else:
            with contextlib.suppress(RuntimeError):  # the loop has closed: the run is over
                self._loop.call_soon_threadsafe(callback)

    def _trace(self, payload: dict[str, Any]) -> None:
        sink = self._sink
        if sink.tracer is None:
            return
        event = RunEvent(new_sequential_id("evt"), sink.run.id, 0, TRACE_EVENT, utc_now(), payload)
        with contextlib.suppress(Exception):  # a tracer never reaches a run
            sink.tracer.record(sink.run, event)

    # -- the agent loop --------------------------------------------------------------

    async def relay(self) -> AsyncGenerator[RunEvent, None]:
        """Run the call in a task of its own, yielding its ``tool.progress`` events as they
        fall due; its result is then in :attr:`output` (its exception is raised). A
        consumer that stops early cancels the call and waits for it. A call that cannot
        report (its tool takes no context) is awaited here, with no task of its own."""
        if not self._reporting:
            self.output = await self._call()
            return
        task = asyncio.ensure_future(self._call())
        try:
            while not task.done():
                self._wake.clear()
                self._signalled = False
                latest = self._latest
                if latest is None or self.recorded >= MAX_PROGRESS_EVENTS:
                    await self._until(task, self._wake.wait(), None)
                    continue
                due = self._next_at - time.monotonic()
                if due > 0:
                    await self._until(task, None, due)
                    continue
                self._latest = None
                self.recorded += 1
                self._next_at = time.monotonic() + PROGRESS_INTERVAL
                progress, total, said = latest
                message = clean_text(said, MAX_MESSAGE_CHARS) or None if said else None
                payload = {**self._base, "progress": progress, "total": total, "message": message}
                # Committed at once, also while the sink batches: progress is for watching
                # a call that is still running; the bounds above keep the commits few.
                yield await self._sink.emit("tool.progress", payload, durable=True)
            self.output = task.result()
        finally:
            self.closed = True
            if not task.done():
                task.cancel()
                await asyncio.wait((task,))

    async def _until(
        self, task: asyncio.Future[Any], woken: Awaitable[Any] | None, timeout: float | None
    ) -> None:
        waiter = None if woken is None else asyncio.ensure_future(woken)
        try:
            waiting = (task,) if waiter is None else (task, waiter)
            await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if waiter is not None:
                waiter.cancel()


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _attributes(attributes: Mapping[str, TraceAttribute]) -> dict[str, TraceAttribute]:
    kept: dict[str, TraceAttribute] = {}
    for key, value in list(attributes.items())[:MAX_ATTRIBUTES]:
        if not isinstance(key, str):
            continue
        if isinstance(value, str):
            kept[clean_text(key, MAX_NAME_CHARS)] = clean_text(value, MAX_ATTRIBUTE_CHARS)
        elif isinstance(value, bool | int) or (isinstance(value, float) and math.isfinite(value)):
            kept[clean_text(key, MAX_NAME_CHARS)] = value
    return kept
