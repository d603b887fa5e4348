"""Observing a run over server-sent events.

Each committed event is one frame whose ``id`` is the event's id, so that a client that
reconnects with ``Last-Event-ID`` continues right after the last event it received. The
stream ends with an ``end`` frame once the run has ended (completed, failed or cancelled);
a paused run's stream stays open, with a comment every ``heartbeat`` seconds, until the run
goes on and ends. A stream that closes without its ``end`` frame was cut: reconnect.

Reads go through :meth:`fevex.Fevex.follow_event_pages`, a page of ``page_size`` events at a
time; a page's frames are written together, in chunks of about :data:`CHUNK_BYTES`, and the
next page is read only once the consumer has taken the last chunk of this one. A slow
consumer therefore makes the server hold one page of events and one chunk of frames, never
more, whatever the length of the run. Disconnecting stops the reads and never touches the
run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Sequence

from fevex.app import Fevex
from fevex.events import RunEvent
from fevex.runtime.records import AgentRun

__all__ = ["end_frame", "event_frame", "run_event_frames"]

END_EVENT = "end"
# What a client waits before it reconnects, as the SSE ``retry`` field tells it.
RETRY_MILLISECONDS = 1000
HEARTBEAT_FRAME = b": keep-alive\n\n"
# Frames are written in chunks of about this size: one write per chunk, not per event.
CHUNK_BYTES = 16_384


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
    pages = fevex.follow_event_pages(
        run_id, after=after, poll_interval=poll_interval, page_size=page_size
    )
    # The next page is awaited in a task of its own so that a heartbeat can go out while
    # the run is idle without cancelling the read.
    pending: asyncio.Task[Sequence[RunEvent]] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(_next(pages))
            done, _ = await asyncio.wait({pending}, timeout=heartbeat)
            if not done:
                yield HEARTBEAT_FRAME
                continue
            finished, pending = pending, None
            try:
                page = finished.result()
            except StopAsyncIteration:
                break
            chunk = bytearray()
            for event in page:
                chunk += event_frame(event)
                if len(chunk) >= CHUNK_BYTES:
                    yield bytes(chunk)
                    chunk.clear()
            if chunk:
                yield bytes(chunk)
        yield end_frame(await fevex.get_run(run_id))
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        await pages.aclose()


async def _next(pages: AsyncIterator[Sequence[RunEvent]]) -> Sequence[RunEvent]:
    return await anext(pages)
