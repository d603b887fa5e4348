"""What a client pays in CPU for waiting: one wake-up of a sleeping process, three ways.

A durable run waits for each of its writes; while it waits, its process sleeps, and the
wake-up costs CPU whatever the store does. This measures that cost on the machine it runs on,
as process CPU (``time.process_time``) per wait, median of the rounds:

- ``asyncio_sleep``: ``await asyncio.sleep(seconds)`` in an event loop (a timer, ``epoll``,
  the loop's wake-up and the task's step: what the in-memory store waiting like PostgreSQL in
  ``postgres_workers`` pays per write);
- ``asyncio_sleep_0``: ``await asyncio.sleep(0)``, the same loop with no sleep at all: the
  loop's own work per step;
- ``time_sleep``: a blocking ``time.sleep(seconds)``, no event loop.

Run with ``python -m benchmarks.durable.wake_cost [--seconds 0.001] [--waits 3000] [--out
FILE]``; ``--smoke`` runs a few waits to show the script still works.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.durable import timing

ROUNDS = 5


async def _asyncio_waits(waits: int, seconds: float) -> float:
    start = time.process_time()
    for _ in range(waits):
        await asyncio.sleep(seconds)
    return time.process_time() - start


def _blocking_waits(waits: int, seconds: float) -> float:
    start = time.process_time()
    for _ in range(waits):
        time.sleep(seconds)
    return time.process_time() - start


def measure(waits: int, seconds: float, rounds: int = ROUNDS) -> dict[str, Any]:
    samples: dict[str, list[float]] = {"asyncio_sleep": [], "asyncio_sleep_0": [], "time_sleep": []}
    for _ in range(rounds):
        samples["asyncio_sleep"].append(asyncio.run(_asyncio_waits(waits, seconds)))
        samples["asyncio_sleep_0"].append(asyncio.run(_asyncio_waits(waits, 0)))
        samples["time_sleep"].append(_blocking_waits(waits, seconds))
    return {
        "benchmark": "wake_cost",
        "machine": timing.machine(),
        "waits": waits,
        "seconds": seconds,
        "cpu_us_per_wait": {
            name: statistics.median(values) / waits * 1e6 for name, values in samples.items()
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.001)
    parser.add_argument("--waits", type=int, default=3000)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--smoke", action="store_true", help="a few waits: does it still work")
    arguments = parser.parse_args(argv)
    if arguments.smoke:
        result = measure(20, 0.0001, rounds=1)
    else:
        result = measure(arguments.waits, arguments.seconds)
    timing.write_result(arguments.out, result)


if __name__ == "__main__":
    main()
