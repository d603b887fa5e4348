"""Run every side of the workflow benchmark, each in its own interpreter, in alternating rounds,
against one throwaway PostgreSQL server, and count the commits each side's workflow costs.

Each side's script (``with_fevex``, ``with_dbos``, ``with_langgraph``) runs in a process of
its own, in a fresh directory (SQLite) or a fresh database (PostgreSQL). On a small shared
machine the load drifts, so instead of measuring one side after another, every round runs
each side once per store, in an order that rotates from round to round; a side's figure is
the median across rounds.

Commits per workflow: on SQLite each side's script counts them itself (``--mode count``,
see ``scenario.SqliteCommits``). On PostgreSQL this module reads the server's counters
around two runs of the side's script on fresh databases, one with no counted workflow and
one with ``COUNTED``, and divides the difference by ``COUNTED``, so that starting up,
creating tables and the warm-up workflow cancel out:

- write transactions: transaction ids assigned (``pg_current_snapshot()``'s xmax), which
  PostgreSQL does only for a transaction (or subtransaction) that writes;
- transactions: ``pg_stat_database.xact_commit`` of the side's database, read after the
  script has exited and its server processes have ended (a backend flushes its counters
  when it ends), read-only ones included;
- WAL bytes: ``pg_current_wal_lsn()`` moved.

Needs an interpreter with fevex-postgres and psycopg (the throwaway server); run with
``python -m benchmarks.workflows.rounds --python fevex=.venv/bin/python --python
dbos=.nox/<env>/bin/python --python langgraph=.nox/<env>/bin/python --out DIR``.
``--smoke`` runs one round of a few workflows per side (without ``--python``: fevex, and each
peer installed in this interpreter) and fails when fevex's side failed anywhere.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.durable import timing
from benchmarks.measure import OFFLINE_ENVIRONMENT
from benchmarks.workflows import scenario

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 3
PROCESS_TIMEOUT_SECONDS = 300
# (side, variant): every variant is a separate process with its own store.
SIDES = (
    ("fevex", "default"),
    ("dbos", "default"),
    ("dbos", "poll-10ms"),
    ("langgraph", "default"),
    ("langgraph", "sync"),
)
MODULES = {
    "fevex": "benchmarks.workflows.with_fevex",
    "dbos": "benchmarks.workflows.with_dbos",
    "langgraph": "benchmarks.workflows.with_langgraph",
}


class SideFailed(RuntimeError):
    pass


# Given to every side's script: ("--smoke",) in a smoke run.
SIDE_FLAGS: tuple[str, ...] = ()


def run_side(
    python: str, side: str, variant: str, store: str, directory: Path, url: str | None, *extra: str
) -> dict[str, Any]:
    command = [python, "-m", MODULES[side], "--store", store, "--directory", str(directory)]
    command += ["--variant", variant, *SIDE_FLAGS, *extra]
    if url is not None:
        command += ["--postgres-url", url]
    completed = subprocess.run(
        command,
        cwd=ROOT,
        env={**os.environ, **OFFLINE_ENVIRONMENT},
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_SECONDS,
        check=False,
    )
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        raise SideFailed(f"{side} ({variant}, {store}) failed:\n{completed.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# -- PostgreSQL ------------------------------------------------------------------------


@contextlib.contextmanager
def postgres_url(given: str | None) -> Iterator[str]:
    if given is not None:
        yield given
        return
    from fevex_postgres.testing import postgres_server

    with postgres_server(database="fevex_bench") as url:
        yield url


def _connect(url: str) -> Any:
    import psycopg

    return psycopg.connect(scenario.libpq_url(url), autocommit=True)


def fresh_database(url: str, name: str) -> str:
    with _connect(url) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
        connection.execute(f'CREATE DATABASE "{name}"')
    return url.rsplit("/", 1)[0] + "/" + name


def server_counters(url: str, database: str) -> dict[str, int]:
    """Transaction ids assigned so far, WAL position, and ``database``'s committed
    transactions, once none of its server processes is left."""
    with _connect(url) as connection:
        for _ in range(200):
            row = connection.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (database,)
            ).fetchone()
            if row is not None and row[0] == 0:
                break
            time.sleep(0.05)
        connection.execute("SELECT pg_stat_clear_snapshot()")
        row = connection.execute(
            "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint,"
            " pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,"
            " (SELECT xact_commit FROM pg_stat_database WHERE datname = %s)",
            (database,),
        ).fetchone()
    assert row is not None
    return {"xids": int(row[0]), "wal_bytes": int(row[1]), "xact_commit": int(row[2] or 0)}


def postgres_commits(python: str, side: str, variant: str, url: str) -> dict[str, Any]:
    """Per workflow: the difference between a run of COUNTED workflows and a run of none."""
    deltas = {}
    for workflows in (0, scenario.COUNTED):
        name = f"count_{side}_{variant.replace('-', '_')}_{workflows}"
        database_url = fresh_database(url, name)
        before = server_counters(url, name)
        with tempfile.TemporaryDirectory(prefix="fevex-wf-") as directory:
            result = run_side(
                python, side, variant, "postgres", Path(directory), database_url,
                "--mode", "count", "--workflows", str(workflows),
            )  # fmt: skip
        if "skipped" in result:
            return {"skipped": result["skipped"]}
        after = server_counters(url, name)
        deltas[workflows] = {key: after[key] - before[key] for key in before}
    return {
        "write_transactions": (deltas[scenario.COUNTED]["xids"] - deltas[0]["xids"])
        / scenario.COUNTED,
        "transactions": (deltas[scenario.COUNTED]["xact_commit"] - deltas[0]["xact_commit"])
        / scenario.COUNTED,
        "wal_bytes": (deltas[scenario.COUNTED]["wal_bytes"] - deltas[0]["wal_bytes"])
        / scenario.COUNTED,
        "counted_workflows": scenario.COUNTED,
    }


def sqlite_commits(python: str, side: str, variant: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fevex-wf-") as directory:
        result = run_side(
            python, side, variant, "sqlite", Path(directory), None,
            "--mode", "count", "--workflows", str(scenario.COUNTED),
        )  # fmt: skip
    if "skipped" in result:
        return {"skipped": result["skipped"]}
    counted = result["sqlite"]
    return {
        "write_transactions": counted["write_commits"] / scenario.COUNTED,
        "read_only_commits": counted["read_only_commits"] / scenario.COUNTED,
        "statements": counted["statements"] / scenario.COUNTED,
        "counted_workflows": scenario.COUNTED,
    }


# -- the rounds ------------------------------------------------------------------------


def measure(
    pythons: dict[str, str], stores: list[str], rounds: int, url: str | None
) -> dict[str, Any]:
    sides = [(side, variant) for side, variant in SIDES if side in pythons]
    results: dict[str, dict[str, Any]] = {}

    def entry(side: str, variant: str) -> dict[str, Any]:
        return results.setdefault(
            f"{side}/{variant}", {"side": side, "variant": variant, "stores": {}}
        )

    def record_failure(side: str, variant: str, store: str, error: Exception) -> None:
        print(str(error), file=sys.stderr, flush=True)
        entry(side, variant)["stores"].setdefault(store, {})["error"] = str(error)[-1500:]

    for number in range(rounds):
        shift = number % len(sides)
        for side, variant in sides[shift:] + sides[:shift]:
            for store in stores:
                figures = entry(side, variant)["stores"].setdefault(store, {})
                if "error" in figures or "skipped" in figures:
                    continue
                print(f"round {number + 1}/{rounds}: {side} {variant} {store}", file=sys.stderr)
                database_url = None
                if store == "postgres":
                    assert url is not None
                    name = f"wf_{side}_{variant.replace('-', '_')}_{number}"
                    database_url = fresh_database(url, name)
                try:
                    with tempfile.TemporaryDirectory(prefix="fevex-wf-") as directory:
                        result = run_side(
                            pythons[side], side, variant, store, Path(directory), database_url
                        )
                except (SideFailed, subprocess.TimeoutExpired) as error:
                    record_failure(side, variant, store, error)
                    continue
                entry(side, variant)["versions"] = result["versions"]
                if "skipped" in result:
                    figures["skipped"] = result["skipped"]
                    continue
                figures.setdefault("per_second", []).append(result["rate"]["per_second"])
                figures.setdefault("resume_ms", []).extend(result["resume_ms"])

    for side, variant in sides:
        for store in stores:
            figures = entry(side, variant)["stores"].setdefault(store, {})
            if "error" in figures or "skipped" in figures:
                continue
            print(f"counting commits: {side} {variant} {store}", file=sys.stderr)
            try:
                if store == "sqlite":
                    figures["commits"] = sqlite_commits(pythons[side], side, variant)
                else:
                    assert url is not None
                    figures["commits"] = postgres_commits(pythons[side], side, variant, url)
            except (SideFailed, subprocess.TimeoutExpired) as error:
                figures["commits"] = {"error": str(error)[-1500:]}

    for data in results.values():
        for figures in data["stores"].values():
            if figures.get("per_second"):
                figures["workflows_per_second"] = timing.summary(figures["per_second"])
            if figures.get("resume_ms"):
                figures["resume"] = timing.summary(figures.pop("resume_ms"))
    return {
        "benchmark": "workflows",
        "machine": timing.machine(),
        "rounds": rounds,
        "resumes_per_round": scenario.RESUMES,
        "sides": results,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="SIDE=PATH",
        help="an interpreter for a side (fevex, dbos, langgraph); a side without one is left out",
    )
    parser.add_argument("--stores", default=",".join(scenario.STORES))
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--postgres-url", help="use this server instead of a throwaway one")
    parser.add_argument("--out", type=Path, help="also write the JSON result to this file")
    parser.add_argument("--smoke", action="store_true", help="one short round: does it work")
    arguments = parser.parse_args(argv)
    global SIDE_FLAGS
    pythons = dict(item.split("=", 1) for item in arguments.python)
    rounds = arguments.rounds
    if arguments.smoke:
        SIDE_FLAGS, rounds = ("--smoke",), 1
        scenario.use_smoke_sizes()
        if not pythons:
            installed = [side for side in MODULES if importlib.util.find_spec(side) is not None]
            pythons = {side: sys.executable for side in ["fevex", *installed]}
    unknown = sorted(set(pythons) - set(MODULES))
    if unknown or not pythons:
        parser.error(f"give --python SIDE=PATH for some of {', '.join(MODULES)}")
    stores = arguments.stores.split(",")
    if "postgres" in stores:
        with postgres_url(arguments.postgres_url) as url:
            result = measure(pythons, stores, rounds, url)
            from benchmarks.durable.stores import server_settings

            result["postgres_settings"] = server_settings(url)
    else:
        result = measure(pythons, stores, rounds, None)
    timing.write_result(arguments.out, result)
    failed = _fevex_failures(result)
    if arguments.smoke and failed:
        print(f"fevex's side failed: {failed}", file=sys.stderr)
        return 1
    return 0


def _fevex_failures(result: dict[str, Any]) -> list[str]:
    """The stores on which a fevex variant failed, or produced no rate or commit count."""
    failed = []
    for name, data in result["sides"].items():
        if data["side"] != "fevex":
            continue
        for store, figures in data["stores"].items():
            commits = figures.get("commits", {})
            if "error" in figures or "error" in commits or "workflows_per_second" not in figures:
                failed.append(f"{name} on {store}")
    return failed


if __name__ == "__main__":
    sys.exit(main())
