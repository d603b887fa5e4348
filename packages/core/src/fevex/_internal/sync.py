"""Blocking twins: one reusable event loop per thread, so scripts pay no loop start-up
per call. Background runs started from a blocking call advance while the thread is in
the next blocking call."""

from __future__ import annotations

import asyncio
import atexit
import signal
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

from fevex.errors import FevexRunError

T = TypeVar("T")
_local = threading.local()


def _loop() -> asyncio.AbstractEventLoop:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise FevexRunError(
            "SYNC_CALL_IN_EVENT_LOOP",
            "A blocking fevex method was called inside a running event loop; await the "
            "async method instead.",
        )
    # A plain loop rather than asyncio.Runner: Runner reinstalls a SIGINT handler on every
    # call, which costs more than a whole in-memory agent run.
    holder: _ThreadLoop | None = getattr(_local, "holder", None)
    if holder is None or holder.loop.is_closed():
        holder = _local.holder = _ThreadLoop()
    return holder.loop


class _ThreadLoop:
    """Owns one thread's loop: closed when the thread ends (its locals are dropped) or,
    for threads still alive then, when the interpreter exits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._at_exit = _close_at_exit(weakref.ref(self))
        atexit.register(self._at_exit)

    def close(self) -> None:
        loop = self.loop
        if not loop.is_running() and not loop.is_closed():
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
        atexit.unregister(self._at_exit)

    def __del__(self) -> None:
        self.close()


def _close_at_exit(holder: weakref.ref[_ThreadLoop]) -> Callable[[], None]:
    def close() -> None:
        alive = holder()
        if alive is not None:
            alive.close()

    return close


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    try:
        loop = _loop()
    except BaseException:
        coroutine.close()
        raise
    return _complete(loop, coroutine)


def iterate_sync(iterator: AsyncIterator[T]) -> Iterator[T]:
    loop = _loop()
    try:
        while True:
            try:
                yield _complete(loop, _next(iterator))
            except StopAsyncIteration:
                return
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            loop.run_until_complete(aclose())


def _complete(loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to its end; Ctrl-C cancels it, as ``asyncio.run`` does.

    A ``KeyboardInterrupt`` raised wherever the loop happens to be would leave the run's
    task pending (the run stays ``running``, its session held) and print a traceback per
    abandoned task. Instead the first SIGINT cancels the task, which persists
    ``run.cancelled``, and one ``KeyboardInterrupt`` is raised once it has; a second SIGINT
    interrupts at once.
    """
    task = loop.create_task(coroutine)
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        # Only the main thread gets signals, and a handler of the application's own wins.
        return loop.run_until_complete(task)
    interrupted = False

    def interrupt(signum: int, frame: Any) -> None:
        nonlocal interrupted
        if interrupted or task.done():
            raise KeyboardInterrupt
        interrupted = True
        task.cancel()
        loop.call_soon_threadsafe(lambda: None)  # wake the selector

    signal.signal(signal.SIGINT, interrupt)
    try:
        try:
            return loop.run_until_complete(task)
        except asyncio.CancelledError:
            if interrupted:
                raise KeyboardInterrupt from None
            raise
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


async def _next(iterator: AsyncIterator[T]) -> T:
    return await iterator.__anext__()
