"""Workers as separate hosts: runs/s of 1, 2, 4 and 8 ``fevex worker`` processes, each in a
network namespace of its own with its own address, on one PostgreSQL server they reach over
a virtual bridge (see ``network_hosts``).

The rounds share one database, and each adds hosts to the ones already working (so that
only the new workers start). A round's jobs (``worker_hosts_app``: a workflow that waits on
a durable timer, then runs a tool-call agent run as its child) are created from the root
namespace, all due at one moment ``T0`` after every worker is up and a warm-up of a few jobs
per worker; the workers' wake-up passes claim them. The figure is the round's agent runs
(one tool call each) over the time from ``T0`` to the last job's end, by the store's
timestamps; beside it, how busy the whole machine was meanwhile (``/proc/stat``: server,
workers, the rest).

Run as root with ``python -m benchmarks.durable.worker_hosts [--jobs 200] [--smoke]
[--out FILE]``; ``--smoke`` runs 12 jobs per round, in seconds. It needs ``ip``, ``nft``
and the PostgreSQL server programs; what is missing is named and the exit status is 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from benchmarks.durable import timing
from benchmarks.durable.network_hosts import (
    Host,
    HostNetwork,
    NetworkUnavailable,
    listening_on,
    worker_command,
)

ROOT = Path(__file__).resolve().parents[2]
APP = "benchmarks.durable.worker_hosts_app:build_app"
WORKERS = (1, 2, 4, 8)
JOBS = 200
SMOKE_JOBS = 12
CONCURRENCY = 2
WARMUP_JOBS_PER_WORKER = 4
INTERVAL = 0.1
# Every wait below is bounded by one of these.
READY_SECONDS = 120
DONE_SECONDS = 300
STOP_SECONDS = 60
# The benchmark's lease and the server-side timeouts of its sessions (below the lease).
LEASE_SECONDS = 5.0
TIMEOUTS = {"statement_timeout": 3, "lock_timeout": 1, "idle_in_transaction_session_timeout": 3}


@dataclass
class Cluster:
    """One PostgreSQL server reachable from every host, and the hosts."""

    network: HostNetwork
    local_url: str  # from the root namespace (127.0.0.1)
    hosts_url: str  # from the hosts, through the bridge

    def database(self, name: str, timeouts: Mapping[str, float] = TIMEOUTS) -> tuple[str, str]:
        """A fresh, migrated database ``name``: its URL from here and from the hosts (with
        the session ``timeouts`` in its query string)."""
        from benchmarks.durable.stores import create_database

        local = create_database(self.local_url, name)
        _migrate(local)
        query = "&".join(f"{key}={value}" for key, value in timeouts.items())
        parts = urlsplit(self.hosts_url)
        remote = urlunsplit(parts._replace(path=f"/{name}", query=query))
        return local, remote


@contextlib.contextmanager
def cluster(hosts: int) -> Iterator[Cluster]:
    """``hosts`` network namespaces on a bridge and a throwaway PostgreSQL server listening
    on the bridge's address; everything is gone after the block, also after a failure."""
    from fevex_postgres.testing import postgres_server

    with HostNetwork(hosts) as network, postgres_server(database="fevex_hosts") as url:
        subnet = f"{network.server_address}/{network.prefix}"
        with listening_on(url, network.server_address, subnet) as remote:
            yield Cluster(network, url, remote)


def _migrate(url: str) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "fevex.cli", "db", "upgrade", "--store", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"fevex db upgrade failed: {completed.stderr}")


