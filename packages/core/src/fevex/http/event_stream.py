"""Observing a run over server-sent events.

Each committed event is one frame whose ``id`` is the event's id, so that a client that
reconnects with ``Last-Event-ID`` continues right after the last event it received. The
stream ends with an ``end`` frame once the run has ended (completed, failed or cancelled);
a paused run's stream stays open, with a comment every ``heartbeat`` seconds, until the run
goes on and ends. A stream that closes without its ``end`` frame was cut: reconnect.

Reads go through :meth:`fevex.Fevex.follow_events` a page of ``page_size`` events at a time,
and the next read waits until the consumer has taken every frame of the page before: the
server holds at most one page and the frame being sent for a slow consumer, whatever the
length of the run. Disconnecting stops the reads and never touches the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator

from fevex.app import Fevex
from fevex.events import RunEvent
from fevex.runtime.records import AgentRun

__all__ = ["end_frame", "event_frame", "run_event_frames"]

END_EVENT = "end"
# What a client waits before it reconnects, as the SSE ``retry`` field tells it.
RETRY_MILLISECONDS = 1000
HEARTBEAT_FRAME = b": keep-alive\n\n"


def event_frame(event: RunEvent) -> bytes:
    """One event as an SSE frame; its JSON is one line (JSON escapes line breaks)."""
    data = json.dumps(event.to_json(), ensure_ascii=False, separators=(",", ":"))
    return f"id: {event.id}\nevent: {event.type}\ndata: {data}\n\n".encode()


def end_frame(run: AgentRun) -> bytes:
    data = json.dumps({"run_id": run.id, "status": run.status}, separators=(",", ":"))
    return f"event: {END_EVENT}\ndata: {data}\n\n".encode()


async def run_event_frames(
    fevex: Fevex,
    run_id: str,
    after: str | None,
    *,
    page_size: int,
    poll_interval: float,
    heartbeat: float,
) -> AsyncGenerator[bytes, None]:
    """The frames of run ``run_id`` after event ``after``, then its ``end`` frame."""
    yield f"retry: {RETRY_MILLISECONDS}\n\n".encode()
    events = fevex.follow_events(
        run_id, after=after, poll_interval=poll_interval, page_size=page_size
    )
    # The next event is awaited in a task of its own so that a heartbeat can go out while
    # the run is idle without cancelling the read: it holds one event at most.
    pending: asyncio.Task[RunEvent] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(_next(events))
            done, _ = await asyncio.wait({pending}, timeout=heartbeat)
            if not done:
                yield HEARTBEAT_FRAME
                continue
            finished, pending = pending, None
            try:
                event = finished.result()
            except StopAsyncIteration:
                break
            yield event_frame(event)
        yield end_frame(await fevex.get_run(run_id))
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        await events.aclose()


async def _next(events: AsyncIterator[RunEvent]) -> RunEvent:
    return await anext(events)
