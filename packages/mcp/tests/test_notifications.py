"""What a server says while a tool runs reaches the run, bounded: progress notifications
become ``tool.progress`` events, log messages become ``mcp.log`` events on the call's span,
cleaned and without the connection's secrets; a server flooding either never floods the
run's events or its trace. Real servers, over Streamable HTTP and stdio."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fevex import RunEvent, create_fevex, define_agent, define_connection
from fevex.observability import InMemoryTraceExporter, Observability
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel
from fevex_mcp import MCPToolProvider, create_mcp_tool_provider

pytestmark = pytest.mark.anyio

TOKEN = "Bearer notify-s3cret-7f9c2d41"
ENV_TOKEN = "stdio-s3cret-0b8e77aa"
SERVER = Path(__file__).with_name("notification_servers.py")
# The core's documented bounds (ToolContext.report_progress, add_trace_event).
MAX_PROGRESS_EVENTS = 100
MAX_TRACE_EVENTS = 100
PROGRESS_INTERVAL = 0.25


@pytest.fixture
async def notifying_url(serve_on_loopback: Any) -> AsyncIterator[str]:
    serve = serve_on_loopback
    from notification_servers import build_notifying_server

    server, task, port = await serve(build_notifying_server().streamable_http_app())
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        await task


def stdio_provider() -> MCPToolProvider:
    return create_mcp_tool_provider(
        command=sys.executable, args=[str(SERVER)], env={"TOKEN": ENV_TOKEN}
    )


def agent_app(
    provider: MCPToolProvider,
    tool: str,
    events: list[RunEvent],
    timeout: float = 30.0,
    **call: Any,
) -> Any:
    exporter = InMemoryTraceExporter()
    app = create_fevex(
        models={
            "default": FakeModel(
                {"tool_calls": [{"id": "call-1", "name": f"n__{tool}", "input": call}]},
                {"output": "Done."},
            )
        },
        agents=[define_agent(name="worker", instructions="Work.", tools=[f"n__{tool}"])],
        connections=[
            define_connection(name="n", provider=provider, allowlist=[tool], timeout=timeout)
        ],
        run_store=InMemoryRunStore(),
        on_event=events.append,
        observability=Observability(exporters=[exporter]),
    )
    app.test_exporter = exporter
    return app


def progress_of(events: list[RunEvent]) -> list[dict[str, Any]]:
    return [event.payload for event in events if event.type == "tool.progress"]


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_progress_notifications_become_tool_progress_events(
    transport: str, notifying_url: str
) -> None:
    events: list[RunEvent] = []
    if transport == "http":
        provider = create_mcp_tool_provider(notifying_url, headers={"Authorization": TOKEN})
    else:
        provider = stdio_provider()
    async with provider:
        app = agent_app(provider, "steps", events, count=3, pause=0.3)
        result = await app.run_agent("worker", "Work.")
    assert result.output == "Done."
    progress = progress_of(events)
    assert [(p["progress"], p["total"]) for p in progress] == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]
    first = progress[0]
    assert first["tool_call_id"] == "call-1"
    assert first["tool_name"] == "n__steps"
    # The server's text: cleaned of controls, and without the caller's secret it echoed.
    assert first["message"].startswith("step 1 of ")
    assert "[redacted]" in first["message"]
    assert "\x1b" not in first["message"]
    assert "\u202e" not in first["message"]
    everything = json.dumps([event.to_json() for event in events])
    assert "s3cret" not in everything


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_a_server_flooding_progress_floods_nothing(
    transport: str, notifying_url: str
) -> None:
    events: list[RunEvent] = []
    provider = create_mcp_tool_provider(notifying_url) if transport == "http" else stdio_provider()
    # The SDK spends about half a millisecond on each notification: 8,000 of them keep
    # the call busy for seconds, many coalescing windows.
    count = 8_000
    async with provider:
        # A hang guard on a loaded machine, not a bound the test measures.
        app = agent_app(provider, "steps", events, timeout=300.0, count=count)
        started = time.monotonic()
        result = await app.run_agent("worker", "Work.")
        took = time.monotonic() - started
    assert result.output == "Done."
    completed = [event for event in events if event.type == "tool.completed"]
    assert completed[0].payload["output"] == f"{count} steps"
    progress = progress_of(events)
    assert 1 <= len(progress) <= min(int(took / PROGRESS_INTERVAL) + 2, MAX_PROGRESS_EVENTS)
    stored = await app.list_events(result.run_id, limit=1000)
    # The run's nine other events (started, two model steps, the call's start and end, the
    # answer's delta, completed) and the progress events, however many were sent.
    assert len(stored) == len(events) <= 9 + MAX_PROGRESS_EVENTS


# The server side of logging is deprecated on the 2026-07-28 protocol (SEP-2577); the
# servers people run still log, and the HTTP server runs in the test's process.
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_log_messages_become_redacted_trace_events_on_the_call_s_span(
    transport: str, notifying_url: str
) -> None:
    events: list[RunEvent] = []
    if transport == "http":
        provider = create_mcp_tool_provider(notifying_url, headers={"Authorization": TOKEN})
    else:
        provider = stdio_provider()
    async with provider:
        app = agent_app(provider, "chatty", events, count=1000)
        result = await app.run_agent("worker", "Work.")
    assert result.output == "Done."
    await app.flush_observability()
    (tool,) = app.test_exporter.of_kind("tool")
    logs = [event for event in tool.events if event.name == "mcp.log"]
    # A flood of 2,002 messages (1,000 below the level asked for): a bounded number kept.
    assert len(logs) == MAX_TRACE_EVENTS
    first, second = logs[0].attributes, logs[1].attributes
    assert first["mcp.log.level"] == "info"
    assert first["mcp.log.logger"] == "worker"
    data = str(first["mcp.log.data"])
    assert data.startswith("working with [redacted]")
    assert "\x1b" not in data
    assert "\u202e" not in data
    assert len(data) <= 1000
    assert second["mcp.log.level"] == "warning"
    assert json.loads(str(second["mcp.log.data"])) == {"said": "[redacted]", "count": 1000}
    assert all("ignored below" not in str(log.attributes) for log in logs)
    assert [log.attributes["mcp.log.data"] for log in logs[2:4]] == ["line 0", "line 1"]
    exported = repr(app.test_exporter.spans)
    assert "s3cret" not in exported
