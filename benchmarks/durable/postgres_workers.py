"""PostgreSQL throughput with 1, 2, 4 and 8 worker processes, next to pgbench on the server.

Each worker is its own process with its own app, store and connection pool, and runs the
tool-call run of ``tool_call_runs`` back to back, each run on a new session, during timed
windows that all workers start together (a barrier). Runs/s is the sum over workers of
runs completed in a window over that window's length; the figure is the median window.
Next to it: the CPU the workers used (busy cores, and CPU milliseconds per run), and how
busy the whole machine was meanwhile (``/proc/stat``: server, workers and anything else),
which says whether more workers could have found a free core at all. The baseline of worker
CPU per run is one worker on the in-memory store; a second one, after the one-worker
PostgreSQL windows, is the in-memory store whose every write first sleeps as long as a
PostgreSQL write took there: what waiting itself costs a client on the machine. A third, in
each row, is as many in-memory workers as PostgreSQL ones: what sharing the cores among that
many processes costs a run that has no store to wait for.

The floor, in each row: as many workers on the in-memory store whose every write first sends
pgbench's one-statement insert (below) to the server, through the store's own libpq path
(:mod:`fevex_postgres.libpq_statements`) on one connection in autocommit mode, and waits for
its durable commit. Its writes cost the server what pgbench's do, so its commits/s against
the jsonb insert's, and its CPU per run against the in-memory worker's, bound what any
PostgreSQL store could reach here with a run's four durable writes: what lies between the
floor and fevex is the store's own statements, on the server and in the worker.

``pgbench`` runs on the same server, in a database of its own (``pgbench -i -s 10``): its
builtin ``tpcb-like`` script (five statements, three updates, one transaction) and
``select-only``, and a script of one statement, ``INSERT`` of a JSON document (of about
the size a commit sends: :data:`JSONB_DOCUMENT`) into a ``jsonb`` column of a table with a
primary key, sent as a prepared statement (``-M prepared``, as fevex sends its writes), each
with ``-c N -j N`` for the same N and window length, median of the windows. A fevex run is
four write transactions (see ``tool_call_runs``), so the figures that compare are four
times runs/s (commits/s) against tpcb-like and jsonb-insert TPS.

The two sides take turns, window by window: before each fevex window, one window of each
pgbench script runs while the worker processes wait at their barrier, so that a drift of
the machine over the minutes of a row reaches both sides alike. Each window, fevex's or
pgbench's, starts on a quiet server (:func:`quiet_server`): no autovacuum worker busy and a
checkpoint just taken, so that neither side's window pays for vacuuming or writing back the
other side's rows (pgbench's million-row accounts table, say). What a side's own windows
leave to autovacuum or the checkpointer during them stays that side's cost.

``--durable`` makes the throwaway server durable before anything is measured: ``fsync``,
``synchronous_commit`` and ``full_page_writes`` on (``ALTER SYSTEM``, then a reload; read
back into the result's ``postgres_settings``), so that every commit, fevex's and pgbench's
alike, waits for its WAL flush.

Run with ``python -m benchmarks.durable.postgres_workers [--out FILE] [--postgres-url URL]
[--durable]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import re
import resource
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

from benchmarks.durable import stores, timing

if TYPE_CHECKING:
    from fevex.runtime import RunStore

WORKERS = (1, 2, 4, 8)
WINDOW_SECONDS = 3.0
WINDOWS = 3
WARMUP_RUNS = 5
PGBENCH_SCALE = 10
# The one-statement pgbench script's document: about the size of a commit's events and
# fields (1-2 KB of JSON, see tool_call_runs), nested as they are.
JSONB_DOCUMENT = json.dumps(
    {
        "events": [
            {
                "id": f"evt_{index:04d}",
                "sequence": index,
                "type": "tool.completed",
                "data": {"call_id": f"call_{index}", "output": "x" * 120, "ok": True},
            }
            for index in range(5)
        ],
        "run": {
            "status": "running",
            "revision": 3,
            "updated_at": 1764700000.25,
            "checkpoint": {"messages": [{"role": "user", "content": "y" * 200}]},
        },
    }
)
JSONB_SCRIPT = f"""\\set id random(1, 1000000000)
INSERT INTO jsonb_insert (key, document) VALUES (:id, '{JSONB_DOCUMENT}'::jsonb);
"""
DURABLE_SETTINGS = ("fsync", "synchronous_commit", "full_page_writes")
# Workers wait at the barrier while pgbench takes its turn, quiet waits included.
BARRIER_TIMEOUT_SECONDS = 600
# How long a window waits for autovacuum workers to finish before it starts anyway.
QUIET_TIMEOUT_SECONDS = 60.0
# A window never runs more runs than this per worker, however fast the server.
MAX_RUNS_PER_WINDOW = 100_000
# One create_execution and three commit_execution, each its own transaction.
COMMITS_PER_RUN = 4


class Counted(NamedTuple):
    """What one worker counted in one window."""

    runs: int
    seconds: float
    cpu_seconds: float
    voluntary_switches: int
    involuntary_switches: int


def use_smoke_sizes() -> None:
    """1 and 2 workers, one warm-up run and pgbench at scale 1: does it still work (with
    ``--windows 1 --seconds 1``)."""
    global WORKERS, WARMUP_RUNS, PGBENCH_SCALE
    WORKERS, WARMUP_RUNS, PGBENCH_SCALE = (1, 2), 1, 1


def worker(
    url: str, barrier: Barrier, windows: int, seconds: float, results: Any, kind: str
) -> None:
    """One worker process: warm up, then run tool-call runs in each synchronised window, on
    the store :func:`worker_store` opens for ``kind`` and ``url``."""
    asyncio.run(_work(url, barrier, windows, seconds, results, kind))


async def _work(
    url: str, barrier: Barrier, windows: int, seconds: float, results: Any, kind: str
) -> None:
    from benchmarks.durable.tool_call_runs import build_app, run_once

    app = build_app(worker_store(kind, url))
    for _ in range(WARMUP_RUNS):
        await run_once(app)
    counted: list[Counted] = []
    for _ in range(windows):
        # Blocking on purpose: nothing else runs in this loop, and every worker waits here.
        barrier.wait(BARRIER_TIMEOUT_SECONDS)
        start, cpu, switches = time.perf_counter(), time.process_time(), _switches()
        deadline = start + seconds
        runs = 0
        while time.perf_counter() < deadline and runs < MAX_RUNS_PER_WINDOW:
            await run_once(app)
            runs += 1
        ended = _switches()
        voluntary, involuntary = ended[0] - switches[0], ended[1] - switches[1]
        elapsed, used = time.perf_counter() - start, time.process_time() - cpu
        counted.append(Counted(runs, elapsed, used, voluntary, involuntary))
        # Done: the coordinator may use the server (pgbench's turn) until the next window.
        barrier.wait(BARRIER_TIMEOUT_SECONDS)
    await app.close()
    results.put(counted)


def worker_store(kind: str, url: str | None) -> RunStore:
    """A worker's store: "memory", "memory-waiting:SECONDS" (the in-memory store whose every
    write first waits that long), "floor" (the in-memory store whose every write first runs
    pgbench's insert in the pgbench database at ``url``) or "postgres" (the store at
    ``url``)."""
    from fevex.runtime import InMemoryRunStore
    from fevex_postgres import PostgresRunStore

    if kind == "memory":
        return InMemoryRunStore()
    if kind.startswith("memory-waiting:"):
        return _waiting_memory_store(float(kind.split(":", 1)[1]))
    if kind == "floor" and url is not None:
        return _floor_store(url)
    if kind == "postgres" and url is not None:
        return PostgresRunStore(url)
    raise ValueError(f"unknown worker store {kind!r} (floor and postgres need a URL)")


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every PostgreSQL benchmark here takes: where the result goes, which
    server, and whether to make it durable first."""
    parser.add_argument("--out", type=Path, help="also write the JSON result to this file")
    parser.add_argument("--postgres-url", help="use this server instead of a throwaway one")
    parser.add_argument(
        "--durable",
        action="store_true",
        help="turn fsync, synchronous_commit and full_page_writes on first",
    )


