"""``list_events`` page latency with 1 000 and with 1 000 000 stored events.

For each store (SQLite, PostgreSQL) and each size, a store of its own (a new file, a new
database) holds one run with that many events; a page is ``list_events(run_id,
after=<the event at the middle sequence>, limit=100, order="asc")``. Each page read is
timed alone, and the reads of both sizes are interleaved so that they see the same machine
load; after a warm-up, the median and the 95th percentile of many reads are reported, for
``Fevex.list_events`` (what a user calls: it also checks the run exists) and for the
store's ``list_events`` underneath.

Loading: the run and its first 1 000 events are written through the store's own
``create_execution``; the rest of a million is bulk-inserted straight into the store's
events table (SQLite: ``executemany`` in one transaction; PostgreSQL: ``COPY``, then the
run's ``last_sequence`` is set as a commit would have set it, and ``ANALYZE``, as
autovacuum would do after such a load). Event ids are random (``evt_`` and 24 hex digits),
the worst case for the id index. Loading through ``commit_execution`` in 10 000-event
batches takes one to two minutes per store on a 2-core machine; it is not what this measures.

Run with ``python -m benchmarks.durable.event_paging [--out FILE] [--postgres-url URL]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

from benchmarks.durable import stores, timing
from fevex import Fevex, create_fevex
from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCreate, RunStore

SIZES = (1_000, 1_000_000)
PAGE = 100
THROUGH_API = 1_000
BULK_BATCH = 50_000
WARMUP_READS = 50
READS = 1_000
READ_SECONDS = 20.0
OCCURRED_AT = "2026-01-01T00:00:00.000000Z"


def use_smoke_sizes() -> None:
    """Stores of 1 000 and 5 000 events and a few reads: does the benchmark still work."""
    global SIZES, BULK_BATCH, WARMUP_READS, READS
    SIZES, BULK_BATCH, WARMUP_READS, READS = (1_000, 5_000), 2_000, 2, 5


def new_id(prefix: str) -> str:
    """A random id of the form the runtime gives runs: the worst case for the id index."""
    return f"{prefix}_{os.urandom(12).hex()}"


class EventRows:
    """The rows of one run's events, noting the id of the event at ``middle``."""

    def __init__(self, run_id: str, middle: int) -> None:
        self.run_id = run_id
        self.middle = middle
        self.middle_id = ""

    def rows(self, first: int, last: int) -> Iterator[tuple[str, str, int, str, str, str]]:
        for sequence in range(first, last + 1):
            row = self.row(sequence)
            if sequence == self.middle:
                self.middle_id = row[0]
            yield row

    def row(self, sequence: int) -> tuple[str, str, int, str, str, str]:
        """A realistic stored event: a streamed model token, about 150 bytes as a row."""
        payload = {"step": 1 + sequence // 1_000, "delta": f"token {sequence} of the answer"}
        return (
            new_id("evt"),
            self.run_id,
            sequence,
            "model.output.delta",
            OCCURRED_AT,
            json.dumps(payload, separators=(",", ":")),
        )


async def create_run(store: RunStore, rows: EventRows, size: int) -> None:
    """The run and its first events, through the store's own write path."""
    run = AgentRun(
        rows.run_id, new_id("ses"), "pager", "running", "page me", OCCURRED_AT, OCCURRED_AT
    )
    events = tuple(
        RunEvent(row[0], row[1], row[2], row[3], row[4], json.loads(row[5]))
        for row in rows.rows(1, min(size, THROUGH_API))
    )
    await store.create_execution(
        ExecutionCreate(run, None, events, {"messages": []}, "loader", 3600.0)
    )


def bulk_sqlite(path: Path, rows: EventRows, size: int) -> None:
    with closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.execute("BEGIN IMMEDIATE")
        for first in range(THROUGH_API + 1, size + 1, BULK_BATCH):
            connection.executemany(
                "INSERT INTO fevex_events (id, run_id, sequence, type, occurred_at, payload) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                rows.rows(first, min(size, first + BULK_BATCH - 1)),
            )
        connection.execute("COMMIT")


def bulk_postgres(url: str, rows: EventRows, size: int) -> None:
    import psycopg

    with psycopg.connect(stores.libpq_url(url)) as connection:
        with connection.cursor() as cursor:
            copy_sql = (
                "COPY fevex_events (id, run_id, sequence, type, occurred_at, payload) FROM STDIN"
            )
            with cursor.copy(copy_sql) as copy:
                for row in rows.rows(THROUGH_API + 1, size):
                    copy.write_row(row)
            cursor.execute(
                "UPDATE fevex_runs SET last_sequence = %s WHERE id = %s", (size, rows.run_id)
            )
        connection.commit()
        connection.autocommit = True
        connection.execute("ANALYZE fevex_events")


async def load(
    kind: str, size: int, directory: Path, url: str | None
) -> tuple[RunStore, EventRows]:
    store = await stores.open_store(kind, directory, url)
    rows = EventRows(new_id("run"), size // 2)
    await create_run(store, rows, size)
    if size > THROUGH_API:
        if kind == "sqlite":
            bulk_sqlite(directory / "runs.db", rows, size)
        else:
            assert url is not None
            bulk_postgres(url, rows, size)
    last = await store.list_events(rows.run_id, order="desc", limit=1)
    if last[0].sequence != size:
        raise RuntimeError(f"the run holds {last[0].sequence} events, not {size}")
    return store, rows


class Pager:
    """Reads one page in the middle of a loaded run, through the app or the store."""

    def __init__(self, store: RunStore, rows: EventRows, size: int, load_seconds: float) -> None:
        self.store = store
        self.rows = rows
        self.size = size
        self.load_seconds = load_seconds
        self.app: Fevex = create_fevex(run_store=store)
        self.samples: dict[str, list[float]] = {"app": [], "store": []}

    async def read(self, through: str) -> list[RunEvent]:
        run_id, cursor = self.rows.run_id, self.rows.middle_id
        if through == "app":
            return await self.app.list_events(run_id, after=cursor, limit=PAGE)
        return list(await self.store.list_events(run_id, after=cursor, limit=PAGE))

    async def check(self) -> None:
        for through in self.samples:
            page = await self.read(through)
            first = self.rows.middle + 1
            if len(page) != PAGE or page[0].sequence != first:
                raise RuntimeError(f"a page began at {page[0].sequence}, not {first}")

    async def timed_read(self, through: str) -> None:
        start = time.perf_counter()
        await self.read(through)
        self.samples[through].append((time.perf_counter() - start) * 1e3)

    def result(self, kind: str) -> dict[str, Any]:
        return {
            "store": kind,
            "events": self.size,
            "load_seconds": self.load_seconds,
            "app_list_events_ms": timing.summary(self.samples["app"]),
            "store_list_events_ms": timing.summary(self.samples["store"]),
        }


async def interleaved(pagers: list[Pager]) -> None:
    """Read pages from every store in turn, so that each sees the same machine load; a
    small machine's load changes faster than a series of reads from one store lasts."""
    for pager in pagers:
        await pager.check()
    for _ in range(WARMUP_READS):
        for pager in pagers:
            await pager.read("app")
    deadline = time.perf_counter() + READ_SECONDS
    for index in range(READS):
        if time.perf_counter() > deadline:
            break
        order = pagers if index % 2 == 0 else pagers[::-1]
        for through in ("app", "store"):
            for pager in order:
                await pager.timed_read(through)


async def measure_store(kind: str, url: str | None) -> list[dict[str, Any]]:
    with contextlib.ExitStack() as directories:
        pagers = []
        for size in SIZES:
            directory = Path(
                directories.enter_context(
                    tempfile.TemporaryDirectory(prefix=f"fevex-bench-paging-{kind}-")
                )
            )
            database = None
            if kind == "postgres":
                assert url is not None
                database = stores.create_database(url, f"fevex_paging_{size}")
            started = time.perf_counter()
            store, rows = await load(kind, size, directory, database)
            pagers.append(Pager(store, rows, size, time.perf_counter() - started))
        await interleaved(pagers)
        for pager in pagers:
            await pager.app.close()
        results = [pager.result(kind) for pager in pagers]
    for result in results:
        print(f"event paging: {result}", flush=True)
    return results


async def measure_all(kinds: tuple[str, ...], url: str | None) -> list[dict[str, Any]]:
    return [result for kind in kinds for result in await measure_store(kind, url)]


def measure(kinds: tuple[str, ...], url: str | None) -> dict[str, Any]:
    return {
        "benchmark": "event_paging",
        "machine": timing.machine(),
        "page": PAGE,
        "rows": asyncio.run(measure_all(kinds, url)),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the JSON result to this file")
    parser.add_argument("--postgres-url", help="use this server instead of a throwaway one")
    parser.add_argument("--stores", default="sqlite,postgres", help="comma-separated")
    parser.add_argument("--smoke", action="store_true", help="small stores: does it still work")
    arguments = parser.parse_args(argv)
    if arguments.smoke:
        use_smoke_sizes()
    kinds = tuple(arguments.stores.split(","))
    if "postgres" in kinds:
        with stores.postgres_url(arguments.postgres_url) as url:
            result = measure(kinds, url)
    else:
        result = measure(kinds, None)
    timing.write_result(arguments.out, result)


if __name__ == "__main__":
    main()
