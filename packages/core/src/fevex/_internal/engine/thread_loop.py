"""Blocking calls: one reusable event loop per thread, so scripts pay no loop start-up
per call. Background runs started from a blocking call advance while the thread is in
the next blocking call."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures.thread  # noqa: F401  (its exit hook registered before ours)
import importlib
import signal
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

from fevex.errors import FevexRunError

T = TypeVar("T")
# The C function: signal.getsignal wraps its answer in an enum, trying (and failing, with
# an exception) for every handler that is a function, on every blocking call.
_getsignal: Callable[[int], object] = importlib.import_module("_signal").getsignal
_local = threading.local()


def _loop() -> asyncio.AbstractEventLoop:
    # asyncio's own test, without the RuntimeError get_running_loop raises and this catches.
    if asyncio._get_running_loop() is not None:
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
        _alive.add(self)

    def close(self) -> None:
        loop = self.loop
        if not loop.is_running() and not loop.is_closed():
            _cancel_background(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
        _alive.discard(self)

    def __del__(self) -> None:
        self.close()


_alive: weakref.WeakSet[_ThreadLoop] = weakref.WeakSet()


def _cancel_background(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what still runs in the background, as ``asyncio.run`` does at its end: a run
    ``start_agent_sync`` began is stored ``cancelled`` (Ctrl-C between blocking calls, a
    script that ends without ``close_sync``) instead of being dropped mid-step, and its
    generators are closed by the task that runs them rather than from outside it."""
    pending = asyncio.all_tasks(loop)
    if not pending:
        return
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


def _close_at_exit() -> None:
    for holder in list(_alive):
        holder.close()


# At exit the loops close before the interpreter joins its threads and shuts the
# ThreadPoolExecutors down (threading's own exit hooks run last registered first, and the
# executors' hook is registered on import, above us): a background run cancelled there still
# reaches a store whose operations run in an executor thread (SQLite's). atexit proper runs
# only after that shutdown.
_register_before_thread_shutdown = getattr(threading, "_register_atexit", atexit.register)
_register_before_thread_shutdown(_close_at_exit)


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


class _Interrupts:
    """The SIGINT handler of blocking calls on the main thread: while one runs its task,
    the first SIGINT cancels the task and a second one interrupts at once; between calls
    it raises ``KeyboardInterrupt`` as Python's default handler does. Installed once, in
    place of the default handler only, and left in place: installing a handler costs more
    per call than the rest of the call's loop handling."""

    def __init__(self) -> None:
        self.task: asyncio.Task[Any] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.interrupted = False

    def __call__(self, signum: int, frame: Any) -> None:
        task, loop = self.task, self.loop
        if task is None or loop is None or self.interrupted or task.done():
            raise KeyboardInterrupt
        self.interrupted = True
        task.cancel()
        loop.call_soon_threadsafe(lambda: None)  # wake the selector


_interrupts = _Interrupts()


def _complete(loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to its end; Ctrl-C cancels it, as ``asyncio.run`` does.

    A ``KeyboardInterrupt`` raised wherever the loop happens to be would leave the run's
    task pending (the run stays ``running``, its session held) and print a traceback per
    abandoned task. Instead the first SIGINT cancels the task, which persists
    ``run.cancelled``, and one ``KeyboardInterrupt`` is raised once it has; a second SIGINT
    interrupts at once.
    """
    task = loop.create_task(coroutine)
    if threading.current_thread() is not threading.main_thread():
        return loop.run_until_complete(task)  # only the main thread gets signals
    handler = _getsignal(signal.SIGINT)
    if handler is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupts)
    elif handler is not _interrupts:
        return loop.run_until_complete(task)  # a handler of the application's own wins
    _interrupts.task, _interrupts.loop, _interrupts.interrupted = task, loop, False
    try:
        return loop.run_until_complete(task)
    except asyncio.CancelledError:
        if _interrupts.interrupted:
            raise KeyboardInterrupt from None
        raise
    finally:
        _interrupts.task = _interrupts.loop = None


async def _next(iterator: AsyncIterator[T]) -> T:
    return await iterator.__anext__()
