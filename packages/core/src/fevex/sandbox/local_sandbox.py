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

This is not a security boundary against hostile code: the command runs as this user, with
this user's file permissions outside the workspace. Use a container or VM sandbox for that.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from fevex.errors import FevexConfigurationError, FevexRunError
from fevex.sandbox.sandbox import CommandResult

__all__ = ["LocalSandbox"]

_READ_CHUNK = 65536
# How long output pipes may stay open once the command's processes were killed.
_DRAIN_SECONDS = 2.0
_isolation_cache: dict[bool, tuple[str, ...] | None] = {}


class LocalSandbox:
    """Commands and files in ``workspace`` (created when missing). ``timeout`` bounds each
    command in seconds; ``max_output_bytes`` bounds what a command's stdout and stderr each
    keep and what a file read returns; ``network=False`` (the default) runs commands without
    network, or not at all where that cannot be enforced."""

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
        if not isinstance(path, str) or not path or "\x00" in path:
            raise _refused(path, "it is not a path")
        given = Path(path)
        if ".." in given.parts:
            raise _refused(path, "'..' is not allowed")
        candidate = given if given.is_absolute() else self.workspace / given
        resolved = candidate.resolve(strict=False)
        if resolved != self.workspace and not resolved.is_relative_to(self.workspace):
            raise _refused(path, "it is outside the workspace")
        return resolved

    async def read_file(self, path: str) -> str:
        target = self.path(path)
        return await asyncio.to_thread(self._read, path, target)

    def _read(self, path: str, target: Path) -> str:
        try:
            descriptor = os.open(target, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise FevexRunError(
                "SANDBOX_FILE_NOT_FOUND", f"There is no file {path!r} in the sandbox."
            ) from None
        except OSError as error:
            raise _refused(path, error.strerror or "it cannot be opened") from None
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
        target = self.path(path)
        await asyncio.to_thread(self._write, path, target, content)

    def _write(self, path: str, target: Path, content: str) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        # The parent may have been swapped for a symlink meanwhile: check again, then refuse
        # to follow a symlink at the file itself.
        self.path(str(target.parent))
        try:
            descriptor = os.open(
                target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644
            )
        except OSError as error:
            raise _refused(path, error.strerror or "it cannot be written") from None
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(content)

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
        if not self.network:
            isolation = await asyncio.to_thread(network_isolation)
            if isolation is None:
                raise FevexRunError(
                    "SANDBOX_NETWORK_UNAVAILABLE",
                    "This sandbox must run commands without network, and this machine "
                    "cannot make a network namespace (unshare --net); the command did not run.",
                )
            argv = [*isolation, *argv]
        # A thread, not asyncio's subprocess: asyncio waits for the pipes to close as well,
        # so a background child holding them would pass for a command still running.
        return await asyncio.to_thread(self._run, argv)

    def _run(self, argv: list[str]) -> CommandResult:
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
            process.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # Whatever the command left behind (a background child) ends with it.
            _kill_group(process.pid)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()
        stdout.join(_DRAIN_SECONDS)
        stderr.join(_DRAIN_SECONDS)
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


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _refused(path: object, why: str) -> FevexRunError:
    return FevexRunError(
        "SANDBOX_PATH_REFUSED",
        f"The sandbox refused path {path!r}: {why}. Paths are relative to the workspace.",
    )
