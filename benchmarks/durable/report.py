"""Print the durable benchmark's tables (Markdown) from the JSON results of one run.

Reads whatever of ``tool_call_runs.json``, ``conversation.json``, ``postgres_workers.json``
and ``event_paging.json`` the results directory holds; each table sets its figures against
a baseline measured in the same run, and states whether the target it carries is met.

Usage: ``python -m benchmarks.durable.report [--results DIR]`` (default
``.nox/bench-results/durable``). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_RESULTS = Path(__file__).resolve().parents[2] / ".nox" / "bench-results" / "durable"
CONVERSATION_TARGET = 2.0
PAGING_TARGET = 1.5
FEVEX_HEADLINE = "run_agent (async)"
LANGGRAPH_DEFAULT = "durability=async"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def number(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def share(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"


def times(value: float) -> str:
    return f"{value:.2f}x"


def machine_line(result: dict[str, Any]) -> str:
    machine = result["machine"]
    load = machine.get("load_average")
    load_text = f", load average {load[0]:.1f}" if load else ""
    return (
        f"_{machine['date']}, Python {machine['python']}, SQLite {machine['sqlite']}, "
        f"{machine['cpus']} CPUs{load_text}_"
    )


def tool_call_runs(result: dict[str, Any]) -> str:
    by_store = {row["store"]: row for row in result["stores"]}
    memory = by_store.get("memory")
    rows = []
    for row in result["stores"]:
        run, stream = row["run_agent"], row["stream_agent"]
        slower = ""
        if memory is not None:
            slower = number(memory["run_agent"]["per_second"] / run["per_second"], 1) + "x"
        rows.append(
            [
                row["store"],
                number(run["per_second"]),
                number(run["ms_per_call"], 2),
                slower,
                number(run["commits_per_run"], 1),
                f"{run['store_share_of_run_time']:.0%}",
                number(stream["per_second"]),
                number(stream["commits_per_run"], 1),
            ]
        )
    text = table(
        [
            "store",
            "run_agent runs/s",
            "ms/run",
            "slower than memory",
            "commits/run",
            "time in store",
            "stream_agent runs/s",
            "stream commits/run",
        ],
        rows,
    )
    settings = result.get("postgres_settings")
    if settings:
        text += (
            f"\n\nPostgreSQL {settings['server_version'].split()[0]}, fsync={settings['fsync']}, "
            f"synchronous_commit={settings['synchronous_commit']}."
        )
    return f"### Tool-call run, one run after another\n\n{machine_line(result)}\n\n{text}"


def conversation(result: dict[str, Any]) -> str:
    sides = result["sides"]
    fevex = sides["fevex"]["variants"]
    baseline = fevex[FEVEX_HEADLINE]["ms"]["median"]
    rows = []
    for side, data in sides.items():
        for name, variant in data["variants"].items():
            milliseconds = variant["ms"]
            stored = variant.get("stored_per_conversation")
            rows.append(
                [
                    side,
                    name,
                    number(milliseconds["median"]),
                    number(milliseconds["p95"]),
                    number(1e3 / milliseconds["median"], 2),
                    times(milliseconds["median"] / baseline),
                    number(variant["commits_per_turn"], 1) if "commits_per_turn" in variant else "",
                    f"{variant['store_share_of_time']:.0%}"
                    if "store_share_of_time" in variant
                    else "",
                    number(stored["rows"]) if stored else "",
                    number(stored["bytes"] / 1024, 1) if stored else "",
                ]
            )
    text = table(
        [
            "side",
            "variant",
            "ms/conversation",
            "p95 ms",
            "conversations/s",
            "time ÷ fevex",
            "commits/turn",
            "time in store",
            "rows stored/conv.",
            "KiB stored/conv.",
        ],
        rows,
    )
    versions = "; ".join(
        f"{side}: " + ", ".join(f"{name} {version}" for name, version in data["versions"].items())
        for side, data in sides.items()
    )
    verdict = ""
    if "langgraph" in sides:
        langgraph = sides["langgraph"]["variants"]
        default = min(
            variant["ms"]["median"]
            for name, variant in langgraph.items()
            if name.endswith(LANGGRAPH_DEFAULT)
        )
        fastest_name, fastest = min(
            ((name, variant["ms"]["median"]) for name, variant in langgraph.items()),
            key=lambda item: item[1],
        )
        ratio = default / baseline
        met = "met" if ratio >= CONVERSATION_TARGET else "missed"
        verdict = (
            f"\n\nLangGraph's default durability (the faster of invoke and ainvoke) takes "
            f"{times(ratio)} the time of fevex `{FEVEX_HEADLINE}`; target: at least "
            f"{times(CONVERSATION_TARGET)}, **{met}**. Its fastest variant ({fastest_name}) "
            f"takes {times(fastest / baseline)}."
        )
    return (
        f"### {result['turns']}-turn conversation on SQLite\n\n{machine_line(result)}; "
        f"{result['rounds']} alternating rounds of {result['conversations_per_round']} "
        f"conversations per variant; {versions}\n\n{text}{verdict}"
    )


def postgres_workers(result: dict[str, Any]) -> str:
    first = result["rows"][0]["fevex_runs_per_second"]
    rows = []
    for row in result["rows"]:
        runs = row["fevex_runs_per_second"]
        rows.append(
            [
                str(row["workers"]),
                number(runs),
                times(runs / first),
                number(row["worker_cpu_cores"], 2),
                number(row["worker_cpu_ms_per_run"], 2),
                times(row["worker_cpu_vs_memory"]) if "worker_cpu_vs_memory" in row else "",
                share(row.get("machine_busy")),
                number(4 * runs),
                number(row["pgbench_tpcb_tps"]),
                share(row.get("pgbench_tpcb_machine_busy")),
                f"{4 * runs / row['pgbench_tpcb_tps']:.1%}",
                number(row["pgbench_jsonb_insert_tps"]),
                f"{4 * runs / row['pgbench_jsonb_insert_tps']:.1%}",
                number(row["pgbench_select_only_tps"]),
                # Figures that results from before 2026-12-07 do not have.
                f"{row['floor_commits_vs_jsonb_insert']:.1%}"
                if "floor_commits_vs_jsonb_insert" in row
                else "",
                times(row["floor_worker_cpu_vs_memory"])
                if "floor_worker_cpu_vs_memory" in row
                else "",
                # Figures that results from before 2026-12-03 do not have.
                number(row["involuntary_switches_per_run"], 2)
                if "involuntary_switches_per_run" in row
                else "",
                share(row.get("machine_steal")),
            ]
        )
    text = table(
        [
            "workers",
            "fevex runs/s",
            "vs 1 worker",
            "worker CPU (cores)",
            "worker CPU ms/run",
            "vs in-memory",
            "machine busy",
            "fevex commits/s",
            "pgbench tpcb-like TPS",
            "machine busy (pgbench)",
            "commits/s ÷ TPS",
            "pgbench jsonb insert TPS",
            "commits/s ÷ jsonb insert TPS",
            "pgbench select-only TPS",
            "floor commits/s ÷ jsonb insert TPS",
            "floor worker CPU vs in-memory",
            "involuntary switches per run",
            "stolen by the host",
        ],
        rows,
    )
    settings = result["postgres_settings"]
    memory = result.get("memory_worker")
    baseline = (
        f"; in-memory worker CPU {memory['worker_cpu_ms_per_run']:.2f} ms/run" if memory else ""
    )
    return (
        "### PostgreSQL throughput: worker processes next to pgbench\n\n"
        f"{machine_line(result)}; PostgreSQL {settings['server_version'].split()[0]} "
        f"(fsync={settings['fsync']}, synchronous_commit={settings['synchronous_commit']}), "
        f"{result['pgbench']['version']} scale {result['pgbench']['scale']}; median of "
        f"{result['windows']} windows of {result['window_seconds']:g} s{baseline}\n\n{text}"
    )


def event_paging(result: dict[str, Any]) -> str:
    rows = []
    verdicts = []
    by_store: dict[str, dict[int, dict[str, Any]]] = {}
    for row in result["rows"]:
        by_store.setdefault(row["store"], {})[row["events"]] = row
    for store, sizes in by_store.items():
        smallest = sizes[min(sizes)]
        for events, row in sorted(sizes.items()):
            app, direct = row["app_list_events_ms"], row["store_list_events_ms"]
            ratio = app["median"] / smallest["app_list_events_ms"]["median"]
            rows.append(
                [
                    store,
                    number(events),
                    number(app["median"], 2),
                    number(app["p95"], 2),
                    number(direct["median"], 2),
                    number(direct["p95"], 2),
                    times(ratio),
                    str(app["count"]),
                ]
            )
        largest = sizes[max(sizes)]
        ratio = largest["app_list_events_ms"]["median"] / smallest["app_list_events_ms"]["median"]
        met = "met" if ratio <= PAGING_TARGET else "missed"
        verdicts.append(
            f"{store}: {number(max(sizes))} events {times(ratio)} the latency at "
            f"{number(min(sizes))}; target ≤ {times(PAGING_TARGET)}: **{met}**."
        )
    text = table(
        [
            "store",
            "stored events",
            "median ms",
            "p95 ms",
            "store median ms",
            "store p95 ms",
            "median ÷ smallest",
            "reads",
        ],
        rows,
    )
    return (
        f"### list_events page latency (limit={result['page']}, after the middle event, asc)"
        f"\n\n{machine_line(result)}\n\n{text}\n\n" + "\n".join(verdicts)
    )


SECTIONS = (
    ("tool_call_runs.json", tool_call_runs),
    ("conversation.json", conversation),
    ("postgres_workers.json", postgres_workers),
    ("event_paging.json", event_paging),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    arguments = parser.parse_args(argv)
    printed = 0
    for name, section in SECTIONS:
        path = arguments.results / name
        if not path.is_file():
            print(f"({name} missing: that part did not run or failed)\n")
            continue
        print(section(json.loads(path.read_text("utf-8"))) + "\n")
        printed += 1
    if not printed:
        print(f"No results in {arguments.results}; run `nox -s bench_durable`.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
