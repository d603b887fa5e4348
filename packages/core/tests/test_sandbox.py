"""LocalSandbox's limits, proven on this machine, and the sandbox tools in agent runs."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import anyio
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


# -- files that are not regular files ------------------------------------------------------
#
# Each refusal below must come at once: a sandbox that opened a FIFO waited for a writer for
# ever. The bound is the test's, so that a regression fails instead of hanging the suite.


def _release_readers(fifo: Path) -> None:
    """Lets a reader stuck opening ``fifo`` through, so that a failed test ends."""
    # OSError: no reader waits (ENXIO), or the FIFO is gone.
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


async def _refusals(sandbox: LocalSandbox, path: str) -> list[str]:
    codes = []
    for attempt in (sandbox.read_file(path), sandbox.write_file(path, "overwritten")):
        with anyio.fail_after(5), pytest.raises(FevexRunError) as caught:
            await attempt
        codes.append(caught.value.code)
    return codes


@needs_unshare
async def test_a_fifo_made_by_a_command_is_refused_without_blocking(tmp_path: Path) -> None:
    sandbox = LocalSandbox(tmp_path, timeout=30)
    made = await sandbox.run_command("mkfifo f")
    assert made.exit_code == 0, made.stderr
    try:
        assert await _refusals(sandbox, "f") == ["SANDBOX_NOT_A_FILE", "SANDBOX_NOT_A_FILE"]
    finally:
        _release_readers(tmp_path / "f")
    # Nothing waits on the FIFO: a writer finds no reader.
    with pytest.raises(OSError, match="No such device or address"):
        os.open(tmp_path / "f", os.O_WRONLY | os.O_NONBLOCK)


async def test_special_files_and_directories_are_refused_with_a_stable_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = LocalSandbox(tmp_path, timeout=30)
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "notes").mkdir()
    # A socket's path is short only relative to the workspace (sun_path holds 108 bytes).
    monkeypatch.chdir(tmp_path)
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind("sock")
        listening.listen()
        try:
            for path in ("pipe", "notes", ".", "sock"):
                codes = await _refusals(sandbox, path)
                assert codes == ["SANDBOX_NOT_A_FILE", "SANDBOX_NOT_A_FILE"], path
        finally:
            _release_readers(tmp_path / "pipe")
    assert (tmp_path / "notes").is_dir()
    assert stat.S_ISFIFO((tmp_path / "pipe").lstat().st_mode)


async def test_devices_are_refused_before_they_are_opened() -> None:
    # /dev as the workspace: its character devices are real, and reading /dev/zero or
    # writing /dev/null would succeed if the sandbox opened them.
    sandbox = LocalSandbox("/dev", timeout=30, max_output_bytes=16)
    for device in ("null", "zero"):
        assert await _refusals(sandbox, device) == ["SANDBOX_NOT_A_FILE", "SANDBOX_NOT_A_FILE"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="file leases are Linux's")
async def test_a_file_another_process_holds_a_lease_on_is_not_waited_for(tmp_path: Path) -> None:
    # A write lease makes every other open of the file wait until the holder lets go, up to
    # /proc/sys/fs/lease-break-time (45 s by default).
    leased = tmp_path / "leased.txt"
    leased.write_text("held")
    # The holder starts in a moment, before the event loop has anything else to do.
    with subprocess.Popen(  # noqa: ASYNC220
        [sys.executable, "-c", LEASE_HOLDER, str(leased)], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "leased"
            sandbox = LocalSandbox(tmp_path, timeout=30)
            assert await _refusals(sandbox, "leased.txt") == ["SANDBOX_FILE_BUSY"] * 2
        finally:
            holder.kill()
    assert leased.read_text() == "held"


LEASE_HOLDER = """
import fcntl, os, signal, sys, time
signal.signal(signal.SIGIO, signal.SIG_IGN)  # a lease break is signalled; keep the lease
descriptor = os.open(sys.argv[1], os.O_RDONLY)
fcntl.fcntl(descriptor, fcntl.F_SETLEASE, fcntl.F_WRLCK)
print("leased", flush=True)
time.sleep(120)
"""


async def test_a_file_operation_past_the_timeout_is_abandoned_with_a_stable_code(
    tmp_path: Path,
) -> None:
    sandbox = LocalSandbox(tmp_path, timeout=0.001)
    started = time.monotonic()
    with pytest.raises(FevexRunError) as caught:
        await sandbox.write_file("big.txt", "x" * 64_000_000)
    assert caught.value.code == "SANDBOX_TIMEOUT"
    assert time.monotonic() - started < 1


async def test_unnameable_paths_and_commands_are_refused(tmp_path: Path) -> None:
    sandbox = LocalSandbox(tmp_path)
    for path in ("bad\ud800.txt", "a\x00b"):
        assert await _refusals(sandbox, path) == ["SANDBOX_PATH_REFUSED"] * 2
    with pytest.raises(FevexRunError) as caught:
        await sandbox.write_file("text.txt", "lone \udc00 surrogate")
    assert caught.value.code == "INVALID_ARGUMENT"
    assert not (tmp_path / "text.txt").exists()
    for command in ("echo \x00", ["echo", "\ud800"]):
        with pytest.raises(FevexRunError) as caught:
            await sandbox.run_command(command)
        assert caught.value.code == "INVALID_ARGUMENT"
