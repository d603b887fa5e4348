"""The PostgreSQL server's instructions per tool-call run, counted by callgrind in the server
processes that serve one worker.

Why: at 8 workers the server takes about half of what a run costs the machine
(``postgres_workers``), and its CPU time on a virtual machine moves by tens of percent between
runs of the same code, more than most changes to the store's statements save. Its
instructions do not move. The throwaway server is restarted with its options and autovacuum
off under ``valgrind --tool=callgrind``, which follows every process the server forks: each
writes its own count when it exits. A worker process (``worker_instructions --worker
postgres``) runs :data:`~benchmarks.durable.worker_instructions.WARMUP` runs; a second runs
that many and ``--runs`` more. The counts of the processes that served each worker (the
backends of its connections, gone when it is) are added up, and their difference over
``--runs`` is the server's instructions per run.

Not counted: the background processes (the WAL writer, the checkpointer), which write their
counts only when the server stops, and the kernel's work for the server (the WAL's flushes,
the socket). Durability stays off, as the throwaway server starts: it changes the kernel's
work, not the backends' instructions. Autovacuum is off so that no vacuum worker's count
joins a worker's.

Run with ``python -m benchmarks.durable.server_instructions [--runs 200] [--out FILE]``;
``--smoke`` takes the same steps for 2 runs, the server not under callgrind, in seconds (the
server under callgrind takes a minute to start and to run the runs).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.durable import postgres_workers, stores, timing, worker_instructions

RUNS = 200
# How long the server may take to accept connections, and a worker's backends to write
# their counts once it is gone (both far slower under callgrind).
START_SECONDS = 180.0
COUNTED_SECONDS = 120.0
_TOTALS = re.compile(rb"^totals:\s+(\d+)", re.MULTILINE)


def measure(url: str, runs: int, *, count: bool = True) -> dict[str, Any]:
    """Restart the server of ``url`` (a throwaway one, migrated) with autovacuum off, under
    callgrind with ``count``; the counts of the backends that served a worker of
    ``WARMUP`` runs and one of ``WARMUP + runs``, and the server's instructions per run
    (None without ``count``)."""
    from fevex_postgres.testing import find_postgres_bin

    data, options = postgres_workers.server_options(url)
    programs = find_postgres_bin()
    as_server_user = postgres_workers.as_server_user()
    counts = data.parent / "counts"
    counts.mkdir()
    if as_server_user:
        shutil.chown(counts, user="postgres")
    stop = [*as_server_user, str(programs / "pg_ctl"), "stop", "-D", str(data), "-m", "fast"]
    subprocess.run(
        stop, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True, timeout=90
    )
    callgrind = ("valgrind", "--tool=callgrind", f"--callgrind-out-file={counts}/backend.%p")
    command = [*as_server_user, *(callgrind if count else ()), str(programs / "postgres")]
    with (data.parent / "server.log").open("ab") as log:
        server = subprocess.Popen(
            [*command, "-D", str(data), *options, "-c", "autovacuum=off"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    # To the worker processes through their environment, as worker_instructions does.
    os.environ[worker_instructions.URL_VARIABLE] = url
    try:
        admin = _connect(stores.libpq_url(url), server)
        with admin:
            settings = stores.server_settings(url)
            served = [_served(admin, counts, total) for total in (0, runs)]
    finally:
        # A server under callgrind writes every background process's count as it stops.
        subprocess.run(
            stop, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=False, timeout=300
        )
        server.wait(timeout=60)
    warmup, measured = (figures["instructions"] for figures in served)
    per_run = None if not count else (measured - warmup) // runs
    return {
        "benchmark": "server_instructions",
        "machine": timing.machine(),
        "runs": runs,
        "warmup_runs": worker_instructions.WARMUP,
        "counted": count,
        "postgres_settings": settings,
        "workers": served,
        "instructions_per_run": per_run,
    }


def _connect(libpq_url: str, server: subprocess.Popen[bytes]) -> Any:
    import psycopg

    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            return psycopg.connect(libpq_url, autocommit=True)
        except psycopg.OperationalError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _served(admin: Any, counts: Path, runs: int) -> dict[str, Any]:
    """A worker process of ``WARMUP + runs`` runs; the counts of the backends that served it
    (each in its own file, written as it exits) and their sum."""
    before = _settled(admin, counts)
    worker_instructions.timed("postgres", runs)
    after = _settled(admin, counts)
    backends = sorted(count for path, count in after.items() if path not in before)
    return {
        "runs": worker_instructions.WARMUP + runs,
        "backends": backends,
        "instructions": sum(backends),
    }


def _settled(admin: Any, counts: Path) -> dict[Path, int]:
    """Every count written, once no backend serves anyone but ``admin`` and each process
    that exited has written its count whole (its ``totals`` line comes last)."""
    deadline = time.monotonic() + COUNTED_SECONDS
    while True:
        (serving,) = admin.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchone()
        # The server's own file is created empty at its start and written when it stops.
        written = [path for path in counts.iterdir() if path.stat().st_size]
        found = {path: _TOTALS.search(path.read_bytes()) for path in written}
        if not serving and all(found.values()):
            return {path: int(totals.group(1)) for path, totals in found.items() if totals}
        if time.monotonic() > deadline:
            raise RuntimeError(f"backends still serving or writing their counts: {found}")
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the JSON result to this file")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--smoke", action="store_true", help="2 runs, no callgrind")
    arguments = parser.parse_args(argv)
    if not arguments.smoke and shutil.which("valgrind") is None:
        parser.error("valgrind is not installed: it counts the instructions")
    with stores.postgres_url(None) as url:
        asyncio.run(postgres_workers.migrate(url))
        result = measure(url, 2 if arguments.smoke else arguments.runs, count=not arguments.smoke)
    counted = result["instructions_per_run"]
    print(
        "server instructions per run: "
        + ("not counted (--smoke)" if counted is None else f"{counted:,}")
    )
    timing.write_result(arguments.out, result)


if __name__ == "__main__":
    main()
