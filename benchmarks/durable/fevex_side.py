"""fevex's durable figures that need no peer, against one throwaway PostgreSQL server.

Runs the tool-call runs on every store, the PostgreSQL worker throughput next to
``pgbench``, and the event paging latency, and writes ``tool_call_runs.json``,
``postgres_workers.json`` and ``event_paging.json`` into ``--out``. The conversation
against LangGraph runs in alternating rounds from ``conversation_rounds``.

Run with ``python -m benchmarks.durable.fevex_side --out DIR [--postgres-url URL]
[--only tool_call_runs,postgres_workers,event_paging]`` from the repository root.
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
    arguments = parser.parse_args(argv)
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
            timing.write_result(out / "postgres_workers.json", postgres_workers.measure(url))
        if "event_paging" in chosen:
            result = event_paging.measure(("sqlite", "postgres"), url)
            timing.write_result(out / "event_paging.json", result)


if __name__ == "__main__":
    main()
