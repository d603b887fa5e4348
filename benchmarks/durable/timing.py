"""Timing, summaries and result files shared by every durable benchmark.

Standard library only: the LangGraph side imports it in its own environment too. Every loop
here is bounded in count and in time, so a stalled store slows a benchmark down but never
hangs it.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sqlite3
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

TARGET_REPEAT_SECONDS = 0.5
WARMUP_SECONDS = 0.3
REPEATS = 5
# A repeat is sized once a probe of doubling calls lasts this long.
PROBE_SECONDS = 0.05
# A repeat never runs more calls than this, however fast the call.
MAX_CALLS_PER_REPEAT = 100_000


@dataclass(frozen=True)
class Rate:
    """The median time of one call over ``repeats`` repeats of ``calls`` calls each."""

    seconds_per_call: float
    calls: int
    repeats: int

    @property
    def per_second(self) -> float:
        return 1.0 / self.seconds_per_call

    def to_json(self) -> dict[str, Any]:
        return {
            "per_second": self.per_second,
            "ms_per_call": self.seconds_per_call * 1e3,
            "calls_per_repeat": self.calls,
            "repeats": self.repeats,
        }


async def interleaved_rates(
    calls: dict[str, Callable[[], Awaitable[object]]],
    *,
    target_seconds: float | None = None,
    warmup_seconds: float | None = None,
    repeats: int | None = None,
) -> dict[str, Rate]:
    """The median rate of each call, its repeats taken in turns with the others'.

    Each call is warmed up and its repeat sized to about ``target_seconds``; then every
    round runs one repeat of each call, in an order that rotates, so that a change in the
    machine's load reaches all of them alike. Calls are awaited one after another. What is
    not given is this module's setting (:func:`use_smoke_budget` changes them).
    """
    target_seconds = TARGET_REPEAT_SECONDS if target_seconds is None else target_seconds
    warmup_seconds = WARMUP_SECONDS if warmup_seconds is None else warmup_seconds
    repeats = REPEATS if repeats is None else repeats

    async def repeat(call: Callable[[], Awaitable[object]], count: int) -> float:
        start = time.perf_counter()
        for _ in range(count):
            await call()
        return time.perf_counter() - start

    sizes = {}
    for name, call in calls.items():
        count = 1
        while (
            elapsed := await repeat(call, count)
        ) < PROBE_SECONDS and count < MAX_CALLS_PER_REPEAT:
            count *= 2
        count = min(MAX_CALLS_PER_REPEAT, max(1, math.ceil(count * target_seconds / elapsed)))
        deadline = time.perf_counter() + warmup_seconds
        while time.perf_counter() < deadline:
            await repeat(call, max(1, count // 10))
        sizes[name] = count
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for round_number in range(repeats):
        shift = round_number % len(names)
        for name in names[shift:] + names[:shift]:
            seconds[name].append(await repeat(calls[name], sizes[name]))
    return {
        name: Rate(statistics.median(seconds[name]) / sizes[name], sizes[name], repeats)
        for name in calls
    }


def use_smoke_budget() -> None:
    """Every later rate from a single repeat of a single call: a smoke run shows that a
    benchmark still works, in seconds, and its figures mean nothing."""
    global TARGET_REPEAT_SECONDS, WARMUP_SECONDS, REPEATS, PROBE_SECONDS
    TARGET_REPEAT_SECONDS, WARMUP_SECONDS, REPEATS, PROBE_SECONDS = 0.0, 0.0, 1, 0.0


def summary(samples: Sequence[float]) -> dict[str, float]:
    """Median, 95th percentile, minimum and maximum of ``samples`` (and how many)."""
    ordered = sorted(samples)
    return {
        "median": statistics.median(ordered),
        "p95": percentile(ordered, 95),
        "min": ordered[0],
        "max": ordered[-1],
        "count": len(ordered),
    }


def percentile(ordered: Sequence[float], rank: float) -> float:
    """The ``rank``-th percentile of sorted ``ordered``, by linear interpolation."""
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * rank / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def machine() -> dict[str, Any]:
    """Where and when the figures were taken: they compare only within one run."""
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def write_result(path: Path | None, result: dict[str, Any]) -> None:
    """Print the result as JSON and, when ``path`` is given, write it there too."""
    text = json.dumps(result, indent=2)
    print(text)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
