"""Every benchmark runs in its smoke mode (tiny sizes, seconds), so that a benchmark that
breaks fails here instead of on the day someone measures.

Each smoke run is a subprocess from the repository root, as the benchmark is run by hand.
fevex's side always runs; a peer's side (Agno, LangGraph, DBOS, ...) runs only where the peer
is installed, and never in its place: a smoke run fails when fevex's side fails. The last test
keeps the list whole: a new benchmark script must be run here, or named with what runs it.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
TIMEOUT_SECONDS = 600
# A peer's scenario script and the module that says it is installed.
PEERS = {
    "agno": "agno",
    "langgraph": "langgraph",
    "openai_agents": "agents",
    "pydantic_ai": "pydantic_ai",
}


def run(module: str, *arguments: str) -> str:
    """Run ``python -m module *arguments``; its standard output, once it succeeded."""
    completed = subprocess.run(
        [sys.executable, "-m", module, *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        check=False,
    )
    assert completed.returncode == 0, (module, completed.stdout[-2000:], completed.stderr[-4000:])
    return completed.stdout


def test_the_overhead_benchmark_runs(tmp_path: Path) -> None:
    run("benchmarks.frameworks.with_fevex", "--smoke", "--out", str(tmp_path / "fevex.json"))
    for script, module in PEERS.items():
        if importlib.util.find_spec(module) is not None:
            out = str(tmp_path / f"{script}.json")
            run(f"benchmarks.frameworks.with_{script}", "--smoke", "--out", out)
    figures = json.loads((tmp_path / "fevex.json").read_text("utf-8"))
    assert figures["smoke"] is True
    assert figures["sync_us_per_run"] > 0
    assert figures["async_us_per_run"] > 0
    table = run("benchmarks.overhead", "--results", str(tmp_path))
    assert re.search(r"^\| fevex +\| ", table, re.MULTILINE), table


def test_the_instruction_counts_run() -> None:
    assert "fevex: the scenario runs" in run("benchmarks.instructions", "--smoke")
    assert "both scenarios run" in run("benchmarks.observability", "--smoke")


@pytest.mark.parametrize("workers", [1, 2])
def test_the_postgres_workers_benchmark_runs(tmp_path: Path, workers: int) -> None:
    """One worker count per test (the smoke mode's 1 and 2), each under 30 s on a loaded
    suite worker."""
    out = tmp_path / "postgres_workers.json"
    run(
        "benchmarks.durable.postgres_workers", "--smoke", "--workers", str(workers),
        "--out", str(out),
    )  # fmt: skip
    measured = json.loads(out.read_text("utf-8"))
    assert [row["workers"] for row in measured["rows"]] == [workers]
    # pgbench takes a turn before each fevex window (one window of each script) and before
    # each floor window (the jsonb insert), and every window starts on a quiet server.
    for row in measured["rows"]:
        windows = len(row["fevex_windows"])
        assert len(row["pgbench_tpcb_windows"]) == windows
        assert len(row["pgbench_jsonb_insert_windows"]) == 2 * windows
        # The floor's workers ran and wrote through the server.
        assert row["floor_commits_per_second"] > 0
        assert row["floor_worker_cpu_vs_memory"] > 0
        assert 0 <= row["quiet_seconds_max"] < measured["quiet_timeout_seconds"]
        # Time a busy host took the cores away, which the figures do not show by themselves.
        assert row["machine_steal"] is None or 0 <= row["machine_steal"] <= 1
    assert "PostgreSQL throughput" in run("benchmarks.durable.report", "--results", str(tmp_path))


def test_the_durable_benchmark_runs(tmp_path: Path) -> None:
    """fevex's side of the durable benchmark but its PostgreSQL workers (run above, one
    worker count at a time), the conversation rounds and the report of both."""
    run(
        "benchmarks.durable.fevex_side", "--smoke", "--only", "tool_call_runs,event_paging",
        "--out", str(tmp_path),
    )  # fmt: skip
    conversation = str(tmp_path / "conversation.json")
    run("benchmarks.durable.conversation_rounds", "--smoke", "--out", conversation)
    rounds = json.loads(Path(conversation).read_text("utf-8"))
    # The 25-turn conversation on SQLite: every turn stored, in the renamed tables.
    stored = rounds["sides"]["fevex"]["variants"]["run_agent (async)"]["stored_per_conversation"]
    assert set(stored["tables"]) == {
        "fevex_runs",
        "fevex_events",
        "fevex_sessions",
        "fevex_session_turns",
    }
    assert stored["rows"] > 25
    report = run("benchmarks.durable.report", "--results", str(tmp_path))
    for heading in ("Tool-call run", "25-turn conversation", "list_events"):
        assert heading in report, report


def test_the_durable_benchmark_s_tool_call_runs_run_alone() -> None:
    run("benchmarks.durable.tool_call_runs", "--smoke", "--stores", "memory,sqlite")


def test_the_durable_benchmark_s_event_paging_runs_alone() -> None:
    run("benchmarks.durable.event_paging", "--smoke", "--stores", "sqlite")


def test_the_workflow_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "workflows.json"
    run("benchmarks.workflows.rounds", "--smoke", "--out", str(out))
    sides = json.loads(out.read_text("utf-8"))["sides"]
    fevex = sides["fevex/default"]["stores"]
    assert set(fevex) == {"sqlite", "postgres"}
    assert all(store["commits"]["write_transactions"] > 0 for store in fevex.values())
    assert "fevex (default)" in run("benchmarks.workflows.report", "--results", str(out))


def test_the_http_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "http.json"
    run("benchmarks.http.run", "--smoke", "--out", str(out))
    figures = json.loads(out.read_text("utf-8"))
    assert {"throughput", "observers", "slow_consumer"} <= set(figures)
    # Both peers were read: a frame per write, and a page per write as fevex writes.
    assert figures["throughput"]["fevex_over_peer"] > 0
    assert figures["throughput"]["fevex_over_paged_peer"] > 0


def test_the_flat_cost_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "flat.json"
    table = run("benchmarks.flat_costs", "--smoke", "--out", str(out))
    figures = json.loads(out.read_text("utf-8"))
    assert set(figures) >= {"events", "runs", "memory", "sessions"}
    assert set(figures["sessions"]["turn"]) == {"memory", "sqlite"}
    assert table.count("\n| ") >= 12, table


def test_the_wake_cost_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "wake.json"
    run("benchmarks.durable.wake_cost", "--smoke", "--out", str(out))
    figures = json.loads(out.read_text("utf-8"))["cpu_us_per_wait"]
    assert set(figures) == {"asyncio_sleep", "asyncio_sleep_0", "time_sleep"}
    assert all(value > 0 for value in figures.values()), figures


def test_the_worker_instructions_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "worker_instructions.json"
    table = run("benchmarks.durable.worker_instructions", "--smoke", "--out", str(out))
    result = json.loads(out.read_text("utf-8"))
    scenarios = result["scenarios"]
    # The in-memory worker, one that waits at each write, and the PostgreSQL worker, each
    # set against the first: in CPU here; in instructions only where callgrind counted.
    assert set(scenarios) == {"memory", "memory-waiting:0.001", "postgres"}
    assert result["counted"] is False
    for kind, figures in scenarios.items():
        assert figures["cpu_ms_per_run"] > 0, kind
        assert figures["cpu_vs_memory"] > 0, kind
        assert figures["instructions_per_run"] is None, kind
        assert f"| {kind} | " in table, table
    # Each write waited a millisecond at least: four of them per run.
    assert scenarios["memory-waiting:0.001"]["wall_ms_per_run"] >= 4


def test_the_server_instructions_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "server_instructions.json"
    printed = run("benchmarks.durable.server_instructions", "--smoke", "--out", str(out))
    result = json.loads(out.read_text("utf-8"))
    # The throwaway server, restarted by the script, served both workers: the warm-up runs
    # alone, then those and the measured ones. Only callgrind counts instructions.
    assert [worker["runs"] for worker in result["workers"]] == [20, 22]
    assert result["postgres_settings"]["server_version"]
    assert result["counted"] is False
    assert result["instructions_per_run"] is None
    assert "not counted (--smoke)" in printed


# Scripts this file does not start itself, and what runs them.
RUN_ELSEWHERE = {
    "benchmarks.durable.fevex_conversation": "conversation_rounds, above",
    "benchmarks.durable.langgraph_conversation": "conversation_rounds, where LangGraph is",
    "benchmarks.workflows.with_fevex": "workflows.rounds, above",
    "benchmarks.workflows.with_dbos": "workflows.rounds, where DBOS is",
    "benchmarks.workflows.with_langgraph": "workflows.rounds, where LangGraph is",
    "benchmarks.long_streams": "tests/test_long_streams_benchmark.py",
    "benchmarks.openapi.run": "packages/openapi/tests/test_benchmark_smoke.py",
    "benchmarks.openapi.measure": "benchmarks.openapi.run, in its smoke test",
    "benchmarks.durable.worker_hosts": "tests/test_postgres_hosts.py",
    "benchmarks.tool_calls.per_call": "tests/test_tool_calls_benchmark.py",
    **{
        f"benchmarks.frameworks.with_{script}": "the overhead test, where installed"
        for script in PEERS
    },
}


def test_every_benchmark_script_is_smoke_run() -> None:
    started = set(
        re.findall(r'run\(\s*f?"(benchmarks\.[\w.]+)"', Path(__file__).read_text("utf-8"))
    )
    scripts = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for path in BENCHMARKS.rglob("*.py")
        if 'if __name__ == "__main__":' in path.read_text("utf-8")
    }
    missing = scripts - started - set(RUN_ELSEWHERE)
    assert not missing, f"benchmark scripts without a smoke run: {sorted(missing)}"
    assert set(RUN_ELSEWHERE) <= scripts, sorted(set(RUN_ELSEWHERE) - scripts)
