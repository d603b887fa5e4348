"""fevex's durable figures that need no peer, against one throwaway PostgreSQL server.

Runs the tool-call runs on every store, the PostgreSQL worker throughput next to
``pgbench``, and the event paging latency, and writes ``tool_call_runs.json``,
``postgres_workers.json`` and ``event_paging.json`` into ``--out``. The conversation
against LangGraph runs in alternating rounds from ``conversation_rounds``.

Run with ``python -m benchmarks.durable.fevex_side --out DIR [--postgres-url URL]
[--only tool_call_runs,postgres_workers,event_paging] [--smoke]`` from the repository root;
``--smoke`` runs each at the smallest sizes, in seconds, to show it still works.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from benchmarks.durable import event_paging, postgres_workers, stores, timing, tool_call_runs

BENCHMARKS = ("tool_call_runs", "postgres_workers", "event_paging")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the results directory")
    parser.add_argument("--postgres-url", help="use this server instead of a throwaway one")
    parser.add_argument("--only", default=",".join(BENCHMARKS), help="comma-separated")
    parser.add_argument("--smoke", action="store_true", help="smallest sizes: does it still work")
    arguments = parser.parse_args(argv)
    windows, seconds = postgres_workers.WINDOWS, postgres_workers.WINDOW_SECONDS
    if arguments.smoke:
        for module in (tool_call_runs, postgres_workers, event_paging):
            module.use_smoke_sizes()
        windows, seconds = 1, 1.0
    chosen = arguments.only.split(",")
    unknown = sorted(set(chosen) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmarks {unknown}; choose from {', '.join(BENCHMARKS)}")
    out: Path = arguments.out
    with stores.postgres_url(arguments.postgres_url) as url:
        if "tool_call_runs" in chosen:
            result = asyncio.run(tool_call_runs.measure_all(url))
            result["postgres_settings"] = stores.server_settings(url)
            timing.write_result(out / "tool_call_runs.json", result)
        if "postgres_workers" in chosen:
            timing.write_result(
                out / "postgres_workers.json", postgres_workers.measure(url, windows, seconds)
            )
        if "event_paging" in chosen:
            result = event_paging.measure(("sqlite", "postgres"), url)
            timing.write_result(out / "event_paging.json", result)


if __name__ == "__main__":
    main()
