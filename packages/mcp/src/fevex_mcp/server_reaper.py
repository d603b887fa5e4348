"""The process a stdio server runs under on Linux, so that nothing the server started
outlives it: not a child that called ``setsid()``, nor a daemon whose double fork left
init as its parent, which the process group that fevex-mcp kills does not reach.

Run as ``python -I -S server_reaper.py EXECUTABLE ARGV0 ARGS...`` in the server's working
directory and environment, it makes itself a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``: a descendant whose parent dies is reparented to it
rather than to init, so the server's whole tree stays below it), starts the server with
its own stdin, stdout and stderr and the environment it was itself given, and lets go of
those pipes. It then waits until the server exits, SIGTERM comes (fevex-mcp terminating
the process group), or its parent dies; and then ends every process below it, found by
walking ``/proc``: SIGTERM, up to ``GRACE`` seconds to exit, then SIGKILL until none is
left, reaping them all. It exits as the server did (the same status, or the same signal).

Only the standard library is imported: the reaper starts without site-packages. A server
it cannot start is one line on stderr and exit status 127. A process that is no
descendant of the server (a service it asked another program to start) is out of reach.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable

__all__ = ["GRACE", "main"]

GRACE = 1.0
_PR_SET_CHILD_SUBREAPER = 36
_SIGNALS = {signal.SIGCHLD, signal.SIGTERM}
# The dispositions Python sets for itself that a child must not inherit (subprocess's
# restore_signals does the same).
_RESTORED = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name)
)


def descendants(root: int) -> list[tuple[int, int, bool]]:
    """Every process below ``root`` as ``(pid, parent, zombie)``, read from ``/proc``."""
    children: dict[int, list[tuple[int, bool]]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        found = _parent_and_state(int(entry.name))
        if found is not None:
            parent, state = found
            children.setdefault(parent, []).append((int(entry.name), state == b"Z"))
    below: list[tuple[int, int, bool]] = []
    waiting = [root]
    while waiting:
        parent = waiting.pop()
        for pid, zombie in children.get(parent, ()):
            below.append((pid, parent, zombie))
            waiting.append(pid)
    return below


def _parent_and_state(pid: int) -> tuple[int, bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # The name, in parentheses, may itself hold spaces and parentheses.
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), fields[0]


def _signal(pid: int, parent: int, signum: int) -> None:
    """Send ``signum`` to ``pid`` if it is still the child of ``parent`` that was seen:
    the pidfd holds the process, so a pid reused meanwhile is not signalled."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except OSError:
        # No pidfd (a kernel before 5.3): the pid itself, checked just before.
        found = _parent_and_state(pid)
        if found is not None and found[0] == parent:
            with contextlib.suppress(OSError):
                os.kill(pid, signum)
        return
    try:
        found = _parent_and_state(pid)
        if found is not None and found[0] == parent:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(handle, signum)
    finally:
        os.close(handle)


def end_descendants(grace: float, reap: Callable[[], None]) -> None:
    """End every process below this one: SIGTERM to each (and to any that appears), up to
    ``grace`` seconds for them to go, then SIGKILL until none is left. ``reap()``, called
    between looks, collects the ones that are this process's children."""
    me = os.getpid()
    terminated: set[int] = set()
    deadline = time.monotonic() + grace
    while True:
        reap()
        alive = [(pid, parent) for pid, parent, zombie in descendants(me) if not zombie]
        if not alive:
            return
        late = time.monotonic() > deadline
        for pid, parent in alive:
            if late or pid not in terminated:
                _signal(pid, parent, signal.SIGKILL if late else signal.SIGTERM)
                terminated.add(pid)
        time.sleep(0.01)


def main(arguments: list[str]) -> int:
    """Run the server ``arguments`` name (its executable, then its whole argv) as the
    module's description says; the status to exit with."""
    executable, *argv = arguments
    parent = os.getppid()
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    _become_subreaper()
    try:
        server = os.posix_spawn(executable, argv, _own_environment(), setsigdef=_RESTORED)
    except OSError as error:
        print(f"{argv[0]}: {error.strerror}", file=sys.stderr, flush=True)
        return 127
    _let_go_of_stdio()
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    exited: list[int] = []

    def reap() -> None:
        with contextlib.suppress(ChildProcessError):
            while True:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    return
                if pid == server:
                    exited.append(status)

    while not (exited or stopping) and os.getppid() == parent:
        reap()
        if not exited:
            received = signal.sigtimedwait(_SIGNALS, 1.0)
            if received is not None and received.si_signo == signal.SIGTERM:
                stopping.append(signal.SIGTERM)
    end_descendants(GRACE, reap)
    reap()
    return _exit_like(exited[0]) if exited else 128 + signal.SIGTERM


def _become_subreaper() -> None:
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _own_environment() -> dict[bytes, bytes]:
    """The environment this process was started with, exactly: Python itself may add to
    ``os.environ`` at start-up (``LC_CTYPE``, when it coerces the C locale)."""
    with open("/proc/self/environ", "rb") as environ:
        entries = environ.read().split(b"\0")
    environment: dict[bytes, bytes] = {}
    for entry in entries:
        name, separator, value = entry.partition(b"=")
        if separator:
            environment[name] = value
    return environment


def _let_go_of_stdio() -> None:
    """Point stdin, stdout and stderr at /dev/null: the server's output ends when the
    server (and whatever shares its pipes) closes them, not when the reaper does."""
    quiet = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(quiet, fd)
    os.close(quiet)


def _exit_like(status: int) -> int:
    """The reaper's exit status for the server's wait ``status``: the same code, or the
    same signal raised on itself."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        os.kill(os.getpid(), signum)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
