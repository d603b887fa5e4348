"""Print the workflow benchmark's tables (Markdown) from ``workflows.json``.

One table per store: each side's workflows/s, the time to resume a workflow paused at step 4,
and the commits one workflow costs; then fevex against the best peer on each figure. A side
that was skipped or failed is shown with its reason. Standard library only.

Usage: ``python -m benchmarks.workflows.report [--results FILE]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

DEFAULT_RESULTS = (
    Path(__file__).resolve().parents[2] / ".nox" / "bench-results" / "workflows" / "workflows.json"
)
STORES = ("sqlite", "postgres")
FEVEX = "fevex/default"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def _number(value: Any, digits: int = 0) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def store_table(result: dict[str, Any], store: str) -> str:
    rows = []
    notes = []
    for data in result["sides"].values():
        figures = data["stores"].get(store)
        if figures is None:
            continue
        label = f"{data['side']} ({data['variant']})"
        if "skipped" in figures or "error" in figures:
            reason = (
                figures.get("skipped") or "failed: " + figures["error"].strip().splitlines()[-1]
            )
            notes.append(f"- {label}: {reason}")
            continue
        rate = figures.get("workflows_per_second", {})
        resume = figures.get("resume", {})
        commits = figures.get("commits", {})
        rows.append(
            [
                label,
                _number(rate.get("median")),
                _number(1e3 / rate["median"], 2) if rate.get("median") else "",
                _number(resume.get("median"), 1),
                _number(resume.get("p95"), 1),
                _number(commits.get("write_transactions"), 1),
                _number(commits.get("transactions"), 1)
                if store == "postgres"
                else _number(commits.get("statements"), 0),
                _number(commits.get("wal_bytes")) if store == "postgres" else "",
            ]
        )
    last = "WAL bytes/wf" if store == "postgres" else ""
    second = "transactions/wf (incl. read-only)" if store == "postgres" else "SQL statements/wf"
    header = [
        "side",
        "workflows/s",
        "ms/workflow",
        "resume ms (median)",
        "resume ms (p95)",
        "write commits/wf",
        second,
    ]
    if last:
        header.append(last)
    else:
        rows = [row[:-1] for row in rows]
    text = f"### {store}\n\n" + table(header, rows)
    if notes:
        text += "\n\n" + "\n".join(notes)
    return text + "\n\n" + ratios(result, store)


def ratios(result: dict[str, Any], store: str) -> str:
    """fevex against the best peer: workflows/s (higher is better), resume time and write
    commits (lower is better)."""
    sides = result["sides"]
    fevex = sides.get(FEVEX, {}).get("stores", {}).get(store, {})
    if "skipped" in fevex:
        return f"{fevex['skipped']}: no ratios."
    if "workflows_per_second" not in fevex:
        return "fevex has no figures on this store: no ratios."
    peers = {
        name: data["stores"][store]
        for name, data in sides.items()
        if name != FEVEX and "workflows_per_second" in data["stores"].get(store, {})
    }
    if not peers:
        return "No peer has figures on this store."
    lines = []
    best_name, best = max(peers.items(), key=lambda item: item[1]["workflows_per_second"]["median"])
    ratio = fevex["workflows_per_second"]["median"] / best["workflows_per_second"]["median"]
    verdict = "met" if ratio >= 1 else "missed"
    lines.append(
        f"- workflows/s: fevex ÷ fastest peer ({best_name}) = **{ratio:.2f}x** "
        f"(goal ≥ 1.00x: {verdict})"
    )
    resumes = {n: p["resume"]["median"] for n, p in peers.items() if "resume" in p}
    if resumes and "resume" in fevex:
        name = min(resumes, key=lambda n: resumes[n])
        lines.append(
            f"- resume at step 4: fevex ÷ fastest peer ({name}) = "
            f"**{fevex['resume']['median'] / resumes[name]:.2f}x** the time"
        )
    commits = {
        n: p["commits"]["write_transactions"]
        for n, p in peers.items()
        if "write_transactions" in p.get("commits", {})
    }
    if commits and "write_transactions" in fevex.get("commits", {}):
        name = min(commits, key=lambda n: commits[n])
        lines.append(
            f"- write commits per workflow: fevex {fevex['commits']['write_transactions']:.1f}, "
            f"fewest among peers {commits[name]:.1f} ({name})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    arguments = parser.parse_args(argv)
    if not arguments.results.is_file():
        print(f"No results at {arguments.results}; run `nox -s bench_workflows`.", file=sys.stderr)
        return 1
    result = json.loads(arguments.results.read_text("utf-8"))
    machine = result["machine"]
    versions = "; ".join(
        f"{name}: " + ", ".join(f"{package} {version}" for package, version in data.items())
        for name, data in {
            data["side"]: data.get("versions", {}) for data in result["sides"].values()
        }.items()
    )
    settings = result.get("postgres_settings")
    postgres = (
        f"; PostgreSQL {settings['server_version'].split()[0]} (fsync={settings['fsync']}, "
        f"synchronous_commit={settings['synchronous_commit']})"
        if settings
        else ""
    )
    print(
        f"## Five-step workflow\n\n_{machine['date']}, Python {machine['python']}, "
        f"SQLite {machine['sqlite']}, {machine['cpus']} CPUs{postgres}; "
        f"median of {result['rounds']} alternating rounds; resume: "
        f"{result['resumes_per_round']} per round_\n\n_{versions}_\n"
    )
    for store in STORES:
        if any(store in data["stores"] for data in result["sides"].values()):
            print(store_table(result, store) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
