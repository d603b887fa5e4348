"""Blocking twins: one reusable event loop per thread, so scripts pay no loop start-up
per call. Background runs started from a blocking call advance while the thread is in
the next blocking call."""

from __future__ import annotations

import asyncio
import atexit
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
    return loop.run_until_complete(coroutine)


def iterate_sync(iterator: AsyncIterator[T]) -> Iterator[T]:
    loop = _loop()
    try:
        while True:
            try:
                yield loop.run_until_complete(_next(iterator))
            except StopAsyncIteration:
                return
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            loop.run_until_complete(aclose())


async def _next(iterator: AsyncIterator[T]) -> T:
    return await iterator.__anext__()
