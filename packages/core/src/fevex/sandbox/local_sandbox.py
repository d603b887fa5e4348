"""A sandbox on this machine for development: a workspace folder, a time limit, an output
bound and, on Linux, no network.

Each command runs in a new session (its own process group) so that the timeout kills it
with every process it forked. With ``network=False`` the command runs under ``unshare
--net`` (util-linux): a network namespace holding only a down loopback interface, so no
connection can be made, not even to this machine. Where no such namespace can be made
(not Linux, no ``unshare``, no privilege for namespaces) the sandbox refuses to run commands
rather than run them with network (``SANDBOX_NETWORK_UNAVAILABLE``). When ``unshare`` can
also make a PID namespace, the command is its init process: a process that left the group
(``setsid``) still dies with it.

Files are opened without blocking: only regular files are read or written. A FIFO, socket,
device or directory is refused before it is opened (``SANDBOX_NOT_A_FILE``), and the open
itself is non-blocking, so one swapped in meanwhile (or a file another process holds a
lease on) is refused instead of waited for. Every operation runs in one of fevex's daemon
worker threads and is bounded by the sandbox's ``timeout`` (``SANDBOX_TIMEOUT``): a thread stuck in
the kernel (a file system that stopped answering) is abandoned, and keeps neither the
event loop's executor nor the interpreter's exit.

This is not a security boundary against hostile code: the command runs as this user, with
this user's file permissions outside the workspace. Use a container or VM sandbox for that.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TypeVar

from fevex._ground.worker_threads import in_worker_thread
from fevex.errors import FevexConfigurationError, FevexRunError
from fevex.sandbox.sandbox import CommandResult

__all__ = ["LocalSandbox"]

_READ_CHUNK = 65536
# How long output pipes may stay open once the command's processes were killed: a command
# returns within its timeout plus this.
_DRAIN_SECONDS = 2.0
# O_NONBLOCK: opening a FIFO (or a file under another process's lease) must fail at once
# rather than wait for a writer; on a regular file it changes nothing.
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK
_T = TypeVar("_T")
_isolation_cache: dict[bool, tuple[str, ...] | None] = {}


class LocalSandbox:
    """Commands and files in ``workspace`` (created when missing). ``timeout`` bounds each
    operation in seconds (a command is killed at it; a file read or write past it is
    ``SANDBOX_TIMEOUT``); ``max_output_bytes`` bounds what a command's stdout and stderr
    each keep and what a file read returns; ``network=False`` (the default) runs commands
    without network, or not at all where that cannot be enforced."""

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        timeout: float = 30.0,
        max_output_bytes: int = 65536,
        network: bool = False,
    ) -> None:
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
            raise FevexConfigurationError("INVALID_CONFIG", "timeout must be positive seconds.")
        if (
            not isinstance(max_output_bytes, int)
            or isinstance(max_output_bytes, bool)
            or max_output_bytes < 1
        ):
            raise FevexConfigurationError(
                "INVALID_CONFIG", "max_output_bytes must be a positive integer."
            )
        Path(workspace).mkdir(parents=True, exist_ok=True)
        self.workspace = Path(workspace).resolve(strict=True)
        self.timeout = float(timeout)
        self.max_output_bytes = max_output_bytes
        self.network = bool(network)

    def __repr__(self) -> str:
        return f"LocalSandbox(workspace={str(self.workspace)!r}, network={self.network})"

    # -- files ----------------------------------------------------------------------

    def path(self, path: str) -> Path:
        """The absolute path of ``path`` inside the workspace, symlinks resolved;
        ``SANDBOX_PATH_REFUSED`` for ``..``, an absolute path outside the workspace, or a
        symlink that leads out of it."""
        if not isinstance(path, str) or not path or not _nameable(path):
            raise _refused(path, "it is not a path")
        given = Path(path)
        if ".." in given.parts:
            raise _refused(path, "'..' is not allowed")
        candidate = given if given.is_absolute() else self.workspace / given
        try:
            resolved = candidate.resolve(strict=False)
        except (OSError, RuntimeError) as error:  # RuntimeError: a symlink loop
            raise _refused(path, f"it cannot be resolved ({error})") from None
        if resolved != self.workspace and not resolved.is_relative_to(self.workspace):
            raise _refused(path, "it is outside the workspace")
        return resolved

    async def read_file(self, path: str) -> str:
        return await self._within_timeout(f"Reading {path!r}", lambda: self._read(path))

    def _read(self, path: str) -> str:
        descriptor = _open_regular_file(path, self.path(path), os.O_RDONLY)
        with os.fdopen(descriptor, "rb") as file:
            data = file.read(self.max_output_bytes + 1)
        if len(data) > self.max_output_bytes:
            raise FevexRunError(
                "SANDBOX_OUTPUT_TOO_LARGE",
                f"File {path!r} is larger than the sandbox's {self.max_output_bytes} bytes.",
            )
        return data.decode("utf-8", errors="replace")

    async def write_file(self, path: str, content: str) -> None:
        if not isinstance(content, str):
            raise FevexRunError("INVALID_ARGUMENT", "A file's content must be text.")
        await self._within_timeout(f"Writing {path!r}", lambda: self._write(path, content))

    def _write(self, path: str, content: str) -> None:
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:
            raise FevexRunError(
                "INVALID_ARGUMENT", "A file's content must be text UTF-8 can encode."
            ) from None
        target = self.path(path)
        # The workspace itself has no folder in the workspace: it is refused below, as the
        # directory it is.
        if target != self.workspace:
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise _refused(path, f"its folder cannot be made ({error.strerror})") from None
            # The parent may have been swapped for a symlink meanwhile: check again, then
            # refuse to follow a symlink at the file itself.
            self.path(str(target.parent))
        # Truncated only once it is known to be a regular file: O_TRUNC at the open would
        # act on whatever was swapped in.
        descriptor = _open_regular_file(path, target, os.O_WRONLY | os.O_CREAT)
        with os.fdopen(descriptor, "wb") as file:
            file.truncate(0)
            file.write(data)

    async def _within_timeout(self, what: str, work: Callable[[], _T]) -> _T:
        """``work()`` in a daemon worker thread, awaited at most ``timeout`` seconds."""
        try:
            return await asyncio.wait_for(in_worker_thread(work), self.timeout)
        except TimeoutError:
            raise FevexRunError(
                "SANDBOX_TIMEOUT",
                f"{what} did not finish within the sandbox's {self.timeout:g} s; it was "
                "abandoned (a write may still complete).",
            ) from None

    # -- commands -------------------------------------------------------------------

    async def run_command(self, command: str | Sequence[str]) -> CommandResult:
        if isinstance(command, str):
            if not command.strip():
                raise FevexRunError("INVALID_ARGUMENT", "The command is empty.")
            argv = ["/bin/sh", "-c", command]
        else:
            argv = [str(part) for part in command]
            if not argv:
                raise FevexRunError("INVALID_ARGUMENT", "The command is empty.")
        if not all(_nameable(part) for part in argv):
            raise FevexRunError(
                "INVALID_ARGUMENT",
                "A command must be text without NUL or lone surrogates; it did not run.",
            )
        deadline = time.monotonic() + self.timeout
        # A thread, not asyncio's subprocess: asyncio waits for the pipes to close as well,
        # so a background child holding them would pass for a command still running. The
        # thread kills the command at the deadline; the bound here answers even when the
        # kill itself hangs (a process stuck in the kernel).
        try:
            return await asyncio.wait_for(
                in_worker_thread(self._run, argv, deadline),
                self.timeout + 2 * _DRAIN_SECONDS,
            )
        except TimeoutError:
            raise FevexRunError(
                "SANDBOX_TIMEOUT",
                f"The command did not end within the sandbox's {self.timeout:g} s, and its "
                "processes could not be collected after they were killed.",
            ) from None

    def _run(self, argv: list[str], deadline: float) -> CommandResult:
        if not self.network:
            isolation = network_isolation()
            if isolation is None:
                raise FevexRunError(
                    "SANDBOX_NETWORK_UNAVAILABLE",
                    "This sandbox must run commands without network, and this machine "
                    "cannot make a network namespace (unshare --net); the command did not run.",
                )
            argv = [*isolation, *argv]
        if time.monotonic() >= deadline:
            # Finding the isolation took the whole timeout: the caller has been answered.
            raise FevexRunError("SANDBOX_TIMEOUT", "The command did not start in time.")
        process = subprocess.Popen(
            argv,
            cwd=self.workspace,
            env=self._environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert process.stdout is not None
        assert process.stderr is not None
        stdout = _BoundedReader(process.stdout, self.max_output_bytes)
        stderr = _BoundedReader(process.stderr, self.max_output_bytes)
        timed_out = False
        try:
            process.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # Whatever the command left behind (a background child) ends with it.
            _kill_group(process.pid)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()
        drained = time.monotonic() + _DRAIN_SECONDS
        stdout.join(_DRAIN_SECONDS)
        stderr.join(max(drained - time.monotonic(), 0.0))
        return CommandResult(
            None if timed_out else process.returncode,
            stdout.text(),
            stderr.text(),
            timed_out=timed_out,
            truncated=stdout.truncated or stderr.truncated,
        )

    def _environment(self) -> dict[str, str]:
        # The app's environment holds its secrets: a command sees only these.
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.workspace),
            "LANG": "C.UTF-8",
        }


class _BoundedReader(threading.Thread):
    """Reads a pipe to its end, keeping up to ``bound`` bytes; the rest is read and dropped,
    so that a command is never blocked on a full pipe."""

    def __init__(self, pipe: IO[bytes], bound: int) -> None:
        super().__init__(daemon=True)
        self.pipe = pipe
        self.bound = bound
        self.kept = bytearray()
        self.truncated = False
        self.start()

    def run(self) -> None:
        with self.pipe:
            while chunk := os.read(self.pipe.fileno(), _READ_CHUNK):
                room = self.bound - len(self.kept)
                if len(chunk) > room:
                    self.truncated = True
                self.kept += chunk[: max(room, 0)]

    def text(self) -> str:
        if self.is_alive():
            # A process outside the command's group still holds the pipe.
            self.truncated = True
        return bytes(self.kept).decode("utf-8", errors="replace")


def network_isolation() -> tuple[str, ...] | None:
    """The command prefix that takes the network away on this machine, or ``None`` when
    there is none. A PID namespace is added where it can be, so that no process of the
    command outlives it."""
    if False in _isolation_cache:
        return _isolation_cache[False]
    found: tuple[str, ...] | None = None
    unshare = shutil.which("unshare") if sys.platform.startswith("linux") else None
    if unshare is not None:
        for prefix in (
            (unshare, "--net", "--pid", "--fork", "--kill-child"),
            (unshare, "--net", "--map-root-user", "--pid", "--fork", "--kill-child"),
            (unshare, "--net"),
            (unshare, "--net", "--map-root-user"),
        ):
            probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=10, check=False)
            if probe.returncode == 0:
                found = (*prefix, "--")
                break
    _isolation_cache[False] = found
    return found


def _open_regular_file(path: str, target: Path, flags: int) -> int:
    """A descriptor of the regular file at ``target``, never of anything else: what is not
    a regular file is refused before it is opened, and checked again on the descriptor
    (something may have been swapped in between). ``O_CREAT`` in ``flags`` creates it."""
    try:
        found = os.lstat(target)
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise _not_found(path) from None
    except OSError as error:
        raise _refused(path, error.strerror or "it cannot be examined") from None
    else:
        _require_regular(path, found.st_mode)
    try:
        descriptor = os.open(target, flags | _OPEN_FLAGS, 0o644)
    except FileNotFoundError:
        if flags & os.O_CREAT:
            raise _refused(path, "its folder is gone") from None
        raise _not_found(path) from None
    except BlockingIOError:
        raise FevexRunError(
            "SANDBOX_FILE_BUSY",
            f"File {path!r} is held by another process (a lease); it was not waited for.",
        ) from None
    except OSError as error:
        raise _refused(path, error.strerror or "it cannot be opened") from None
    try:
        _require_regular(path, os.fstat(descriptor).st_mode)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _require_regular(path: str, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISLNK(mode):
        # Only when one was swapped in after the path was resolved.
        raise _refused(path, "it is a symlink")
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    kind = next((name for test, name in kinds if test(mode)), "not a regular file")
    raise FevexRunError(
        "SANDBOX_NOT_A_FILE",
        f"{path!r} is {kind}; the sandbox reads and writes regular files only. It was not opened.",
    )


def _nameable(text: str) -> bool:
    """Whether ``text`` can be given to the operating system (a path, an argument)."""
    if "\x00" in text:
        return False
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return False
    return True


def _not_found(path: str) -> FevexRunError:
    return FevexRunError("SANDBOX_FILE_NOT_FOUND", f"There is no file {path!r} in the sandbox.")


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _refused(path: object, why: str) -> FevexRunError:
    return FevexRunError(
        "SANDBOX_PATH_REFUSED",
        f"The sandbox refused path {path!r}: {why}. Paths are relative to the workspace.",
    )
