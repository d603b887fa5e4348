"""A tool-call run on the in-memory store, on SQLite and on PostgreSQL: runs/s and commits.

The run is the overhead benchmark's scenario (``benchmarks/frameworks/with_fevex.py``): the
model asks for ``accounts_get``, the tool answers, the model replies. Each run starts a new
session. ``run_agent`` batches events and commits at the durable points only;
``stream_agent`` commits every event before yielding it, so both are measured.

Commits are counted with :class:`CountingRunStore` on separate runs (the timed runs use the
bare store): every ``create_execution`` and ``commit_execution`` is one transaction. The
same runs give the share of a run's time spent awaiting the store. The stores' timed
repeats are taken in turns, so that the machine's load reaches them alike.

Run with ``python -m benchmarks.durable.tool_call_runs [--out FILE] [--postgres-url URL]``
from the repository root; without a URL it starts a throwaway PostgreSQL server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks import measure
from benchmarks.durable import stores, timing
from benchmarks.durable.counting_store import CountingRunStore
from benchmarks.frameworks.with_fevex import AccountsModel, define_support_agent, get_account
from fevex import Fevex, create_fevex
from fevex.runtime import RunStore

AGENT = "support-0"
COUNTED_RUNS = 20


def build_app(store: RunStore | CountingRunStore) -> Fevex:
    return create_fevex(
        models={"default": AccountsModel()},
        agents=[define_support_agent(0)],
        tools=[get_account],
        run_store=store,
    )


async def run_once(app: Fevex) -> int:
    """One tool-call run through ``run_agent``; the number of events it committed."""
    result = await app.run_agent(AGENT, input=measure.QUESTION)
    if result.output != measure.ANSWER:
        raise RuntimeError(f"expected {measure.ANSWER!r}, got {result.output!r}")
    return len(result.events)


async def stream_once(app: Fevex) -> int:
    """One tool-call run through ``stream_agent``; the number of events it yielded."""
    events = [event async for event in app.stream_agent(AGENT, input=measure.QUESTION)]
    if events[-1].type != "run.completed":
        raise RuntimeError(f"the streamed run ended with {events[-1].type}")
    return len(events)


async def count_commits(kind: str, directory: Path, url: str | None) -> dict[str, Any]:
    """Store calls per run for each entry point, on runs of their own."""
    counted: dict[str, Any] = {}
    for entry_point, once in (("run_agent", run_once), ("stream_agent", stream_once)):
        counting = CountingRunStore(await stores.open_store(kind, directory, url))
        app = build_app(counting)
        await once(app)
        counting.calls.clear()
        counting.seconds = 0.0
        start = time.perf_counter()
        for _ in range(COUNTED_RUNS):
            await once(app)
        elapsed = time.perf_counter() - start
        await app.close()
        counted[entry_point] = {
            "commits_per_run": counting.commits / COUNTED_RUNS,
            "store_calls_per_run": counting.per_run(COUNTED_RUNS),
            "store_share_of_run_time": counting.seconds / elapsed,
        }
    return counted


async def measure_all(url: str | None, kinds: tuple[str, ...] = stores.STORES) -> dict[str, Any]:
    with contextlib.ExitStack() as directories:
        apps: dict[str, Fevex] = {}
        results: dict[str, dict[str, Any]] = {}
        for kind in kinds:
            directory = Path(
                directories.enter_context(tempfile.TemporaryDirectory(prefix="fevex-bench-"))
            )
            app = build_app(await stores.open_store(kind, directory, url))
            apps[kind] = app
            results[kind] = {
                "store": kind,
                "events_per_run": await run_once(app),
                "events_per_streamed_run": await stream_once(app),
                **await count_commits(kind, directory, url),
            }
        # All stores are timed in turns, so that the machine's load reaches them alike.
        calls: dict[str, Callable[[], Awaitable[object]]] = {}
        for kind, app in apps.items():
            calls[f"{kind} run_agent"] = functools.partial(run_once, app)
            calls[f"{kind} stream_agent"] = functools.partial(stream_once, app)
        rates = await timing.interleaved_rates(calls)
        for kind, app in apps.items():
            for entry_point in ("run_agent", "stream_agent"):
                results[kind][entry_point].update(rates[f"{kind} {entry_point}"].to_json())
            await app.close()
    return {
        "benchmark": "tool_call_runs",
        "machine": timing.machine(),
        "stores": list(results.values()),
    }


def use_smoke_sizes() -> None:
    """Two counted runs and one repeat of one run per figure: does it still work."""
    global COUNTED_RUNS
    COUNTED_RUNS = 2
    timing.use_smoke_budget()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the JSON result to this file")
    parser.add_argument("--postgres-url", help="use this server instead of a throwaway one")
    parser.add_argument("--stores", default=",".join(stores.STORES), help="comma-separated")
    parser.add_argument("--smoke", action="store_true", help="a few runs: does it still work")
    arguments = parser.parse_args(argv)
    if arguments.smoke:
        use_smoke_sizes()
    kinds = tuple(arguments.stores.split(","))
    if "postgres" in kinds:
        with stores.postgres_url(arguments.postgres_url) as url:
            result = asyncio.run(measure_all(url, kinds))
            result["postgres_settings"] = stores.server_settings(url)
    else:
        result = asyncio.run(measure_all(None, kinds))
    timing.write_result(arguments.out, result)


if __name__ == "__main__":
    main()
