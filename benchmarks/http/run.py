"""The HTTP benchmark: fevex's SSE observation beside a minimal sse-starlette endpoint.

1. Throughput: one uvicorn worker streams a finished run of ``--events`` events (fevex:
   ``GET /v1/runs/{id}/events/stream`` over the in-memory store, pages of 100; the peer:
   the same events' JSON from memory through ``EventSourceResponse``); a client reads each
   stream to its end, in alternating rounds, and the median events/s of each is reported
   with their ratio.
2. Observers: ``--observers`` clients (``AsyncFevexClient.observe_run``) observe one run that
   waits for an approval; once every one has received ``run.paused``, the run is approved
   and ticks ``--ticks`` times. Reported: how many observers received every event and the
   ``end`` frame, and the delay from each event's ``occurred_at`` to its arrival (p50, p95).
3. Slow consumer: a run of ``--slow-events`` events and one ten times longer in a SQLite
   store; a client reading at about 200 kB/s through a small receive buffer reads each
   stream while the server's resident memory is sampled. Reported: its growth over the
   server's memory before the read, for both runs (flat: it does not follow the length),
   after a fast read of the longer run has warmed what is cached once.

Run with ``nox -s bench_http`` or ``python -m benchmarks.http.run [--quick] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2

from benchmarks.http.servers import seed_runs
from fevex.http import AsyncFevexClient
from fevex.runtime import open_run_store

ROOT = Path(__file__).resolve().parents[2]
GUARD = 300.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def uvicorn_process(factory: str, environment: dict[str, str]) -> Iterator[tuple[str, int]]:
    """``uvicorn --factory`` in a process of its own: its base URL and pid."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", factory, "--factory", "--port", str(port),
         "--log-level", "warning", "--no-access-log", "--timeout-graceful-shutdown", "2"],
        cwd=ROOT, env={**os.environ, **environment},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + GUARD
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{factory} did not start") from None
                time.sleep(0.05)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(GUARD)


# -- 1. throughput -------------------------------------------------------------------------


async def read_stream(http: httpx2.AsyncClient, path: str) -> tuple[int, float]:
    """Events received and seconds taken to read one stream to its end."""
    started = time.perf_counter()
    received = 0
    async with http.stream("GET", path) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            received += line.startswith("id: ")
    return received, time.perf_counter() - started


async def throughput(events: int, rounds: int) -> dict[str, Any]:
    environment = {"BENCH_EVENTS": str(events)}
    with (
        uvicorn_process("benchmarks.http.servers:fevex_server", environment) as (fevex_url, _),
        uvicorn_process("benchmarks.http.servers:peer_server", {}) as (peer_url, _),
    ):
        sides = {
            "fevex": (fevex_url, f"/v1/runs/bench-{events}/events/stream"),
            "sse-starlette": (peer_url, f"/events/{events}"),
        }
        rates: dict[str, list[float]] = {side: [] for side in sides}
        for round_number in range(rounds + 1):
            for side, (url, path) in sides.items():
                async with httpx2.AsyncClient(base_url=url, timeout=GUARD) as http:
                    received, seconds = await read_stream(http, path)
                if received != events:
                    raise RuntimeError(f"{side} streamed {received} of {events} events")
                if round_number:  # the first round warms both servers up
                    rates[side].append(events / seconds)
    fevex_rate = statistics.median(rates["fevex"])
    peer_rate = statistics.median(rates["sse-starlette"])
    return {
        "events": events,
        "rounds": rounds,
        "fevex_events_per_second": round(fevex_rate),
        "peer_events_per_second": round(peer_rate),
        "fevex_over_peer": round(fevex_rate / peer_rate, 3),
    }


# -- 2. observers --------------------------------------------------------------------------


