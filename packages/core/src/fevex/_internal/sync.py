"""Blocking twins: one reusable event loop per thread, so scripts pay no loop start-up
per call."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

from fevex.errors import FevexRunError

T = TypeVar("T")
_local = threading.local()


def _runner() -> asyncio.Runner:
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
    runner: asyncio.Runner | None = getattr(_local, "runner", None)
    if runner is None:
        runner = _local.runner = asyncio.Runner()
    return runner


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    try:
        runner = _runner()
    except BaseException:
        coroutine.close()
        raise
    return runner.run(coroutine)


def iterate_sync(iterator: AsyncIterator[T]) -> Iterator[T]:
    runner = _runner()
    try:
        while True:
            try:
                yield runner.run(_next(iterator))
            except StopAsyncIteration:
                return
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            runner.run(aclose())


async def _next(iterator: AsyncIterator[T]) -> T:
    return await iterator.__anext__()
