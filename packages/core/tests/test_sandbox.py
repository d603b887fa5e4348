"""LocalSandbox's limits, proven on this machine, and the sandbox tools in agent runs."""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path

import pytest

from fevex import create_fevex
from fevex.agents import define_agent
from fevex.errors import FevexConfigurationError, FevexRunError, RunPausedError
from fevex.policies import PolicyRequest
from fevex.sandbox import LocalSandbox, Sandbox, network_isolation
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio

needs_unshare = pytest.mark.skipif(
    not sys.platform.startswith("linux") or shutil.which("unshare") is None,
    reason="needs the unshare program (util-linux) on Linux",
)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose: it runs nothing.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_the_local_sandbox_is_a_sandbox(tmp_path: Path) -> None:
    assert isinstance(LocalSandbox(tmp_path), Sandbox)
    for bad in ({"timeout": 0}, {"max_output_bytes": 0}):
        with pytest.raises(FevexConfigurationError):
            LocalSandbox(tmp_path, **bad)  # type: ignore[arg-type]


async def test_files_are_written_and_read_inside_the_workspace(tmp_path: Path) -> None:
    sandbox = LocalSandbox(tmp_path / "ws")
    await sandbox.write_file("notes/a.txt", "hello")
    assert (tmp_path / "ws" / "notes" / "a.txt").read_text() == "hello"
    assert await sandbox.read_file("notes/a.txt") == "hello"
    assert await sandbox.read_file(str(tmp_path / "ws" / "notes" / "a.txt")) == "hello"


@pytest.mark.parametrize(
    "path", ["../outside.txt", "notes/../../outside.txt", "/etc/passwd", "/tmp/x", ""]
)
async def test_paths_outside_the_workspace_are_refused(tmp_path: Path, path: str) -> None:
    sandbox = LocalSandbox(tmp_path / "ws")
    (tmp_path / "outside.txt").write_text("secret")
    for attempt in (sandbox.read_file(path), sandbox.write_file(path, "x")):
        with pytest.raises(FevexRunError) as caught:
            await attempt
        assert caught.value.code == "SANDBOX_PATH_REFUSED"
    assert (tmp_path / "outside.txt").read_text() == "secret"


async def test_symlinks_leading_out_of_the_workspace_are_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    sandbox = LocalSandbox(workspace)
    (tmp_path / "secret.txt").write_text("secret")
    (workspace / "link.txt").symlink_to(tmp_path / "secret.txt")
    (workspace / "dir").symlink_to(tmp_path)
    for path in ("link.txt", "dir/secret.txt", "dir/new.txt"):
        with pytest.raises(FevexRunError) as caught:
            await sandbox.read_file(path)
        assert caught.value.code in ("SANDBOX_PATH_REFUSED", "SANDBOX_FILE_NOT_FOUND")
        with pytest.raises(FevexRunError) as caught:
            await sandbox.write_file(path, "overwritten")
        assert caught.value.code == "SANDBOX_PATH_REFUSED"
    assert (tmp_path / "secret.txt").read_text() == "secret"
    assert not (tmp_path / "new.txt").exists()


@needs_unshare
async def test_a_command_runs_in_the_workspace_with_a_clean_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APP_SECRET", "s3cr3t")
    sandbox = LocalSandbox(tmp_path)
    workspace = str(tmp_path.resolve())  # noqa: ASYNC240
    result = await sandbox.run_command("pwd; echo $APP_SECRET; exit 3")
    assert result.exit_code == 3
    assert not result.timed_out
    assert result.stdout.splitlines()[0] == workspace
    assert "s3cr3t" not in result.stdout


@needs_unshare
async def test_a_command_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    sandbox = LocalSandbox(tmp_path, timeout=1)
    # The child detaches into its own session, outliving its parent's process group.
    command = (
        "setsid sh -c 'echo $$ > child.pid; exec sleep 300' & "
        "sleep 0.2; sh -c 'echo $$ > grandchild.pid; exec sleep 300' & sleep 300"
    )
    result = await sandbox.run_command(command)
    assert result.timed_out
    assert result.exit_code is None
    assert (tmp_path / "child.pid").exists()
    assert (tmp_path / "grandchild.pid").exists()
    assert _sleepers(tmp_path) == []


@needs_unshare
async def test_a_commands_background_children_do_not_outlive_it(tmp_path: Path) -> None:
    sandbox = LocalSandbox(tmp_path, timeout=30)
    result = await sandbox.run_command("sleep 300 & echo started")
    assert result.exit_code == 0
    assert not result.timed_out
    assert result.stdout == "started\n"
    assert _sleepers(tmp_path) == []