def _timestamp(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


async def observers(count: int, ticks: int) -> dict[str, Any]:
    environment = {"BENCH_TICKS": str(ticks), "BENCH_POLL_INTERVAL": "0.05"}
    with uvicorn_process("benchmarks.http.servers:fevex_server", environment) as (url, _):
        async with AsyncFevexClient(url, timeout=GUARD) as control:
            run = await control.start_agent("gated", "go")
            async for event in control.observe_run(run.id):
                if event.type == "run.paused":
                    break
            ready = asyncio.Semaphore(0)
            delays: list[float] = []
            event_counts: list[int] = []

            async def observe() -> None:
                client = AsyncFevexClient(url, timeout=GUARD)
                seen = 0
                resumed = False
                async with client:
                    async for event in client.observe_run(run.id):
                        seen += 1
                        if event.type == "run.paused":
                            ready.release()
                        resumed = resumed or event.type == "run.resumed"
                        if resumed:
                            delays.append(time.time() - _timestamp(event.occurred_at))
                event_counts.append(seen)

            tasks = [asyncio.create_task(observe()) for _ in range(count)]
            for _ in range(count):
                await ready.acquire()
            paused = await control.get_run(run.id)
            approval = paused.pause["approvals"][0]["id"]  # type: ignore[index]
            started = time.perf_counter()
            await control.resume_run(run.id, approval_id=approval, decision="approve")
            await asyncio.wait_for(asyncio.gather(*tasks), GUARD)
            seconds = time.perf_counter() - started
            after = None
            total = 0
            while True:
                page = await control.list_events(run.id, after=after)
                total += len(page)
                if len(page) < 100:
                    break
                after = page[-1].id
    delays.sort()
    return {
        "observers": count,
        "completed": sum(1 for seen in event_counts if seen == total),
        "events_per_observer": total,
        "delay_p50_ms": round(1000 * delays[len(delays) // 2], 1),
        "delay_p95_ms": round(1000 * delays[int(len(delays) * 0.95)], 1),
        "seconds_after_approval": round(seconds, 2),
        "poll_interval_s": 0.05,
    }


# -- 3. slow consumer ----------------------------------------------------------------------


def resident_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def slow_read(url: str, path: str, bytes_per_second: int) -> tuple[int, int]:
    """Read a stream through a 16 KiB receive buffer at about ``bytes_per_second``; returns
    the events and bytes received."""
    host, port = url.removeprefix("http://").split(":")
    with socket.socket() as connection:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        connection.connect((host, int(port)))
        connection.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        chunk = 4096
        received = bytearray()
        while True:
            data = connection.recv(chunk)
            if not data:
                break
            received += data
            if received.endswith(b"event: end\r\n\r\n") or b"event: end\n" in received[-300:]:
                break
            time.sleep(chunk / bytes_per_second)
    return received.count(b"\nid: "), len(received)


def slow_consumer(events: int, bytes_per_second: int) -> dict[str, Any]:
    counts = [events, 10 * events]
    with tempfile.TemporaryDirectory() as folder:
        store_url = f"sqlite:///{folder}/runs.db"

        async def seed() -> None:
            store = open_run_store(store_url)
            try:
                await seed_runs(store, counts)
            finally:
                await store.close()

        asyncio.run(seed())
        environment = {"BENCH_STORE": store_url}
        results: dict[str, Any] = {"bytes_per_second": bytes_per_second}
        with uvicorn_process("benchmarks.http.servers:fevex_server", environment) as (url, pid):
            # A first, fast read of the longest run, so that what is imported or cached once
            # (code, SQLite's page cache, at most 2 MiB) is in the baseline of both reads.
            slow_read(url, f"/v1/runs/bench-{counts[-1]}/events/stream", 500_000_000)
            for count in counts:
                before = resident_kib(pid)
                peak = before
                done = threading.Event()

                def sample(pid: int = pid, done: threading.Event = done) -> None:
                    nonlocal peak
                    while not done.wait(0.05):
                        peak = max(peak, resident_kib(pid))

                sampler = threading.Thread(target=sample)
                sampler.start()
                received, size = slow_read(
                    url, f"/v1/runs/bench-{count}/events/stream", bytes_per_second
                )
                done.set()
                sampler.join()
                if received != count:
                    raise RuntimeError(f"the slow consumer received {received} of {count}")
                results[str(count)] = {
                    "stream_bytes": size,
                    "server_rss_before_kib": before,
                    "server_rss_growth_kib": peak - before,
                }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--observers", type=int, default=100)
    parser.add_argument("--ticks", type=int, default=100)
    parser.add_argument("--slow-events", type=int, default=2_000)
    parser.add_argument("--slow-rate", type=int, default=200_000, help="bytes/s")
    parser.add_argument(
        "--quick", "--smoke", dest="quick", action="store_true", help="small sizes: does it run"
    )
    parser.add_argument(
        "--only", choices=("throughput", "observers", "slow_consumer"), help="one measurement"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.rounds, args.observers, args.ticks = 2_000, 1, 10, 10
        args.slow_events, args.slow_rate = 200, 2_000_000
    measurements = {
        "throughput": lambda: asyncio.run(throughput(args.events, args.rounds)),
        "observers": lambda: asyncio.run(observers(args.observers, args.ticks)),
        "slow_consumer": lambda: slow_consumer(args.slow_events, args.slow_rate),
    }
    report: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
    }
    for name, measure in measurements.items():
        if args.only in (None, name):
            report[name] = measure()
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
