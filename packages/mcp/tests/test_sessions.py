"""One MCP session per connection per run, against a real stateful server: shared by the
run's discovery and calls, opened again when the server expires it, ended when the run
ends or pauses, over Streamable HTTP and over stdio (a process per run); and a cancelled
run cancels its request at the server, over both."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_stdio import process_alive

from fevex import (
    FevexRunError,
    RunCancelledError,
    RunEvent,
    RunPausedError,
    ToolContext,
    create_fevex,
    define_agent,
    define_connection,
)
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel
from fevex_mcp import MCPToolProvider, create_mcp_tool_provider

pytestmark = pytest.mark.anyio


def tool_call(name: str, call_id: str = "call-1", **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "input": arguments}]}


def agent_app(
    model: FakeModel,
    provider: MCPToolProvider,
    remotes: list[str],
    events: list[RunEvent] | None = None,
    **connection: Any,
) -> Any:
    return create_fevex(
        models={"default": model},
        agents=[
            define_agent(
                name="assistant",
                instructions="Help.",
                tools=[f"mem__{remote}" for remote in remotes],
            )
        ],
        connections=[
            define_connection(name="mem", provider=provider, allowlist=remotes, **connection)
        ],
        run_store=InMemoryRunStore(),
        on_event=None if events is None else events.append,
    )


async def outputs(app: Any, run_id: str) -> list[Any]:
    events = await app.list_events(run_id)
    return [event.payload["output"] for event in events if event.type == "tool.completed"]


async def eventually(check: Any, seconds: float = 10.0) -> Any:
    with anyio.fail_after(seconds):
        while True:
            value = check()
            if value:
                return value
            await anyio.sleep(0.02)


# -- sessions over Streamable HTTP ----------------------------------------------------


async def test_the_calls_of_one_run_share_a_session_and_two_runs_have_two(
    stateful_server: Any,
) -> None:
    log = stateful_server.log
    model = FakeModel(
        tool_call("mem__remember", word="lease"),
        tool_call("mem__remember", "call-2", word="heartbeat"),
        {"output": "Noted."},
        tool_call("mem__remember", word="renewal"),
        {"output": "Noted again."},
    )
    app = agent_app(model, create_mcp_tool_provider(stateful_server.url), ["remember"])
    first = await app.run_agent("assistant", "Remember two words.")
    second = await app.run_agent("assistant", "Remember one more.")
    assert await outputs(app, first.run_id) == ["lease", "lease,heartbeat"]
    assert await outputs(app, second.run_id) == ["renewal"]
    assert log.handshakes == 2
    one, two = log.sessions()
    assert log.sessions("tools/list") == [one, two]
    assert log.sessions("tools/call") == [one, two]
    # Each run's session ended with the run.
    assert log.ended == [one, two]


async def test_a_paused_run_ends_its_session_and_continues_in_a_new_one(
    stateful_server: Any,
) -> None:
    log = stateful_server.log
    model = FakeModel(tool_call("mem__remember", word="lease"), {"output": "Noted."})
    app = agent_app(
        model,
        create_mcp_tool_provider(stateful_server.url),
        ["remember"],
        tools={"remember": {"approval": "required"}},
    )
    with pytest.raises(RunPausedError) as caught:
        await app.run_agent("assistant", "Remember a word.")
    paused = caught.value
    (discovered,) = log.sessions()
    assert log.ended == [discovered]
    approval_id = paused.pause["approvals"][0]["id"]
    decision = {
        "type": "approval",
        "approval_id": approval_id,
        "decision": "approve",
        "actor": {"id": "reviewer"},
    }
    result = await app.resume_run(paused.run_id, decision)
    assert result.output == "Noted."
    assert await outputs(app, paused.run_id) == ["lease"]
    assert log.handshakes == 2
    first, resumed = log.sessions()
    assert first == discovered
    assert log.sessions("tools/call") == [resumed]
    assert log.ended == [first, resumed]


async def test_a_session_the_server_expired_is_opened_again_for_the_same_call(
    stateful_server: Any,
) -> None:
    log = stateful_server.log
    model = FakeModel(
        tool_call("mem__remember", word="lease"),
        tool_call("mem__expire", "call-2"),
        tool_call("mem__remember", "call-3", word="heartbeat"),
        {"output": "Noted."},
    )
    app = agent_app(model, create_mcp_tool_provider(stateful_server.url), ["remember", "expire"])
    result = await app.run_agent("assistant", "Remember, forget, remember.")
    # The new session starts with nothing remembered: the server's state was the old one's.
    assert await outputs(app, result.run_id) == ["lease", "expired", "heartbeat"]
    assert log.handshakes == 2
    old, new = log.sessions()
    assert log.expired == {old}
    calls = [seen.session for seen in log.requests if seen.rpc == "tools/call"]
    # The third call went to the expired session once (404), then to the new one.
    assert calls == [old, old, old, new]
    assert log.ended == [old, new]


async def test_a_server_that_expires_every_session_is_tried_once_more_then_refused(
    stateful_server: Any,
) -> None:
    log = stateful_server.log
    log.expire_every_session = True
    app = agent_app(
        FakeModel({"output": "never"}),
        create_mcp_tool_provider(stateful_server.url),
        ["remember"],
    )
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("assistant", "Remember.")
    assert caught.value.code == "MCP_HTTP_ERROR"
    assert caught.value.details["status"] == 404
    assert log.handshakes == 2
    assert len(log.sessions("tools/list")) == 2


async def test_a_provider_called_by_hand_holds_a_session_per_run_until_released(
    stateful_server: Any,
) -> None:
    log = stateful_server.log

    def context(run_id: str) -> ToolContext:
        return ToolContext(run_id, "session-1", "assistant", "call-1", "mem__remember")

    async with create_mcp_tool_provider(stateful_server.url) as provider:
        assert await provider.call_tool("remember", {"word": "a"}, context("run-1")) == "a"
        assert await provider.call_tool("remember", {"word": "b"}, context("run-2")) == "b"
        assert await provider.call_tool("remember", {"word": "c"}, context("run-1")) == "a,c"
        one, two = log.sessions()
        await provider.release_run("run-1")
        assert log.ended == [one]
        assert await provider.call_tool("remember", {"word": "d"}, context("run-1")) == "d"
        assert log.handshakes == 3
    # Closing the provider ends the sessions it still held.
    assert sorted(log.ended) == sorted([one, two, log.sessions()[2]])


async def test_a_stateless_server_is_discovered_once_per_run(mcp_server: Any) -> None:
    """A 2026-07-28 server keeps no session: the run still reuses its one connection,
    so the protocol is negotiated once for the run's discovery and calls."""
    model = FakeModel(
        tool_call("mem__search", query="leases"),
        tool_call("mem__search", "call-2", query="heartbeats"),
        {"output": "Found."},
    )
    app = agent_app(model, create_mcp_tool_provider(mcp_server.url), ["search"])
    result = await app.run_agent("assistant", "Search twice.")
    assert len(await outputs(app, result.run_id)) == 2
    methods = mcp_server.recorder.methods
    assert methods.count("server/discover") == 1
    assert methods.count("tools/call") == 2
    assert "initialize" not in methods