def _sleepers(workspace: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if cwd == str(workspace.resolve()) and b"sleep" in cmdline and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


@needs_unshare
async def test_output_past_the_bound_is_cut(tmp_path: Path) -> None:
    sandbox = LocalSandbox(tmp_path, max_output_bytes=1000, timeout=30)
    result = await sandbox.run_command("head -c 5000000 /dev/zero | tr '\\0' x; echo done >&2")
    assert result.exit_code == 0
    assert result.stdout == "x" * 1000
    assert result.truncated
    assert result.stderr == "done\n"
    (tmp_path / "big.txt").write_text("y" * 2000)
    with pytest.raises(FevexRunError) as caught:
        await sandbox.read_file("big.txt")
    assert caught.value.code == "SANDBOX_OUTPUT_TOO_LARGE"


@needs_unshare
async def test_without_network_a_loopback_connection_fails(tmp_path: Path) -> None:
    if network_isolation() is None:
        pytest.skip("unshare cannot make a network namespace here (no privilege)")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        connect = f"socket.create_connection(('127.0.0.1', {port}), timeout=3)"
        probe = f"{sys.executable} -c \"import socket; {connect}; print('connected')\""
        closed = await LocalSandbox(tmp_path, timeout=20).run_command(probe)
        assert closed.exit_code != 0
        assert "connected" not in closed.stdout
        assert "Error" in closed.stderr
        # The same command with network=True connects: the refusal above is the sandbox's.
        opened = await LocalSandbox(tmp_path, network=True, timeout=20).run_command(probe)
        assert opened.exit_code == 0
        assert opened.stdout.strip() == "connected"


async def test_commands_are_refused_when_no_network_isolation_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fevex.sandbox.local_sandbox as local

    monkeypatch.setattr(local, "_isolation_cache", {False: None})
    with pytest.raises(FevexRunError) as caught:
        await LocalSandbox(tmp_path).run_command(f"touch {tmp_path}/ran")
    assert caught.value.code == "SANDBOX_NETWORK_UNAVAILABLE"
    assert not (tmp_path / "ran").exists()


@needs_unshare
async def test_an_agent_given_a_sandbox_gets_its_tools(tmp_path: Path) -> None:
    model = FakeModel(
        {
            "tool_calls": [
                {
                    "id": "w",
                    "name": "sandbox_write_file",
                    "input": {"path": "a.txt", "content": "hi"},
                },
                {"id": "r", "name": "sandbox_run_command", "input": {"command": "cat a.txt"}},
                {"id": "x", "name": "sandbox_read_file", "input": {"path": "../etc/passwd"}},
            ]
        },
        {"output": "done"},
    )
    app = create_fevex(
        models={"default": model},
        agents=[define_agent(name="coder", instructions="Code.", sandbox=LocalSandbox(tmp_path))],
    )
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("coder", "go")
    assert caught.value.code == "SANDBOX_PATH_REFUSED"
    assert (tmp_path / "a.txt").read_text() == "hi"
    (run,) = await app.list_runs()
    (ran,) = [
        event
        for event in await app.list_events(run.id)
        if event.type == "tool.completed" and event.payload["tool_name"] == "sandbox_run_command"
    ]
    assert ran.payload["output"]["stdout"] == "hi"


async def test_sandbox_tools_are_gated_by_policies_and_approvals(tmp_path: Path) -> None:
    seen: list[str] = []

    def deny_commands(request: PolicyRequest) -> None:
        seen.append(request.tool_name)
        if request.tool_name == "sandbox_run_command":
            raise PermissionError("no commands")

    call = {"id": "r", "name": "sandbox_run_command", "input": {"command": "touch ran"}}
    app = create_fevex(
        models={"default": FakeModel({"tool_calls": [call]})},
        policies=[deny_commands],
        agents=[define_agent(name="coder", instructions="Code.", sandbox=LocalSandbox(tmp_path))],
    )
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("coder", "go")
    assert caught.value.code == "POLICY_DENIED"
    approving = create_fevex(
        models={"default": FakeModel({"tool_calls": [call]})},
        agents=[
            define_agent(
                name="coder",
                instructions="Code.",
                sandbox=LocalSandbox(tmp_path),
                sandbox_approval="required",
            )
        ],
    )
    with pytest.raises(RunPausedError) as paused:
        await approving.run_agent("coder", "go")
    assert paused.value.pause["approvals"][0]["tool_name"] == "sandbox_run_command"
    assert not (tmp_path / "ran").exists()