class Workers:
    """``fevex worker`` processes, one per host, their output in files of ``directory``."""

    def __init__(
        self,
        hosts: Sequence[Host],
        url: str,
        directory: Path,
        environment: Mapping[str, str],
        concurrency: int = CONCURRENCY,
    ) -> None:
        self.directory = directory
        self.url = url
        self.environment = environment
        self.concurrency = concurrency
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.add(hosts)

    def add(self, hosts: Sequence[Host]) -> None:
        """Start a worker on each of ``hosts``."""
        concurrency, url = self.concurrency, self.url
        directory = self.directory
        for host in hosts:
            # The app builds its store (one that logs its statements) from this URL.
            env = {**self.environment, "FEVEX_HOSTS_NAME": host.name, "FEVEX_RUN_STORE": url}
            with (
                open(directory / f"{host.name}.out", "wb") as out,
                open(directory / f"{host.name}.err", "wb") as err,
            ):
                self.processes[host.name] = subprocess.Popen(
                    worker_command(host, sys.executable, APP, concurrency, INTERVAL),
                    cwd=ROOT,
                    env=env,
                    stdout=out,
                    stderr=err,
                )

    def stderr(self, name: str) -> str:
        return (self.directory / f"{name}.err").read_text(errors="replace")

    def wait_ready(self, timeout: float = READY_SECONDS) -> None:
        """Until every worker said which store it runs on (its lanes start next)."""
        deadline = time.monotonic() + timeout
        for name, process in self.processes.items():
            while "fevex worker: runs on" not in self.stderr(name):
                if process.poll() is not None:
                    raise RuntimeError(f"worker {name} exited:\n{self.stderr(name)[-3000:]}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"worker {name} did not start:\n{self.stderr(name)}")
                time.sleep(0.05)

    def stop(self, timeout: float = STOP_SECONDS) -> dict[str, int]:
        """SIGTERM every worker (it finishes the runs it holds) and wait; one that does not
        stop in time is killed. Returns each worker's exit status."""
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        statuses = {}
        for name, process in self.processes.items():
            try:
                statuses[name] = process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                process.kill()
                statuses[name] = process.wait(timeout=30)
        return statuses

    def kill(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)


def worker_environment(
    effects: Path,
    lease: float,
    tool_delay: float = 0.0,
    log: Path | None = None,
    hold: Path | None = None,
) -> dict[str, str]:
    """What the workers' app reads (see ``worker_hosts_app``)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "FEVEX_HOSTS_EFFECTS": str(effects),
        "FEVEX_HOSTS_LEASE_SECONDS": str(lease),
        "FEVEX_HOSTS_TOOL_DELAY": str(tool_delay),
    }
    env.pop("FEVEX_RUN_STORE", None)
    env.pop("FEVEX_HOSTS_LOG", None)
    env.pop("FEVEX_HOSTS_HOLD", None)
    if log is not None:
        env["FEVEX_HOSTS_LOG"] = str(log)
    if hold is not None:
        env["FEVEX_HOSTS_HOLD"] = str(hold)
    return env


async def submit(app: Any, jobs: int, due_at: float, *, parallel: int = 8) -> list[str]:
    """Create ``jobs`` jobs due at ``due_at`` (seconds since the epoch); their run ids."""
    gate = asyncio.Semaphore(parallel)

    async def one(number: int) -> str:
        async with gate:
            delay = max(due_at - time.time(), 0.0)
            run = await app.start_workflow("job", {"job": number, "delay": delay})
            return str(run.id)

    return list(await asyncio.gather(*(one(number) for number in range(jobs))))


async def wait_until_done(app: Any, timeout: float = DONE_SECONDS) -> None:
    """Until no run of the store is running or paused."""
    deadline = time.monotonic() + timeout
    while True:
        waiting = [
            run
            for status in ("running", "paused")
            for run in await app.list_runs(status=status, limit=1)
        ]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"runs still {waiting[0].status} after {timeout} s: {waiting[0]}")
        await asyncio.sleep(0.1)


async def all_runs(app: Any, kind: str) -> list[Any]:
    runs: list[Any] = []
    while True:
        page = await app.list_runs(kind=kind, limit=500, after=runs[-1].id if runs else None)
        runs += page
        if len(page) < 500:
            return runs


def submitter_app(url: str, lease: float, log: Path | None = None) -> Any:
    """The app the jobs are created from, in this process (root namespace); it never runs
    a job's timer or its agent."""
    from benchmarks.durable.worker_hosts_app import build_app

    logged = None if log is None else str(log)
    return build_app(url, log=logged, host="submitter", lease_seconds=lease)


def _effect_lines(effects: Path, run_ids: set[str]) -> int:
    """The effects the runs ``run_ids`` recorded: lines of their files."""
    return sum(
        len(path.read_text().splitlines())
        for path in effects.iterdir()
        if path.name.split(".")[0] in run_ids
    )


def _timestamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


async def measure_round(app: Any, workers: Workers, effects: Path, jobs: int) -> dict[str, Any]:
    """One round: the ``workers`` running now run ``jobs`` new jobs; runs/s and how busy
    the machine was."""
    from benchmarks.durable.postgres_workers import machine_busy, machine_cpu

    await asyncio.to_thread(workers.wait_ready)
    # Warm-up, not counted: each new worker's first runs open its connections and prepare
    # its statements.
    await submit(app, WARMUP_JOBS_PER_WORKER * len(workers.processes), time.time())
    await wait_until_done(app)
    started = time.time()
    # Due once they are all stored: a second and a few milliseconds per job from now.
    due_at = started + 1.0 + jobs * 0.01
    ids = set(await submit(app, jobs, due_at))
    submitted = time.time()
    await asyncio.sleep(max(due_at - time.time(), 0.0))
    before = machine_cpu()
    await wait_until_done(app)
    busy = machine_busy(before)
    flows = [run for run in await all_runs(app, "workflow") if run.id in ids]
    agents = [run for run in await all_runs(app, "agent") if run.parent_run_id in ids]
    completed = [run for run in agents if run.status == "completed"]
    if len(completed) != jobs or any(run.status != "completed" for run in flows):
        raise RuntimeError(f"{jobs - len(completed)} of {jobs} jobs did not complete")
    effect_lines = await asyncio.to_thread(_effect_lines, effects, {run.id for run in agents})
    start = max(due_at, submitted)
    end = max(_timestamp(run.updated_at) for run in flows)
    return {
        "workers": len(workers.processes),
        "jobs": jobs,
        "agent_runs_completed": len(completed),
        "effects": effect_lines,
        "seconds": end - start,
        "runs_per_second": jobs / (end - start),
        "submitted_late": submitted > due_at,
        "machine_busy": busy,
    }


async def measure(jobs: int, counts: Sequence[int], directory: Path) -> dict[str, Any]:
    """Rounds of ``jobs`` jobs on one database, with more hosts each round: the workers of
    a round keep running into the next, which starts only the ones it adds."""
    with cluster(max(counts)) as lab:
        local, remote = lab.database("hosts")
        effects = directory / "effects"
        effects.mkdir()
        app = submitter_app(local, LEASE_SECONDS)
        running = Workers((), remote, directory, worker_environment(effects, LEASE_SECONDS))
        rows = []
        try:
            for count in sorted(counts):
                running.add(lab.network.hosts[len(running.processes) : count])
                row = await measure_round(app, running, effects, jobs)
                print(f"workers as hosts: {row}", file=sys.stderr, flush=True)
                rows.append(row)
        finally:
            statuses = await asyncio.to_thread(running.stop)
            await app.close()
    return {
        "benchmark": "worker_hosts",
        "machine": timing.machine(),
        "lease_seconds": LEASE_SECONDS,
        "concurrency": CONCURRENCY,
        "session_timeouts": TIMEOUTS,
        "rows": rows,
        "exit_statuses": statuses,
    }


def table(result: Mapping[str, Any]) -> str:
    lines = [
        "| workers (hosts) | jobs | runs/s | machine busy |",
        "| --- | --- | --- | --- |",
    ]
    for row in result["rows"]:
        busy = row["machine_busy"]
        shown = "n/a" if busy is None else f"{busy:.0%}"
        lines.append(
            f"| {row['workers']} | {row['jobs']} | {row['runs_per_second']:.1f} | {shown} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from fevex_postgres.testing import PostgresNotAvailable

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=JOBS)
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE_JOBS} jobs per round")
    parser.add_argument("--workers", default=",".join(map(str, WORKERS)))
    parser.add_argument("--out", type=Path, help="also write the JSON result to this file")
    arguments = parser.parse_args(argv)
    jobs = SMOKE_JOBS if arguments.smoke else arguments.jobs
    counts = [int(part) for part in arguments.workers.split(",")]
    with tempfile.TemporaryDirectory(prefix="fevex-hosts-") as directory:
        try:
            result = asyncio.run(measure(jobs, counts, Path(directory)))
        except (NetworkUnavailable, PostgresNotAvailable) as missing:
            print(f"worker_hosts: cannot make the hosts here: {missing}", file=sys.stderr)
            return 2
    timing.write_result(arguments.out, result)
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
