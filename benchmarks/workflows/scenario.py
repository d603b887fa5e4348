"""The five-step workflow every side runs, and the measurements each side's script shares.

Standard library only: fevex's, DBOS's and LangGraph's scripts import it in their own
environments. A side describes how it runs the workflow with :class:`Workflows`; ``main``
of each side parses :func:`arguments` and calls :func:`measure` or :func:`count`, which
print one JSON object on the last line of stdout for ``rounds`` to collect.

The workflow: steps ``s1`` .. ``s5``, each a durable function returning ``{"n": i}``; the
workflow returns ``{"total": 15}``. In the resume scenario step ``s4`` waits for an event
(``{"ok": True}``) instead of running, and the workflow still returns ``{"total": 15}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sqlite3.dbapi2
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.durable import timing
from benchmarks.measure import OFFLINE_ENVIRONMENT

STEPS = 5
TOTAL = 15
EVENT = "go"
EVENT_PAYLOAD = {"ok": True}
STORES = ("sqlite", "postgres")
# Per process: workflows paused at step 4 and resumed, one at a time.
RESUMES = 20
# Workflows the commit count covers (after one warm-up workflow).
COUNTED = 100
WARMUP_SECONDS = 0.5


def use_smoke_sizes() -> None:
    """A few workflows and one repeat per figure: does the benchmark still work."""
    global RESUMES, COUNTED, WARMUP_SECONDS
    RESUMES, COUNTED, WARMUP_SECONDS = 2, 3, 0.0
    timing.use_smoke_budget()


def step_value(number: int) -> dict[str, int]:
    """What step ``s<number>`` returns."""
    return {"n": number}


def total(*values: dict[str, Any]) -> dict[str, int]:
    return {"total": sum(int(value["n"]) for value in values)}


def resumed_value(event: Any) -> dict[str, int]:
    """Step 4's value in the resume scenario, from the delivered event's payload."""
    if not isinstance(event, dict) or event.get("ok") is not True:
        raise RuntimeError(f"step 4 received {event!r}, expected {EVENT_PAYLOAD!r}")
    return step_value(4)


@dataclass(frozen=True)
class Workflows:
    """How one side runs the scenario, on a store it has already opened."""

    run: Callable[[], Awaitable[Any]]
    """Run one five-step workflow to its end; returns its output."""
    start_paused: Callable[[], Awaitable[Any]]
    """Start the resume scenario's workflow and return once it waits at step 4; returns
    whatever ``resume`` needs (an id, a handle)."""
    resume: Callable[[Any], Awaitable[Any]]
    """Deliver the event to a paused workflow and return the workflow's output."""


def check(output: Any) -> None:
    """Every measured workflow must have run all five steps."""
    value = output.get("total") if isinstance(output, dict) else None
    if value != TOTAL:
        raise RuntimeError(f"the workflow returned {output!r}, expected {{'total': {TOTAL}}}")


def arguments(description: str, argv: list[str] | None) -> argparse.Namespace:
    """The arguments every side's script takes."""
    for name, value in OFFLINE_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--store", choices=STORES, required=True)
    parser.add_argument("--directory", type=Path, required=True, help="where SQLite files go")
    parser.add_argument("--postgres-url", help="a postgresql+psycopg:// URL of an empty database")
    parser.add_argument("--variant", default="default", help="a side's own variant name")
    parser.add_argument(
        "--mode",
        choices=("measure", "count"),
        default="measure",
        help="measure: workflows/s and resume time; count: run --workflows workflows after one "
        "warm-up (the commits they cost are counted, on SQLite here, on PostgreSQL by rounds)",
    )
    parser.add_argument("--workflows", type=int, default=COUNTED, help="count mode only")
    parser.add_argument("--smoke", action="store_true", help="a few workflows: does it work")
    parsed = parser.parse_args(argv)
    if parsed.smoke:
        use_smoke_sizes()
    if parsed.store == "postgres" and not parsed.postgres_url:
        parser.error("--store postgres needs --postgres-url")
    parsed.directory.mkdir(parents=True, exist_ok=True)
    return parsed


def sqlite_path(arguments: argparse.Namespace, name: str) -> Path:
    return Path(arguments.directory) / f"{name}.db"


