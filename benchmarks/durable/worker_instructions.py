"""One worker's cost per tool-call run, in instructions (callgrind) beside CPU time: on the
in-memory store, on the in-memory store whose writes wait, and on PostgreSQL.

Why both: a worker that waits for its store sleeps at every write, and on a virtual machine
the CPU time of the same instructions grows with how long the process slept before them
(caches and predictors emptied by whatever ran meanwhile). The in-memory store whose every
write sleeps 1, 2 or 4 ms executes about the same instructions per run at each of these
waits, yet its CPU per run grows with the wait. So CPU time per run of a PostgreSQL worker,
set against an in-memory worker that never sleeps, holds that machine effect beside the
store's own work; the instruction count holds the work alone, and does not move with the
machine's load either.

Each scenario is one worker process (``--worker KIND``: the tool-call run of
``tool_call_runs``, each on a new session) that runs :data:`WARMUP` runs, then ``--runs``
more, and prints its CPU (user and system, ``getrusage``) and wall time per run over the
latter. The scenarios take turns for ``--rounds`` rounds; the figure is the median round.
Then each scenario runs under ``valgrind --tool=callgrind`` twice, with :data:`WARMUP` runs
and with ``WARMUP + --runs``: the difference over ``--runs`` is its instructions per run
(``benchmarks.instructions``' method). Callgrind counts user space only: what the kernel does
for the worker's system calls (the loopback socket's sends and receives among them) is the
system CPU beside it.

The PostgreSQL worker writes to a throwaway server (or ``--postgres-url``, which reaches the
worker processes in their environment, never on a command line), made durable first with
``--durable`` (``fsync``, ``synchronous_commit`` and ``full_page_writes`` on, as in
``postgres_workers``).

Run with ``python -m benchmarks.durable.worker_instructions [--durable] [--runs 300]
[--rounds 3] [--out FILE]``; ``--smoke`` runs each scenario for 2 runs without callgrind, in
seconds (a callgrind count of an interpreter that imports fevex takes a minute).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import instructions
from benchmarks.durable import postgres_workers, stores, timing

WARMUP = 20
RUNS = 300
ROUNDS = 3
# The in-memory store waiting this many seconds at each write, as a PostgreSQL write waits.
WAITS = (0.001, 0.002, 0.004)
KINDS = ("memory", *(f"memory-waiting:{seconds}" for seconds in WAITS), "postgres")
# Where a worker process finds the PostgreSQL URL.
URL_VARIABLE = "FEVEX_BENCH_POSTGRES_URL"


def worker(kind: str, runs: int, url: str | None) -> dict[str, float]:
    """:data:`WARMUP` tool-call runs on a store of ``kind``, then ``runs`` more; the CPU and
    wall time per run (ms) of the latter (zero with no runs)."""
    return asyncio.run(_work(kind, runs, url))


async def _work(kind: str, runs: int, url: str | None) -> dict[str, float]:
    from benchmarks.durable.postgres_workers import worker_store
    from benchmarks.durable.tool_call_runs import build_app, run_once

    app = build_app(worker_store(kind, url))
    for _ in range(WARMUP):
        await run_once(app)
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(runs):
        await run_once(app)
    elapsed, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    await app.close()
    per_run = 1e3 / max(runs, 1)
    user = (after.ru_utime - before.ru_utime) * per_run
    system = (after.ru_stime - before.ru_stime) * per_run
    return {
        "cpu_ms_per_run": user + system,
        "user_ms_per_run": user,
        "system_ms_per_run": system,
        "wall_ms_per_run": elapsed * per_run,
    }


def _worker_arguments(kind: str, runs: int) -> list[str]:
    return ["-m", "benchmarks.durable.worker_instructions", "--worker", kind, "--runs", str(runs)]


def timed(kind: str, runs: int) -> dict[str, float]:
    """One worker process's figures, printed as its one line of JSON."""
    completed = subprocess.run(
        [sys.executable, *_worker_arguments(kind, runs)],
        cwd=instructions.ROOT,
        # Bytecode written as callgrind's runs write it, so that the first of those compiles
        # nothing the second does not.
        env=instructions.environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    figures: dict[str, float] = json.loads(completed.stdout.splitlines()[-1])
    return figures


def _instructions_per_run(kind: str, runs: int) -> int:
    python = Path(sys.executable)
    base = instructions.callgrind(python, *_worker_arguments(kind, 0))
    return (instructions.callgrind(python, *_worker_arguments(kind, runs)) - base) // runs


def measure(
    url: str, runs: int, rounds: int, *, kinds: tuple[str, ...] = KINDS, count: bool = True
) -> dict[str, Any]:
    """Every scenario of ``kinds``: the median of ``rounds`` rounds taken in turns, and with
    ``count`` its instructions per run."""
    # To the worker processes through their environment: a URL may hold a password, which
    # a command line shows to every user of the machine.
    os.environ[URL_VARIABLE] = url
    samples: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
    for _ in range(rounds):
        for kind in kinds:
            samples[kind].append(timed(kind, runs))
    scenarios: dict[str, dict[str, Any]] = {}
    for kind, measured in samples.items():
        median = sorted(measured, key=lambda round_: round_["cpu_ms_per_run"])[len(measured) // 2]
        scenarios[kind] = {
            **median,
            "rounds": measured,
            "instructions_per_run": _instructions_per_run(kind, runs) if count else None,
        }
    memory = scenarios["memory"]
    for figures in scenarios.values():
        figures["cpu_vs_memory"] = figures["cpu_ms_per_run"] / memory["cpu_ms_per_run"]
        figures["instructions_vs_memory"] = (
            None if not count else figures["instructions_per_run"] / memory["instructions_per_run"]
        )
    return {
        "benchmark": "worker_instructions",
        "machine": timing.machine(),
        "runs": runs,
        "rounds": rounds,
        "warmup_runs": WARMUP,
        "counted": count,
        "postgres_settings": stores.server_settings(url),
        "scenarios": scenarios,
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        "| worker | CPU ms per run (user + system) | ÷ in-memory | instructions per run "
        "| ÷ in-memory | wall ms per run |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for kind, figures in result["scenarios"].items():
        counted = figures["instructions_per_run"]
        lines.append(
            f"| {kind} | {figures['cpu_ms_per_run']:.3f} ({figures['user_ms_per_run']:.3f} + "
            f"{figures['system_ms_per_run']:.3f}) | {figures['cpu_vs_memory']:.2f} | "
            + ("— | — |" if counted is None else f"{counted:,} | ")
            + ("" if counted is None else f"{figures['instructions_vs_memory']:.2f} |")
            + f" {figures['wall_ms_per_run']:.3f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    postgres_workers.add_server_arguments(parser)
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--smoke", action="store_true", help="2 runs a scenario, no callgrind")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.worker is not None:
        print(json.dumps(worker(arguments.worker, arguments.runs, os.environ.get(URL_VARIABLE))))
        return
    if not arguments.smoke and shutil.which("valgrind") is None:
        parser.error("valgrind is not installed: it counts the instructions")
    with stores.postgres_url(arguments.postgres_url) as url:
        if arguments.durable:
            postgres_workers.make_durable(url)
        # Migrated once here, so that no worker's warm-up does it.
        asyncio.run(postgres_workers.migrate(url))
        if arguments.smoke:
            result = measure(url, 2, 1, kinds=("memory", KINDS[1], "postgres"), count=False)
        else:
            result = measure(url, arguments.runs, arguments.rounds)
    result["durable"] = arguments.durable
    print(table(result))
    timing.write_result(arguments.out, result)


if __name__ == "__main__":
    main()
