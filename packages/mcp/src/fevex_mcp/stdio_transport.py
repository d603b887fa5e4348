"""A stdio server process and the streams the SDK's session speaks over.

fevex-mcp starts the process itself rather than through the SDK's ``stdio_client``, for
two reasons: that client merges part of the parent's environment into the child's (the
app must name everything the child sees), and it kills the process group only when the
server outlives a grace period, so a grandchild of a server that exits on its own would
survive. Here the child runs in a new session (its own process group), sees exactly the
environment the app gave, and on close the whole group is terminated, always.

A process that leaves the group (a child that calls ``setsid()``, a daemon's double fork)
is out of the group's reach, so on Linux the server runs under fevex-mcp's reaper
(:mod:`fevex_mcp.server_reaper`, the group's leader): the child subreaper of the server's
whole tree, which ends every process below it when the server exits, the group is
terminated or fevex-mcp's process dies.

Messages are newline-delimited JSON-RPC. A line longer than ``MAX_MESSAGE_BYTES`` ends the
session (the server is stopped) instead of growing a buffer without bound. The server's
stderr is read so that it never blocks, and only its last few lines are kept, for the
message of a failed start or a crash.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter

from fevex_mcp.command import StdioCommand

__all__ = ["EXIT_GRACE", "MAX_MESSAGE_BYTES", "ProcessRecord", "kill_group", "stdio_streams"]

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# How long a server has to exit by itself once its stdin is closed (the MCP shutdown
# sequence), and then to go after SIGTERM before the group gets SIGKILL.
EXIT_GRACE = 1.0
TERM_GRACE = 2.0
_STDERR_KEPT = 4096
# Where the server runs under the reaper: started by this Python, without site-packages.
_REAPER = (
    Path(__file__).with_name("server_reaper.py")
    if sys.platform == "linux" and sys.executable
    else None
)

Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]


@dataclass
class ProcessRecord:
    """What the owner of a session knows about its process: the id of the process started
    (the server, or on Linux its reaper; also the group's id), whether its output ended,
    how it ended, and the tail of what it wrote to stderr."""

    pid: int | None = None
    returncode: int | None = None
    ended: anyio.Event = field(default_factory=anyio.Event)
    oversized: bool = False
    stderr: deque[bytes] = field(default_factory=lambda: deque(maxlen=64))
    _stderr_size: int = 0

    def keep_stderr(self, chunk: bytes) -> None:
        self.stderr.append(chunk)
        self._stderr_size += len(chunk)
        while self._stderr_size > _STDERR_KEPT and len(self.stderr) > 1:
            self._stderr_size -= len(self.stderr.popleft())

    def last_stderr_line(self) -> str:
        text = b"".join(self.stderr).decode("utf-8", "replace")
        lines = [line for line in text.splitlines() if line.strip()]
        return lines[-1] if lines else ""


def kill_group(pid: int) -> None:
    """End a server's whole process group, now, without an event loop: for a provider
    dropped or an interpreter exiting with its server still running. Under the reaper
    the group gets SIGTERM, on which the reaper ends the server's whole tree (SIGKILL
    within its grace); without it, SIGKILL."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL if _REAPER is None else signal.SIGTERM)