# -- cancellation ---------------------------------------------------------------------


async def test_cancelling_a_run_cancels_its_request_at_an_http_server(
    stateful_server: Any,
) -> None:
    log = stateful_server.log
    events: list[RunEvent] = []
    app = agent_app(
        FakeModel(tool_call("mem__wait")),
        create_mcp_tool_provider(stateful_server.url),
        ["wait"],
        events=events,
        timeout=20.0,
    )
    running = asyncio.create_task(app.run_agent("assistant", "Wait."))
    with anyio.fail_after(10):
        await log.waiting.wait()
    cancelled = await app.cancel_run(events[0].run_id)
    assert cancelled.status == "cancelled"
    with pytest.raises(RunCancelledError):
        await running
    (session,) = log.sessions("tools/call")
    assert await eventually(lambda: log.cancelled) == [session]
    notified = [seen.session for seen in log.requests if seen.rpc == "notifications/cancelled"]
    assert notified == [session]
    assert await eventually(lambda: log.ended) == [session]


async def test_a_tool_list_change_mid_run_is_discovered_before_the_next_step(
    stateful_server: Any,
) -> None:
    log = stateful_server.log
    model = FakeModel(
        tool_call("mem__retitle"),
        tool_call("mem__remember", "call-2", word="lease"),
        {"output": "Noted."},
    )
    app = agent_app(model, create_mcp_tool_provider(stateful_server.url), ["retitle", "remember"])
    result = await app.run_agent("assistant", "Retitle, then remember.")
    assert await outputs(app, result.run_id) == ["retitled", "lease"]
    described = [
        {spec.name: spec.description for spec in call.tools}["mem__remember"]
        for call in model.calls
    ]
    assert ["and more" in description for description in described] == [False, True, True]
    # Discovered again on the run's one session, once: the change was reported once.
    (session,) = log.sessions()
    assert [seen.session for seen in log.requests if seen.rpc == "tools/list"] == [session] * 2


# -- sessions over stdio: a process per run ---------------------------------------------


def started_pids(python_server: Any) -> list[int]:
    return [int(line) for line in (python_server.observed("pids") or "").split()]


