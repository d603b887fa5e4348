"""The threads user code that blocks runs in: sync tools, sync workflow steps and
compensations, sync knowledge providers.

A run that stops waiting for such a call (Ctrl-C, ``cancel_run``, its deadline) cannot stop
the function: the thread runs on, abandoned. asyncio's default executor joins its threads
when the interpreter exits, so one abandoned ``time.sleep(20)`` would hold a Ctrl-C'd script
for twenty seconds. These threads are daemons instead: an abandoned call never holds the
process. Idle threads are reused, and a new one starts whenever none is idle, so that calls
abandoned in a bounded pool can never starve the calls that come after them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["in_worker_thread"]

T = TypeVar("T")

_Work = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class _Workers:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle = 0
        self._work: queue.SimpleQueue[_Work] = queue.SimpleQueue()

    def submit(self, work: _Work) -> None:
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1
        self._work.put(work)
        if start:
            threading.Thread(target=self._serve, name="fevex-worker", daemon=True).start()

    def _serve(self) -> None:
        while True:
            call, loop, future = self._work.get()
            try:
                result = call()
            except BaseException as error:
                _settle(loop, future, None, error)
                del error  # no traceback (and its frames) kept alive while idle
            else:
                _settle(loop, future, result, None)
                del result
            del call, loop, future
            with self._lock:
                self._idle += 1


def _settle(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    result: Any,
    error: BaseException | None,
) -> None:
    def settle() -> None:
        if future.done():  # cancelled: nobody waits for this call any more
            return
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)

    # A closed loop raises RuntimeError: nobody waits for this call any more.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(settle)


_workers = _Workers()


def _forget_workers() -> None:
    # A forked child has none of its parent's threads.
    global _workers
    _workers = _Workers()


os.register_at_fork(after_in_child=_forget_workers)


async def in_worker_thread(function: Callable[..., T], /, *args: Any) -> T:
    """``function(*args)`` in a daemon worker thread, with the caller's context variables
    (as :func:`asyncio.to_thread`); cancelling the await abandons the call. The exception
    the function raised is raised as it is (the very object)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    call = functools.partial(contextvars.copy_context().run, function, *args)
    _workers.submit((call, loop, future))
    return await future