@contextlib.asynccontextmanager
async def stdio_streams(command: StdioCommand, record: ProcessRecord) -> AsyncIterator[Streams]:
    """Start ``command`` and yield the session's (read, write) streams; on exit, stop the
    server by the MCP shutdown sequence and then terminate its whole process group.

    Raises ``OSError`` when the process cannot be started (the caller turns it into
    ``MCP_STARTUP_FAILED``)."""
    process = await anyio.open_process(
        _command_line(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=command.cwd,
        env=dict(command.environment),
        start_new_session=True,
    )
    record.pid = process.pid
    # From here to the task group, no await: a cancellation in between would leak it.
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    async with anyio.create_task_group() as group:
        group.start_soon(_read_stdout, process, read_writer, record)
        group.start_soon(_read_stderr, process, record)
        group.start_soon(_write_stdin, process, write_reader, read_writer, record)
        try:
            yield read_stream, write_stream
        finally:
            # Shielded: a cancelled caller must not leave the server running.
            with anyio.CancelScope(shield=True):
                await _stop(process, record)
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
            group.cancel_scope.cancel()


def _command_line(command: StdioCommand) -> list[str]:
    """What is started: the server's command, or on Linux the reaper running it."""
    if _REAPER is None:
        return [command.command, *command.args]
    executable = _executable(command)
    return [sys.executable, "-I", "-S", str(_REAPER), executable, command.command, *command.args]


def _executable(command: StdioCommand) -> str:
    """The file the command names, found as starting it directly would: a name with a
    slash from the server's working directory, a bare name in the child's ``PATH``; a
    missing one is the ``FileNotFoundError``, one that is not executable the
    ``PermissionError``, that starting it would raise."""
    name = command.command
    if os.sep not in name:
        found = shutil.which(name, path=command.environment.get("PATH", os.defpath))
        if found is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
        return os.path.abspath(found)
    path = os.path.abspath(os.path.join(command.cwd or os.getcwd(), name))
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
    if shutil.which(path) is None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), name)
    return path


async def _read_stdout(
    process: anyio.abc.Process,
    read_writer: MemoryObjectSendStream[SessionMessage | Exception],
    record: ProcessRecord,
) -> None:
    """Hand the server's messages to the session until its output ends (or a message is
    over ``MAX_MESSAGE_BYTES``); either way ``record.ended`` is set."""
    assert process.stdout is not None
    try:
        async with read_writer:
            await _read_messages(process.stdout, read_writer, record)
        if record.oversized:
            # Drained to the end, so that the pipe closes once the server is stopped.
            record.ended.set()
            async for _ in process.stdout:
                pass
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        pass
    finally:
        record.ended.set()


async def _read_messages(
    stdout: anyio.abc.ByteReceiveStream,
    read_writer: MemoryObjectSendStream[SessionMessage | Exception],
    record: ProcessRecord,
) -> None:
    buffer = bytearray()
    async for chunk in stdout:
        # Only the new chunk is searched: a long line costs its length once.
        start = len(buffer)
        buffer += chunk
        end = buffer.find(b"\n", start)
        while end >= 0:
            if end > MAX_MESSAGE_BYTES:
                record.oversized = True
                return
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            if line.strip():
                await read_writer.send(_parse(line))
            end = buffer.find(b"\n")
        if len(buffer) > MAX_MESSAGE_BYTES:
            record.oversized = True
            return


async def _read_stderr(process: anyio.abc.Process, record: ProcessRecord) -> None:
    assert process.stderr is not None
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        async for chunk in process.stderr:
            record.keep_stderr(chunk)


async def _write_stdin(
    process: anyio.abc.Process,
    write_reader: MemoryObjectReceiveStream[SessionMessage],
    read_writer: MemoryObjectSendStream[SessionMessage | Exception],
    record: ProcessRecord,
) -> None:
    assert process.stdin is not None
    try:
        async with write_reader:
            async for message in write_reader:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send(data.encode() + b"\n")
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        # The server stopped reading: end the session rather than leave a request
        # waiting for an answer that cannot come.
        await read_writer.aclose()
        record.ended.set()


async def _stop(process: anyio.abc.Process, record: ProcessRecord) -> None:
    """Close stdin, give the server ``EXIT_GRACE`` to exit, then terminate its process
    group whether or not it did: a grandchild it started must not outlive it."""
    if process.stdin is not None:
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    # Polled, not process.wait(): that also waits for the pipes to close, which a
    # grandchild holding them would delay until it is killed below.
    with anyio.move_on_after(EXIT_GRACE):
        while process.returncode is None:  # noqa: ASYNC110
            await anyio.sleep(0.01)
    await terminate_posix_process_tree(process, TERM_GRACE)
    with anyio.move_on_after(TERM_GRACE):
        await process.wait()
    record.returncode = process.returncode
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await stream.aclose()


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as error:
        # Handed to the session as a value, as the SDK's own transport does.
        return error