async def test_the_calls_of_one_run_share_a_stdio_process_and_two_runs_have_two(
    python_server: Any,
) -> None:
    model = FakeModel(
        tool_call("mem__remember", word="lease"),
        tool_call("mem__remember", "call-2", word="heartbeat"),
        {"output": "Noted."},
        tool_call("mem__remember", word="renewal"),
        {"output": "Noted again."},
    )
    provider = create_mcp_tool_provider(command=python_server.command, args=python_server.args)
    async with provider:
        app = agent_app(model, provider, ["remember"])
        first = await app.run_agent("assistant", "Remember two words.")
        one = started_pids(python_server)
        second = await app.run_agent("assistant", "Remember one more.")
        both = started_pids(python_server)
        assert await outputs(app, first.run_id) == ["lease", "lease,heartbeat"]
        assert await outputs(app, second.run_id) == ["renewal"]
        # The first run's discovery and both its calls went to one process; the second
        # run had another; each was stopped when its run ended.
        assert len(one) == 1
        assert len(both) == 2
        assert both[0] == one[0]
        assert not any(process_alive(pid) for pid in both)


async def test_a_paused_run_stops_its_stdio_process_and_continues_in_a_new_one(
    python_server: Any,
) -> None:
    model = FakeModel(
        tool_call("mem__remember", word="lease"),
        tool_call("mem__remember", "call-2", word="heartbeat"),
        {"output": "Noted."},
    )
    provider = create_mcp_tool_provider(command=python_server.command, args=python_server.args)
    async with provider:
        app = agent_app(model, provider, ["remember"], tools={"remember": {"approval": "required"}})
        with pytest.raises(RunPausedError) as caught:
            await app.run_agent("assistant", "Remember two words.")
        (discovered,) = started_pids(python_server)
        assert not process_alive(discovered)
        paused = caught.value
        approve = paused.approvals[0].approve(actor="reviewer")
        with pytest.raises(RunPausedError) as again:
            await app.resume_run(paused.run_id, approve)
        second = again.value.approvals[0].approve(actor="reviewer")
        result = await app.resume_run(paused.run_id, second)
        assert result.output == "Noted."
        # Each continuation of the run is a new process: the server's memory of the
        # first word went with the process the run paused in.
        assert await outputs(app, paused.run_id) == ["lease", "heartbeat"]
        assert len(started_pids(python_server)) == 3


async def test_a_tool_list_change_mid_run_is_discovered_again_over_stdio(
    python_server: Any,
) -> None:
    model = FakeModel(
        tool_call("mem__retitle"),
        tool_call("mem__echo", "call-2", word="lease"),
        {"output": "Done."},
    )
    provider = create_mcp_tool_provider(command=python_server.command, args=python_server.args)
    async with provider:
        app = agent_app(model, provider, ["retitle", "echo"])
        result = await app.run_agent("assistant", "Retitle, then echo.")
    assert await outputs(app, result.run_id) == ["retitled", "echo: lease"]
    described = [
        {spec.name: spec.description for spec in call.tools}["mem__echo"] for call in model.calls
    ]
    assert ["and more" in description for description in described] == [False, True, True]
    assert python_server.observed("tools-listed") == "2"


async def test_a_provider_called_by_hand_holds_a_stdio_process_per_run_until_released(
    python_server: Any,
) -> None:
    def context(run_id: str) -> ToolContext:
        return ToolContext(run_id, "session-1", "assistant", "call-1", "mem__remember")

    provider = create_mcp_tool_provider(command=python_server.command, args=python_server.args)
    async with provider:
        assert await provider.call_tool("remember", {"word": "a"}, context("run-1")) == "a"
        assert await provider.call_tool("remember", {"word": "b"}, context("run-2")) == "b"
        assert await provider.call_tool("remember", {"word": "c"}, context("run-1")) == "a,c"
        one, two = started_pids(python_server)
        await provider.release_run("run-1")
        assert not process_alive(one)
        assert process_alive(two)
        assert await provider.call_tool("remember", {"word": "d"}, context("run-1")) == "d"
        three = started_pids(python_server)[2]
    # Closing the provider stops the processes it still held.
    assert not process_alive(two)
    assert not process_alive(three)


async def test_cancelling_a_run_cancels_its_request_at_a_stdio_server(python_server: Any) -> None:
    # A server in plain JSON-RPC, which records the cancellation as it reads it: the
    # run's process is stopped right after, which would end the request anyway.
    script = Path(python_server.args[0]).with_name("handshake_server.py")
    events: list[RunEvent] = []
    provider = create_mcp_tool_provider(
        command=python_server.command, args=[str(script), str(python_server.state)]
    )
    model = FakeModel(tool_call("mem__hang"))
    async with provider:
        app = agent_app(model, provider, ["hang"], events=events, timeout=20.0)
        running = asyncio.create_task(app.run_agent("assistant", "Wait."))
        hanging = await eventually(lambda: python_server.observed("hanging"))
        cancelled = await app.cancel_run(events[0].run_id)
        assert cancelled.status == "cancelled"
        with pytest.raises(RunCancelledError):
            await running
        assert await eventually(lambda: python_server.observed("cancelled-requests")) == hanging
