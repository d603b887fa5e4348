"""What a running tool call reports through its context: progress becomes ``tool.progress``
events (coalesced, capped per call, text cleaned), trace events go on the call's span
(capped); a flood of either never floods the run, and a cancelled run stops a call that
reports."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from fevex import RunCancelledError, ToolContext, create_fevex, define_agent, define_tool
from fevex.events import ToolProgress, project_run
from fevex.observability import InMemoryTraceExporter, Observability
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio

# The documented bounds (fevex._internal.composition.tool_reports).
MAX_PROGRESS_EVENTS = 100
MAX_TRACE_EVENTS = 100


def one_call(tool: str, **arguments: Any) -> FakeModel:
    return FakeModel(
        {"tool_calls": [{"id": "call-1", "name": tool, "input": arguments}]}, {"output": "Done."}
    )


def app_with(tool: Any, events: Any = None, **options: Any) -> Any:
    """An app whose agent calls ``tool`` once; ``events`` is a list each event is added
    to, or an observer."""
    observer = events.append if isinstance(events, list) else events
    return create_fevex(
        models={"default": one_call(tool.name)},
        agents=[define_agent(name="worker", instructions="Work.", tools=[tool.name])],
        tools=[tool],
        run_store=InMemoryRunStore(),
        on_event=observer,
        **options,
    )


async def test_reported_progress_becomes_tool_progress_events_and_stream_items() -> None:
    @define_tool(name="index", description="Index the documents.")
    async def index(context: ToolContext) -> str:
        context.report_progress(1, total=3, message="first\x1b[2J document\u202e")
        await asyncio.sleep(0.4)
        context.report_progress(3, total=3)
        await asyncio.sleep(0.4)
        return "indexed"

    app = app_with(index)
    result = await app.run_agent("worker", "Index.")
    events = await app.list_events(result.run_id)
    progress = [event for event in events if event.type == "tool.progress"]
    assert [event.payload for event in progress] == [
        {
            "step": 1,
            "tool_call_id": "call-1",
            "tool_name": "index",
            "progress": 1.0,
            "total": 3.0,
            "message": "first [2J document",
        },
        {
            "step": 1,
            "tool_call_id": "call-1",
            "tool_name": "index",
            "progress": 3.0,
            "total": 3.0,
            "message": None,
        },
    ]
    types = [event.type for event in events]
    assert (
        types.index("tool.started") < types.index("tool.progress") < types.index("tool.completed")
    )
    stream = project_run(events).stream
    reported = [item for item in stream if isinstance(item, ToolProgress)]
    assert reported == [
        ToolProgress(progress[0].sequence, 1, "call-1", "index", 1.0, 3.0, "first [2J document"),
        ToolProgress(progress[1].sequence, 1, "call-1", "index", 3.0, 3.0, None),
    ]


async def test_a_flood_of_progress_is_coalesced_and_capped() -> None:
    took: list[float] = []

    @define_tool(name="crunch", description="Crunch numbers.")
    async def crunch(context: ToolContext) -> int:
        started = time.monotonic()
        for done in range(100_000):
            context.report_progress(done, total=100_000, message="x" * 10_000)
            if done % 100 == 0:
                await asyncio.sleep(0)
        while time.monotonic() - started < 0.6:
            context.report_progress(100_000, total=100_000)
            await asyncio.sleep(0.01)
        took.append(time.monotonic() - started)
        return 100_000

    events: list[Any] = []
    app = app_with(crunch, events)
    result = await app.run_agent("worker", "Crunch.")
    assert result.output == "Done."
    progress = [event for event in events if event.type == "tool.progress"]
    # At most one event per 0.25 s window of the call (the first at once), never 100,000.
    assert 2 <= len(progress) <= min(int(took[0] / 0.25) + 2, MAX_PROGRESS_EVENTS)
    assert all(len(event.payload["message"] or "") <= 500 for event in progress)
    assert len(await app.list_events(result.run_id)) == len(events)


async def test_the_cap_per_call_holds_however_long_a_call_reports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fevex._internal.composition import tool_reports

    # No coalescing window: only the cap per call can stop the events.
    monkeypatch.setattr(tool_reports, "PROGRESS_INTERVAL", 0.0)
    recorded = asyncio.Event()

    @define_tool(name="crawl", description="Crawl.")
    async def crawl(context: ToolContext) -> str:
        for page in range(MAX_PROGRESS_EVENTS + 20):
            recorded.clear()
            context.report_progress(page)
            # Each page's report is recorded before the next is made (none coalesced).
            if page < MAX_PROGRESS_EVENTS:
                await recorded.wait()
            await asyncio.sleep(0.002)
        return "crawled"

    events: list[Any] = []

    def seen(event: Any) -> None:
        events.append(event)
        if event.type == "tool.progress":
            recorded.set()

    app = app_with(crawl, seen)
    async with asyncio.timeout(60):
        async for _ in app.stream_agent("worker", "Crawl."):
            pass
    progress = [event for event in events if event.type == "tool.progress"]
    assert [event.payload["progress"] for event in progress] == [
        float(page) for page in range(MAX_PROGRESS_EVENTS)
    ]


async def test_a_synchronous_tool_reports_from_its_worker_thread() -> None:
    @define_tool(name="convert", description="Convert a file.")
    def convert(context: ToolContext) -> str:
        for done in range(50_000):
            context.report_progress(done, total=50_000)
        context.report_progress(50_000, total=50_000, message="converted")
        time.sleep(0.3)
        return "converted"

    events: list[Any] = []
    app = app_with(convert, events)
    result = await app.run_agent("worker", "Convert.")
    assert result.output == "Done."
    progress = [event for event in events if event.type == "tool.progress"]
    assert 1 <= len(progress) <= 3
    assert progress[-1].payload["message"] == "converted"


async def test_a_context_outside_a_run_reports_nothing_and_bad_numbers_are_ignored() -> None:
    context = ToolContext("run", "session", "agent", "call", "tool")
    context.report_progress(1, total=2, message="nobody listens")
    context.add_trace_event("nothing")

    @define_tool(name="odd", description="Reports numbers that are not.")
    async def odd(context: ToolContext) -> str:
        context.report_progress(float("nan"))
        context.report_progress(1, total=float("inf"))
        context.report_progress(True)  # type: ignore[arg-type]
        await asyncio.sleep(0.1)
        return "odd"

    events: list[Any] = []
    await app_with(odd, events).run_agent("worker", "Go.")
    assert [event for event in events if event.type == "tool.progress"] == []


async def test_trace_events_go_on_the_tool_span_bounded() -> None:
    @define_tool(name="fetch", description="Fetch.")
    async def fetch(context: ToolContext) -> str:
        context.add_trace_event(
            "fetch.log\x1b",
            {"level": "info", "data": "y" * 5000 + "\x00", "count": 3, "nested": {"no": 1}},  # type: ignore[dict-item]
        )
        for index in range(10_000):
            context.add_trace_event("fetch.flood", {"index": index})
        await asyncio.sleep(0)
        return "fetched"

    exporter = InMemoryTraceExporter()
    app = app_with(fetch, observability=Observability(exporters=[exporter]))
    result = await app.run_agent("worker", "Fetch.")
    assert result.output == "Done."
    await app.flush_observability()
    (tool,) = exporter.of_kind("tool")
    assert len(tool.events) == MAX_TRACE_EVENTS
    first = tool.events[0]
    assert first.name == "fetch.log"
    assert first.attributes["level"] == "info"
    assert first.attributes["count"] == 3
    assert "nested" not in first.attributes
    data = first.attributes["data"]
    assert isinstance(data, str)
    assert len(data) == 1000
    assert "\x00" not in data
    assert [event.name for event in tool.events[1:]] == ["fetch.flood"] * (MAX_TRACE_EVENTS - 1)


async def test_cancelling_a_run_stops_a_call_that_reports() -> None:
    stopped = asyncio.Event()

    @define_tool(name="watch", description="Watch forever.")
    async def watch(context: ToolContext) -> str:
        try:
            for tick in range(10**9):
                context.report_progress(tick)
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            stopped.set()
            raise
        return "never"

    events: list[Any] = []
    reported = asyncio.Event()

    def seen(event: Any) -> None:
        events.append(event)
        if event.type == "tool.progress":
            reported.set()

    app = app_with(watch, seen)
    running = asyncio.create_task(app.run_agent("worker", "Watch."))
    async with asyncio.timeout(30):
        await reported.wait()
    cancelled = await app.cancel_run(events[0].run_id)
    assert cancelled.status == "cancelled"
    with pytest.raises(RunCancelledError):
        await running
    async with asyncio.timeout(10):
        await stopped.wait()
    assert events[-1].type == "run.cancelled"


async def test_a_run_past_its_deadline_stops_a_call_that_reports() -> None:
    @define_tool(name="linger", description="Linger.")
    async def linger(context: ToolContext) -> str:
        while True:
            context.report_progress(1)
            await asyncio.sleep(0.01)

    events: list[Any] = []
    app = app_with(linger, events)
    with pytest.raises(RunCancelledError):
        async with asyncio.timeout(30):
            await app.run_agent("worker", "Linger.", timeout=0.5)
    assert events[-1].type == "run.cancelled"
    assert events[-1].payload == {"reason": "timeout"}