def libpq_url(url: str) -> str:
    """The SQLAlchemy URL as psycopg and libpq read it."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


async def measure(workflows: Workflows) -> dict[str, Any]:
    """Workflows/s (median of repeats, see ``benchmarks.durable.timing``) and the time from
    delivering the event to a workflow paused at step 4 until its output is back."""

    async def one() -> None:
        check(await workflows.run())

    # The first workflows pay for connections, caches and lazy imports; the rate harness
    # sizes its repeats from its first calls, so those must already be warm.
    deadline = time.perf_counter() + WARMUP_SECONDS
    while time.perf_counter() < deadline:
        await one()
    rate = (await timing.interleaved_rates({"run": one}))["run"]
    resume_ms = []
    for _ in range(RESUMES):
        handle = await workflows.start_paused()
        start = time.perf_counter()
        output = await workflows.resume(handle)
        resume_ms.append((time.perf_counter() - start) * 1e3)
        check(output)
    return {"rate": rate.to_json(), "resume_ms": resume_ms}


async def count(workflows: Workflows, commits: SqliteCommits | None, number: int) -> dict[str, Any]:
    """Run one warm-up workflow, then ``number`` counted ones."""
    check(await workflows.run())
    if commits is not None:
        commits.reset()
    for _ in range(number):
        check(await workflows.run())
    result: dict[str, Any] = {"workflows": number}
    if commits is not None:
        result["sqlite"] = commits.snapshot()
    return result


def emit(side: str, arguments: argparse.Namespace, versions: dict[str, str], body: Any) -> None:
    """Print the side's result as the last line of stdout."""
    result = {
        "side": side,
        "variant": arguments.variant,
        "store": arguments.store,
        "mode": arguments.mode,
        "versions": versions,
        **body,
    }
    print(json.dumps(result), flush=True)


class SqliteCommits:
    """Counts the write transactions committed on every ``sqlite3`` connection this process
    opens after :meth:`install` (LangGraph's savers, aiosqlite, and SQLAlchemy's pysqlite,
    which fevex-sqlite and DBOS use, all open their connections through ``sqlite3``).

    Python's ``sqlite3`` has no commit hook, so each connection gets a trace callback that
    sees every statement it runs: a ``COMMIT``/``END`` counts when the connection's
    ``total_changes`` grew since its ``BEGIN``/``SAVEPOINT`` (read-only transactions are not
    counted), and an ``INSERT``/``UPDATE``/``DELETE``/``REPLACE`` run outside a transaction
    counts as the transaction SQLite commits for it. The callback costs time, so it is used
    only in count mode, never while workflows are timed.
    """

    WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.commits = 0
        self.autocommit_writes = 0
        self.read_only_commits = 0
        self.statements = 0

    def install(self) -> SqliteCommits:
        original = sqlite3.connect

        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            connection = original(*args, **kwargs)
            self._watch(connection)
            return connection

        sqlite3.connect = connect  # type: ignore[assignment]
        sqlite3.dbapi2.connect = connect  # type: ignore[assignment]
        return self

    def reset(self) -> None:
        with self._lock:
            self.commits = self.autocommit_writes = self.read_only_commits = self.statements = 0

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {
                "write_commits": self.commits + self.autocommit_writes,
                "explicit_commits": self.commits,
                "autocommit_writes": self.autocommit_writes,
                "read_only_commits": self.read_only_commits,
                "statements": self.statements,
            }

    def _watch(self, connection: sqlite3.Connection) -> None:
        # sqlite3 connections take no weak references; the cycle through the callback is one
        # the garbage collector breaks (the connection traverses its trace callback).
        watched = connection
        started_at = [connection.total_changes]

        def trace(statement: str) -> None:
            head = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else ""
            with self._lock:
                self.statements += 1
                if head in ("BEGIN", "SAVEPOINT") and not watched.in_transaction:
                    started_at[0] = watched.total_changes
                elif head in ("COMMIT", "END"):
                    if watched.total_changes != started_at[0]:
                        self.commits += 1
                    else:
                        self.read_only_commits += 1
                    started_at[0] = watched.total_changes
                elif head in self.WRITES and not watched.in_transaction:
                    self.autocommit_writes += 1
                if os.environ.get("FEVEX_BENCH_TRACE_SQL"):
                    print("sql:", watched.in_transaction, statement[:100].replace("\n", " "))

        connection.set_trace_callback(trace)
