"""stdio servers: real processes started from the app's configuration, the npm reference
servers and the tests' own Python server, through agents and at the provider."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from fevex import FevexRunError, ToolContext, create_fevex, define_agent, define_connection
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel
from fevex.tools import ConnectionContext
from fevex_mcp import MCPToolProvider, create_mcp_tool_provider

pytestmark = pytest.mark.anyio

TOKEN = "tok-stdio-7d41c09e"


async def no_credential(name: str) -> str:
    raise AssertionError(f"no credential expected, asked for {name!r}")


DISCOVERY = ConnectionContext("srv", "run-1", "session-1", "assistant", no_credential)


def call(remote: str) -> ToolContext:
    return ToolContext("run-1", "session-1", "assistant", "call-1", f"srv__{remote}")


def tool_call(name: str, call_id: str = "call-1", **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "input": arguments}]}


def agent_app(
    model: FakeModel, provider: MCPToolProvider, remotes: list[str], **connection: Any
) -> Any:
    return create_fevex(
        models={"default": model},
        agents=[
            define_agent(
                name="assistant",
                instructions="Help.",
                tools=[f"srv__{remote}" for remote in remotes],
            )
        ],
        connections=[
            define_connection(name="srv", provider=provider, allowlist=remotes, **connection)
        ],
        run_store=InMemoryRunStore(),
    )


async def completed_outputs(app: Any, run_id: str) -> list[Any]:
    events = await app.list_events(run_id)
    return [event.payload["output"] for event in events if event.type == "tool.completed"]


async def eventually(check: Any, seconds: float = 10.0) -> Any:
    with anyio.fail_after(seconds):
        while True:
            value = await check()
            if value:
                return value
            await anyio.sleep(0.05)


def process_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def server_pid(python_server: Any) -> int:
    return int(python_server.observed("pid"))


# -- the npm reference servers ------------------------------------------------------


async def test_the_reference_filesystem_server_answers_an_agent(
    reference_servers: Any, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "lease.txt").write_text("A lease is renewed by its holder's heartbeat.")
    provider = create_mcp_tool_provider(
        command=reference_servers.node, args=[reference_servers.scripts["filesystem"], str(shared)]
    )
    model = FakeModel(
        tool_call("srv__list_directory", path=str(shared)),
        tool_call("srv__read_text_file", "call-2", path=str(shared / "lease.txt")),
        {"output": "Read it."},
    )
    async with provider:
        app = agent_app(model, provider, ["list_directory", "read_text_file"])
        result = await app.run_agent("assistant", "What does the lease note say?")
        assert result.output == "Read it."
        listing, text = await completed_outputs(app, result.run_id)
    assert "lease.txt" in json.dumps(listing)
    assert "renewed by its holder's heartbeat" in json.dumps(text)
    names = {spec.name for spec in model.calls[0].tools}
    assert names == {"srv__list_directory", "srv__read_text_file"}


async def test_the_reference_memory_server_keeps_its_graph_between_runs(
    reference_servers: Any, tmp_path: Path
) -> None:
    memory_file = tmp_path / "memory.jsonl"
    provider = create_mcp_tool_provider(
        command=reference_servers.node,
        args=[reference_servers.scripts["memory"]],
        env={"MEMORY_FILE_PATH": str(memory_file)},
    )
    entity = {"name": "lease-7", "entityType": "lease", "observations": ["renewed on Friday"]}
    model = FakeModel(
        tool_call("srv__create_entities", entities=[entity]),
        {"output": "Stored."},
        tool_call("srv__search_nodes", query="lease-7"),
        {"output": "Found."},
    )
    async with provider:
        app = agent_app(model, provider, ["create_entities", "search_nodes"])
        first = await app.run_agent("assistant", "Remember lease 7.")
        second = await app.run_agent("assistant", "What about lease 7?")
        (found,) = await completed_outputs(app, second.run_id)
    assert (first.output, second.output) == ("Stored.", "Found.")
    assert "renewed on Friday" in json.dumps(found)
    assert "lease-7" in memory_file.read_text()


# -- environment and working directory ----------------------------------------------


async def test_the_child_sees_only_the_environment_the_app_names(
    python_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FEVEX_PARENT_SECRET", "parent-only")
    provider = create_mcp_tool_provider(
        command=python_server.command, args=python_server.args, env={"GIVEN": "yes"}
    )
    async with provider:
        seen = await provider.call_tool("environment", {}, call("environment"))
    assert seen["GIVEN"] == "yes"
    assert "FEVEX_PARENT_SECRET" not in seen
    # What the SDK's stdio_client would have added from the parent.
    assert not {"HOME", "PATH", "USER", "SHELL", "TERM", "LOGNAME"} & set(seen)

    inheriting = create_mcp_tool_provider(
        command=python_server.command,
        args=python_server.args,
        inherit_env=["PATH", "FEVEX_NOT_SET_ANYWHERE"],
    )
    async with inheriting:
        seen = await inheriting.call_tool("environment", {}, call("environment"))
    assert seen["PATH"] == os.environ["PATH"]
    assert not {"FEVEX_PARENT_SECRET", "FEVEX_NOT_SET_ANYWHERE", "HOME"} & set(seen)


async def test_the_server_runs_in_the_working_directory_given(
    python_server: Any, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    provider = create_mcp_tool_provider(
        command=python_server.command, args=python_server.args, cwd=workdir
    )
    async with provider:
        assert await provider.call_tool("where", {}, call("where")) == str(workdir)


# -- start-up, timeouts, cancellation, crashes, close ----------------------------------


async def test_a_command_that_cannot_start_has_its_code(tmp_path: Path) -> None:
    provider = create_mcp_tool_provider(command=str(tmp_path / "no-such-server"))
    with pytest.raises(FevexRunError) as caught:
        await provider.list_tools(DISCOVERY)
    assert caught.value.code == "MCP_STARTUP_FAILED"


async def test_a_file_that_is_not_executable_cannot_start(tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text("print('never run')\n")
    provider = create_mcp_tool_provider(command="./server.py", cwd=str(tmp_path))
    with pytest.raises(FevexRunError) as caught:
        await provider.list_tools(DISCOVERY)
    assert caught.value.code == "MCP_STARTUP_FAILED"
    assert "(PermissionError: Permission denied)" in caught.value.message


async def test_a_server_that_exits_at_start_says_how_without_its_secrets() -> None:
    failing = (
        "import os, sys; sys.stderr.write('no config for ' + os.environ['TOKEN']); sys.exit(3)"
    )
    provider = create_mcp_tool_provider(
        command=sys.executable, args=["-c", failing], env={"TOKEN": TOKEN}
    )
    with pytest.raises(FevexRunError) as caught:
        await provider.list_tools(DISCOVERY)
    error = caught.value
    assert error.code == "MCP_STARTUP_FAILED"
    assert "exit status 3" in error.message
    assert "no config for [redacted]" in error.message
    assert TOKEN not in error.message
    assert TOKEN not in repr(provider)


async def test_a_server_that_never_speaks_times_out_and_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    mute = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
    provider = create_mcp_tool_provider(
        command=sys.executable, args=["-c", mute, str(pid_file)], startup_timeout=0.5
    )
    started = time.monotonic()
    with pytest.raises(FevexRunError) as caught:
        await provider.list_tools(DISCOVERY)
    assert caught.value.code == "MCP_STARTUP_TIMEOUT"
    assert time.monotonic() - started < 6
    assert not process_alive(int(pid_file.read_text()))


async def test_a_call_timeout_cancels_the_request_and_keeps_the_server(
    python_server: Any,
) -> None:
    provider = create_mcp_tool_provider(
        command=python_server.command, args=python_server.args, call_timeout=0.5
    )
    async with provider:
        with pytest.raises(FevexRunError) as caught:
            await provider.call_tool("slow", {"seconds": 30}, call("slow"))
        assert caught.value.code == "MCP_CALL_TIMEOUT"

        async def cancelled() -> str | None:
            return python_server.observed("cancelled")

        assert await eventually(cancelled) == "slow"
        pid = server_pid(python_server)
        assert await provider.call_tool("echo", {"word": "still"}, call("echo")) == "echo: still"
        assert server_pid(python_server) == pid


async def test_a_run_that_gives_up_abandons_only_its_own_request(python_server: Any) -> None:
    provider = create_mcp_tool_provider(command=python_server.command, args=python_server.args)
    model = FakeModel(
        tool_call("srv__slow", seconds=30),
        tool_call("srv__echo", word="next"),
        {"output": "done"},
    )
    async with provider:
        # The run's process starts during its discovery, which has a timeout of its own;
        # the call's timeout falls on the call.
        app = agent_app(model, provider, ["slow", "echo"], timeout=4.0)
        with pytest.raises(FevexRunError) as caught:
            await app.run_agent("assistant", "Wait.")
        assert caught.value.code == "CONNECTION_TIMEOUT"
        assert python_server.observed("slow-started") == "slow"
        # The request went with the run's process, stopped when the run ended (that the
        # server is told first is tested with the cancellations); the next run has a
        # process of its own.
        gave_up = server_pid(python_server)
        assert not process_alive(gave_up)
        result = await app.run_agent("assistant", "Echo.")
        assert result.output == "done"
        assert await completed_outputs(app, result.run_id) == ["echo: next"]
        assert server_pid(python_server) != gave_up


async def test_a_server_crashing_mid_call_fails_the_run_with_a_stable_code(
    python_server: Any,
) -> None:
    provider = create_mcp_tool_provider(
        command=python_server.command, args=python_server.args, env={"TOKEN": TOKEN}
    )
    model = FakeModel(
        tool_call("srv__crash"), tool_call("srv__echo", word="again"), {"output": "back"}
    )
    async with provider:
        app = agent_app(model, provider, ["crash", "echo"])
        with anyio.fail_after(20), pytest.raises(FevexRunError) as caught:
            await app.run_agent("assistant", "Crash.")
        error = caught.value
        assert error.code == "MCP_SERVER_EXITED"
        assert error.recoverable
        assert "exit status 7" in error.message
        assert "about to crash" in error.message
        assert TOKEN not in error.message
        assert "[redacted]" in error.message
        crashed = server_pid(python_server)
        assert not process_alive(crashed)
        # The next operation starts the server again.
        result = await app.run_agent("assistant", "Echo.")
        assert result.output == "back"
        assert server_pid(python_server) != crashed


async def test_a_message_over_the_bound_stops_the_server(python_server: Any) -> None:
    provider = create_mcp_tool_provider(command=python_server.command, args=python_server.args)
    async with provider:
        first = server_pid(python_server) if python_server.observed("pid") else None
        with anyio.fail_after(30), pytest.raises(FevexRunError) as caught:
            await provider.call_tool("flood", {}, call("flood"))
        assert caught.value.code == "MCP_PROTOCOL_ERROR"
        assert "over 16777216 bytes" in caught.value.message
        flooded = server_pid(python_server)
        assert first in (None, flooded)
        assert not process_alive(flooded)
        assert await provider.call_tool("echo", {"word": "after"}, call("echo")) == "echo: after"


async def test_close_kills_the_whole_process_group(python_server: Any) -> None:
    provider = create_mcp_tool_provider(command=python_server.command, args=python_server.args)
    grandchild = int(await provider.call_tool("spawn", {}, call("spawn")))
    server = server_pid(python_server)
    assert process_alive(server)
    assert process_alive(grandchild)
    await provider.aclose()
    assert not process_alive(server)
    assert not process_alive(grandchild)


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.mark.parametrize("tool", ["detach", "daemonize"])
async def test_close_ends_what_the_server_started_outside_its_process_group(
    python_server: Any, tool: str
) -> None:
    provider = create_mcp_tool_provider(command=python_server.command, args=python_server.args)
    escaped = int(await provider.call_tool(tool, {}, call(tool)))
    try:
        server = server_pid(python_server)
        assert process_alive(escaped)
        # It left the server's process group; the daemon also left the server's tree.
        assert os.getpgid(escaped) != os.getpgid(server)
        if tool == "daemonize":
            assert parent_of(escaped) != server
        await provider.aclose()
        assert not process_alive(server)
        assert not process_alive(escaped)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(escaped, signal.SIGKILL)


async def test_a_server_that_exits_takes_its_daemons_with_it(python_server: Any) -> None:
    provider = create_mcp_tool_provider(command=python_server.command, args=python_server.args)
    daemon = int(await provider.call_tool("daemonize", {}, call("daemonize")))
    try:
        with pytest.raises(FevexRunError) as caught:
            await provider.call_tool("crash", {}, call("crash"))
        assert caught.value.code == "MCP_SERVER_EXITED"
        await eventually(lambda: anyio.to_thread.run_sync(lambda: not process_alive(daemon)))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(daemon, signal.SIGKILL)
        await provider.aclose()


# -- change notifications -------------------------------------------------------------


async def test_a_tool_list_change_refreshes_the_kept_list(python_server: Any) -> None:
    provider = create_mcp_tool_provider(command=python_server.command, args=python_server.args)
    async with provider:
        first = {tool.name for tool in await provider.list_tools(DISCOVERY)}
        await provider.list_tools(DISCOVERY)
        # The server notifies its changes, so the list is kept between discoveries.
        assert python_server.observed("tools-listed") == "1"
        assert "extra" not in first
        assert await provider.call_tool("grow", {}, call("grow")) == "grown"

        async def grown() -> bool:
            names = {tool.name for tool in await provider.list_tools(DISCOVERY)}
            return "extra" in names

        assert await eventually(grown)
        assert python_server.observed("tools-listed") == "2"
        assert await provider.call_tool("extra", {}, call("extra")) == "extra!"


async def test_a_handshake_era_server_notifies_tool_list_changes(
    python_server: Any,
) -> None:
    script = Path(python_server.args[0]).with_name("handshake_server.py")
    provider = create_mcp_tool_provider(
        command=python_server.command, args=[str(script), str(python_server.state)]
    )
    async with provider:
        first = {tool.name for tool in await provider.list_tools(DISCOVERY)}
        await provider.list_tools(DISCOVERY)
        assert first == {"grow", "hang"}
        assert python_server.observed("tools-listed") == "1"
        assert await provider.call_tool("grow", {}, call("grow")) == "called grow"

        async def grown() -> bool:
            names = {tool.name for tool in await provider.list_tools(DISCOVERY)}
            return "extra" in names

        assert await eventually(grown)
        assert python_server.observed("tools-listed") == "2"