def _switches() -> tuple[int, int]:
    """This process's voluntary and involuntary context switches so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw, usage.ru_nivcsw


def _waiting_memory_store(seconds: float) -> RunStore:
    """The in-memory store, each of whose writes first waits ``seconds`` (``asyncio.sleep``):
    the client's CPU of a run that waits for its writes as long as PostgreSQL's take, with
    no I/O and no driver. The part of PostgreSQL's worker CPU above it is the store's own."""
    return _memory_store_writing_after(lambda: asyncio.sleep(seconds))


def _floor_store(url: str) -> RunStore:
    """The in-memory store, each of whose writes first runs pgbench's one-statement insert
    of :data:`JSONB_DOCUMENT` in the database at ``url`` (pgbench's, which holds its table),
    prepared and sent as the PostgreSQL store sends its writes, on one connection in
    autocommit mode: a worker whose store costs the server what pgbench's inserts do."""
    import random

    import psycopg

    from fevex_postgres.libpq_statements import Parameter, Statement

    # pgbench's statement, returning the new id: fetch_row reads the one row a write returns.
    insert = Statement(
        "bench_floor_insert",
        "INSERT INTO jsonb_insert (key, document) VALUES (%(key)s, %(document)s::jsonb)"
        " RETURNING id",
    )
    address = stores.libpq_url(url)
    db: psycopg.AsyncConnection[Any] | None = None

    async def write() -> None:
        nonlocal db
        if db is None:
            db = await psycopg.AsyncConnection.connect(address, autocommit=True)
        # pgbench's key: random(1, 1000000000).
        values: dict[str, Parameter] = {
            "key": random.randint(1, 1_000_000_000),
            "document": JSONB_DOCUMENT,
        }
        await insert.fetch_row(db, values)

    async def close() -> None:
        if db is not None:
            await db.close()

    return _memory_store_writing_after(write, close)


def _memory_store_writing_after(
    before: Callable[[], Awaitable[object]],
    close: Callable[[], Awaitable[None]] | None = None,
) -> RunStore:
    """The in-memory store, each of whose writes (``create_execution``, ``commit_execution``)
    first awaits ``before()``; ``close`` runs when the store closes."""
    from fevex.runtime import ExecutionCommit, ExecutionCreate, InMemoryRunStore, RunLease

    class MemoryStoreWritingAfter(InMemoryRunStore):
        async def create_execution(self, create: ExecutionCreate) -> RunLease:
            await before()
            return await super().create_execution(create)

        async def commit_execution(self, commit: ExecutionCommit) -> None:
            await before()
            await super().commit_execution(commit)

        async def close(self) -> None:
            if close is not None:
                await close()
            await super().close()

    return MemoryStoreWritingAfter()


def machine_cpu() -> tuple[int, int] | None:
    """Busy and total CPU time of the whole machine so far (Linux ``/proc/stat``), or None."""
    fields = _cpu_fields()
    if fields is None:
        return None
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def machine_busy(before: tuple[int, int] | None) -> float | None:
    """The share of the machine's CPU time that was busy since ``before``."""
    return _share(before, machine_cpu())


def machine_steal() -> tuple[int, int] | None:
    """CPU time the hypervisor gave to others while this machine had work (``steal``), and
    total CPU time, so far; or None."""
    fields = _cpu_fields()
    return None if fields is None else (fields[7], sum(fields))


def steal_share(before: tuple[int, int] | None) -> float | None:
    """The share of the machine's CPU time stolen since ``before``: a figure measured while
    a busy host takes the cores away is not this machine's alone."""
    return _share(before, machine_steal())


def _cpu_fields() -> list[int] | None:
    # user nice system idle iowait irq softirq steal
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            return [int(value) for value in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None


def _share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    if before is None or after is None or after[1] == before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def fevex_windows(
    url: str,
    workers: int,
    windows: int,
    seconds: float,
    kind: str = "postgres",
    before_window: Callable[[], object] | None = None,
) -> list[dict[str, Any]]:
    """Each window's runs/s over all workers, the CPU the workers used in it, and how busy
    the whole machine was (server, workers and anything else running). ``before_window``
    runs before each window, while every worker waits at the barrier."""
    context = multiprocessing.get_context("spawn")
    # This process joins the barrier too, to watch the machine's CPU during each window.
    barrier = context.Barrier(workers + 1)
    results = context.Queue()
    processes = [
        context.Process(target=worker, args=(url, barrier, windows, seconds, results, kind))
        for _ in range(workers)
    ]
    for process in processes:
        process.start()
    busy = []
    try:
        for _ in range(windows):
            if before_window is not None:
                before_window()
            barrier.wait(BARRIER_TIMEOUT_SECONDS)
            before = machine_cpu()
            time.sleep(seconds)
            busy.append(machine_busy(before))
            barrier.wait(BARRIER_TIMEOUT_SECONDS)
        per_worker = [results.get(timeout=BARRIER_TIMEOUT_SECONDS + windows * seconds * 4)]
        per_worker += [results.get(timeout=60) for _ in range(workers - 1)]
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    measured = []
    for window in range(windows):
        counts = [counted[window] for counted in per_worker]
        runs = max(sum(count.runs for count in counts), 1)
        cpu = sum(count.cpu_seconds for count in counts)
        voluntary = sum(count.voluntary_switches for count in counts)
        involuntary = sum(count.involuntary_switches for count in counts)
        measured.append(
            {
                "runs_per_second": sum(count.runs / count.seconds for count in counts),
                # Busy cores: the workers' CPU seconds per second of window.
                "worker_cpu_cores": cpu / max(count.seconds for count in counts),
                "worker_cpu_ms_per_run": cpu / runs * 1e3,
                # A worker that waits for the server sleeps (voluntary switches); one the
                # scheduler takes the core from while it runs (involuntary) finds its caches
                # cold when it gets the core back.
                "voluntary_switches_per_run": voluntary / runs,
                "involuntary_switches_per_run": involuntary / runs,
                "machine_busy": busy[window],
            }
        )
    return measured


def quiet_server(url: str) -> float:
    """Wait until no autovacuum worker is busy on the server of ``url`` (at most
    :data:`QUIET_TIMEOUT_SECONDS`), then take a checkpoint; the seconds it took. The next
    window then starts with no vacuum of earlier rows running and no dirty pages of earlier
    windows left for the checkpointer to write during it."""
    import psycopg

    start = time.monotonic()
    with psycopg.connect(stores.libpq_url(url), autocommit=True) as connection:
        while time.monotonic() - start < QUIET_TIMEOUT_SECONDS:
            row = connection.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'"
            ).fetchone()
            if row is None or row[0] == 0:
                break
            time.sleep(0.05)
        connection.execute("CHECKPOINT")
    return time.monotonic() - start


class Pgbench:
    """``pgbench`` from the server's own programs, on a database of its own."""

    def __init__(self, url: str) -> None:
        from fevex_postgres.testing import find_postgres_bin

        self.program = str(find_postgres_bin() / "pgbench")
        self.url = stores.create_database(url, "pgbench")
        parts = urlsplit(stores.libpq_url(self.url))
        self.connection = [
            "-h",
            parts.hostname or "127.0.0.1",
            "-p",
            str(parts.port or 5432),
            "-U",
            parts.username or "postgres",
            parts.path.lstrip("/"),
        ]
        self.version = self._run("--version", connect=False).strip()
        self._run("-i", "-q", "-s", str(PGBENCH_SCALE))
        import psycopg

        with psycopg.connect(stores.libpq_url(self.url), autocommit=True) as connection:
            connection.execute(
                "CREATE TABLE jsonb_insert"
                " (id bigserial PRIMARY KEY, key bigint NOT NULL, document jsonb NOT NULL)"
            )
        self._folder = tempfile.TemporaryDirectory(prefix="fevex-pgbench-")
        self.jsonb_script = Path(self._folder.name) / "jsonb_insert.sql"
        self.jsonb_script.write_text(JSONB_SCRIPT, encoding="utf-8")

    def tps(self, clients: int, seconds: float, *, script: str) -> float:
        """TPS of ``script``: "tpcb-like", "select-only" (builtins) or "jsonb-insert"."""
        chosen = {
            "tpcb-like": [],
            "select-only": ["-S"],
            "jsonb-insert": ["-M", "prepared", "-f", str(self.jsonb_script)],
        }[script]
        output = self._run(
            *chosen, "-c", str(clients), "-j", str(clients), "-T", str(round(seconds))
        )
        found = re.search(r"tps = ([\d.]+) \(without initial connection time\)", output)
        if found is None:
            raise RuntimeError(f"no TPS in pgbench's output:\n{output}")
        return float(found.group(1))

    def _run(self, *arguments: str, connect: bool = True) -> str:
        command = [self.program, *arguments, *(self.connection if connect else ())]
        completed = subprocess.run(
            command, capture_output=True, text=True, timeout=300, check=False
        )
        if completed.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{completed.stderr[-2000:]}")
        return completed.stdout + completed.stderr


def make_durable(url: str) -> None:
    """Restart the server of ``url`` (a throwaway one on this machine) with its durability
    settings on, and check that they took. The throwaway server is started with them off
    on its command line, which no ``ALTER SYSTEM`` overrides: the restart keeps every other
    option it was started with (``postmaster.opts``)."""
    import shlex

    from fevex_postgres.testing import find_postgres_bin

    data, options = server_options(url)
    durable = [
        option.split("=", 1)[0] + "=on" if option.split("=", 1)[0] in DURABLE_SETTINGS else option
        for option in options
    ]
    command = [*as_server_user(), str(find_postgres_bin() / "pg_ctl"), "restart", "-D", str(data)]
    # The server's output goes to its log (as fevex_postgres.testing starts it), not to a
    # pipe that would stay open for as long as the server runs.
    log = data.parent / "server.log"
    command += ["-l", str(log), "-m", "fast", "-w", "-t", "60", "-o", shlex.join(durable)]
    subprocess.run(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True, timeout=90
    )
    settings = stores.server_settings(url)
    if not all(settings[name] == "on" for name in DURABLE_SETTINGS):
        raise RuntimeError(f"the server did not turn durable: {settings}")


def server_options(url: str) -> tuple[Path, list[str]]:
    """The data folder of the server of ``url`` (a throwaway one on this machine) and the
    options it was started with (``postmaster.opts``), but ``-D``."""
    import shlex

    import psycopg

    with psycopg.connect(stores.libpq_url(url), autocommit=True) as connection:
        row = connection.execute("SHOW data_directory").fetchone()
    assert row is not None
    data = Path(row[0])
    options = shlex.split((data / "postmaster.opts").read_text(encoding="utf-8"))[1:]
    kept = []
    while options:
        option = options.pop(0)
        if option == "-D":
            options.pop(0)
            continue
        kept.append(option)
    return data, kept


def as_server_user() -> list[str]:
    """The prefix that runs a PostgreSQL program as its own user when this runs as root
    (as fevex_postgres.testing runs the throwaway server)."""
    import os
    import shutil

    if os.geteuid() == 0 and shutil.which("runuser"):
        return ["runuser", "-u", "postgres", "--"]
    return []


def measure(
    url: str, windows: int = WINDOWS, seconds: float = WINDOW_SECONDS, *, durable: bool = False
) -> dict[str, Any]:
    stolen = machine_steal()
    if durable:
        make_durable(url)
    asyncio.run(migrate(url))
    pgbench = Pgbench(url)
    # The baseline of worker CPU per run: one worker process, the same runs and windows,
    # on the in-memory store (which persists nothing).
    memory = _median_cpu_window(url, windows, seconds, "memory")
    print(f"in-memory worker: {memory}", flush=True)
    rows = []
    waiting: dict[str, Any] = {}
    for workers in WORKERS:
        rows.append(_row(url, pgbench, workers, windows, seconds, memory))
        print(f"postgres workers: {rows[-1]}", flush=True)
        if workers == 1:
            # The same runs on the in-memory store, each write waiting as long as one
            # PostgreSQL write took here (its share of a run's wall time beyond memory's).
            per_run = 1 / rows[0]["fevex_runs_per_second"] - 1 / memory["runs_per_second"]
            wait = max(per_run / COMMITS_PER_RUN, 0.0)
            waiting = _median_cpu_window(url, windows, seconds, f"memory-waiting:{wait}")
            waiting["wait_seconds_per_write"] = wait
            print(f"in-memory worker waiting like PostgreSQL: {waiting}", flush=True)
    best = max(rows, key=lambda row: row["fevex_commits_per_second"])
    best_floor = max(rows, key=lambda row: row["floor_commits_per_second"])
    return {
        "benchmark": "postgres_workers",
        "machine": timing.machine(),
        "window_seconds": seconds,
        "windows": windows,
        "pgbench": {"version": pgbench.version, "scale": PGBENCH_SCALE},
        "postgres_settings": stores.server_settings(url),
        "durable": durable,
        "quiet_timeout_seconds": QUIET_TIMEOUT_SECONDS,
        "machine_steal": steal_share(stolen),
        "memory_worker": memory,
        "waiting_memory_worker": waiting,
        "rows": rows,
        # The targets' figures: fevex's commits/s at its best worker count against pgbench's
        # at the same client count and at pgbench's own best.
        "best": {
            "workers": best["workers"],
            "fevex_commits_per_second": best["fevex_commits_per_second"],
            "commits_vs_tpcb": best["commits_vs_tpcb"],
            "commits_vs_jsonb_insert": best["commits_vs_jsonb_insert"],
            "commits_vs_best_jsonb_insert": best["fevex_commits_per_second"]
            / max(row["pgbench_jsonb_insert_tps"] for row in rows),
            "commits_vs_best_tpcb": best["fevex_commits_per_second"]
            / max(row["pgbench_tpcb_tps"] for row in rows),
            "worker_cpu_vs_memory_max": max(row["worker_cpu_vs_memory"] for row in rows),
            "worker_cpu_vs_memory_workers_max": max(
                row["worker_cpu_vs_memory_workers"] for row in rows
            ),
            # The waiting worker is measured after the one-worker row, when there is one.
            "worker_cpu_vs_waiting_memory_max": max(row["worker_cpu_ms_per_run"] for row in rows)
            / waiting["worker_cpu_ms_per_run"]
            if waiting
            else None,
        },
        # The same for the floor: the bounds of any PostgreSQL store on this machine.
        "floor_best": {
            "workers": best_floor["workers"],
            "floor_commits_per_second": best_floor["floor_commits_per_second"],
            "floor_commits_vs_jsonb_insert": best_floor["floor_commits_vs_jsonb_insert"],
            "floor_worker_cpu_vs_memory_min": min(
                row["floor_worker_cpu_vs_memory"] for row in rows
            ),
            "floor_worker_cpu_vs_memory_max": max(
                row["floor_worker_cpu_vs_memory"] for row in rows
            ),
        },
    }


def _median_cpu_window(url: str, windows: int, seconds: float, kind: str) -> dict[str, Any]:
    """One worker on a store of ``kind``: its window of median CPU per run."""
    measured = fevex_windows(url, 1, windows, seconds, kind, lambda: quiet_server(url))
    return sorted(measured, key=lambda w: w["worker_cpu_ms_per_run"])[windows // 2]


def _row(
    url: str, pgbench: Pgbench, workers: int, windows: int, seconds: float, memory: dict[str, Any]
) -> dict[str, Any]:
    """fevex with ``workers`` worker processes, taking turns with pgbench's scripts with as
    many clients: before each fevex window, one window of each script; then as many floor
    workers, each of whose windows follows one of the jsonb insert."""
    stolen = machine_steal()
    tps: dict[str, list[float]] = {"tpcb-like": [], "jsonb-insert": [], "select-only": []}
    busy: dict[str, list[float | None]] = {script: [] for script in tps}
    quiet: list[float] = []

    def pgbench_turn(scripts: Sequence[str] = tuple(tps)) -> None:
        for script in scripts:
            quiet.append(quiet_server(url))
            before = machine_cpu()
            tps[script].append(pgbench.tps(workers, seconds, script=script))
            busy[script].append(machine_busy(before))
        quiet.append(quiet_server(url))

    fevex = sorted(
        fevex_windows(url, workers, windows, seconds, before_window=pgbench_turn),
        key=lambda w: w["runs_per_second"],
    )
    median = fevex[len(fevex) // 2]
    # The floor takes turns with the jsonb insert alone, the script it is set against.
    floor = sorted(
        fevex_windows(
            pgbench.url, workers, windows, seconds, "floor", lambda: pgbench_turn(["jsonb-insert"])
        ),
        key=lambda w: w["runs_per_second"],
    )[windows // 2]
    # As many in-memory workers: what sharing the cores among that many processes costs a
    # run with no store at all (one process's baseline is ``memory``).
    alike = sorted(
        fevex_windows(url, workers, windows, seconds, "memory", lambda: quiet_server(url)),
        key=lambda w: w["worker_cpu_ms_per_run"],
    )[windows // 2]
    tpcb = statistics.median(tps["tpcb-like"])
    jsonb = statistics.median(tps["jsonb-insert"])
    commits = median["runs_per_second"] * COMMITS_PER_RUN
    floor_commits = floor["runs_per_second"] * COMMITS_PER_RUN
    return {
        "workers": workers,
        "fevex_runs_per_second": median["runs_per_second"],
        "fevex_commits_per_second": commits,
        "worker_cpu_cores": median["worker_cpu_cores"],
        "worker_cpu_ms_per_run": median["worker_cpu_ms_per_run"],
        "worker_cpu_vs_memory": median["worker_cpu_ms_per_run"] / memory["worker_cpu_ms_per_run"],
        "memory_workers_cpu_ms_per_run": alike["worker_cpu_ms_per_run"],
        "worker_cpu_vs_memory_workers": median["worker_cpu_ms_per_run"]
        / alike["worker_cpu_ms_per_run"],
        "involuntary_switches_per_run": median["involuntary_switches_per_run"],
        "memory_workers_involuntary_switches_per_run": alike["involuntary_switches_per_run"],
        "machine_busy": median["machine_busy"],
        "pgbench_tpcb_machine_busy": _median_known(busy["tpcb-like"]),
        "fevex_windows": fevex,
        "pgbench_tpcb_tps": tpcb,
        "pgbench_tpcb_windows": tps["tpcb-like"],
        "commits_vs_tpcb": commits / tpcb,
        "pgbench_jsonb_insert_tps": jsonb,
        "pgbench_jsonb_insert_windows": tps["jsonb-insert"],
        "pgbench_jsonb_insert_machine_busy": _median_known(busy["jsonb-insert"]),
        "commits_vs_jsonb_insert": commits / jsonb,
        "pgbench_select_only_tps": statistics.median(tps["select-only"]),
        "floor_commits_per_second": floor_commits,
        "floor_commits_vs_jsonb_insert": floor_commits / jsonb,
        "floor_worker_cpu_ms_per_run": floor["worker_cpu_ms_per_run"],
        "floor_worker_cpu_vs_memory": floor["worker_cpu_ms_per_run"]
        / memory["worker_cpu_ms_per_run"],
        "floor_involuntary_switches_per_run": floor["involuntary_switches_per_run"],
        "floor_machine_busy": floor["machine_busy"],
        # How long the pgbench turns waited for a quiet server (autovacuum, checkpoint).
        "quiet_seconds_max": max(quiet),
        "machine_steal": steal_share(stolen),
    }


def _median_known(values: list[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else None


async def migrate(url: str) -> None:
    """Bring the database at ``url`` to the store's schema."""
    store = await stores.open_store("postgres", Path("."), url)
    await store.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_server_arguments(parser)
    parser.add_argument("--windows", type=int, default=WINDOWS)
    parser.add_argument("--seconds", type=float, default=WINDOW_SECONDS)
    parser.add_argument("--smoke", action="store_true", help="one short window per figure")
    parser.add_argument(
        "--workers",
        help="comma-separated worker counts (default 1,2,4,8; 1,2 with --smoke); the in-memory"
        " worker waiting like PostgreSQL is measured where 1 is among them",
    )
    arguments = parser.parse_args(argv)
    windows, seconds = arguments.windows, arguments.seconds
    if arguments.smoke:
        use_smoke_sizes()
        windows, seconds = 1, 1.0
    if arguments.workers:
        global WORKERS
        WORKERS = tuple(int(count) for count in arguments.workers.split(","))
    with stores.postgres_url(arguments.postgres_url) as url:
        result = measure(url, windows, seconds, durable=arguments.durable)
    timing.write_result(arguments.out, result)


if __name__ == "__main__":
    main()
