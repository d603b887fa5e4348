"""Collect the per-framework JSON results and print the side-by-side overhead table.

Each framework script (``benchmarks/frameworks/with_*.py``) runs in its own environment and
writes one JSON file; this driver reads them all, prints one row per framework, then sets
fevex against the best peer on each figure, as measured in the same run.

Usage: ``python benchmarks/overhead.py [--results DIR]`` (default ``.nox/bench-results``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BASELINE = "fevex"
DEFAULT_RESULTS = Path(__file__).resolve().parent.parent / ".nox" / "bench-results"


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    higher_is_better: bool
    show: Callable[[float], str]


FIGURES = (
    Figure("sync_us_per_run", "µs/run sync", False, "{:,.1f}".format),
    Figure("async_us_per_run", "µs/run async", False, "{:,.1f}".format),
    Figure("sync_runs_per_second", "runs/s sync", True, "{:,.0f}".format),
    Figure("async_runs_per_second", "runs/s async", True, "{:,.0f}".format),
    Figure("construction_us_per_agent", "construction µs/agent", False, "{:,.2f}".format),
    Figure("memory_bytes_per_agent", "bytes/agent", False, "{:,.0f}".format),
    Figure("import_ms", "import ms", False, "{:,.1f}".format),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    arguments = parser.parse_args(argv)

    results = load_results(arguments.results)
    if not results:
        print(f"No results in {arguments.results}; run `nox -s bench` first.", file=sys.stderr)
        return 1
    print(results_table(results))
    baseline = next((result for result in results if result["framework"] == BASELINE), None)
    peers = [result for result in results if result["framework"] != BASELINE]
    print()
    if baseline is None or not peers:
        print(f"Ratios need both {BASELINE} and at least one peer in {arguments.results}.")
    else:
        print(ratio_table(baseline, peers))
    return 0


def load_results(directory: Path) -> list[dict[str, Any]]:
    results = [json.loads(path.read_text("utf-8")) for path in sorted(directory.glob("*.json"))]
    return sorted(
        results, key=lambda result: (result["framework"] != BASELINE, result["framework"])
    )


def results_table(results: list[dict[str, Any]]) -> str:
    header = ["framework", "version", *(figure.label for figure in FIGURES), "tools"]
    rows = [
        [
            result["framework"],
            result["version"],
            *(figure.show(result[figure.key]) for figure in FIGURES),
            result["tool_kind"],
        ]
        for result in results
    ]
    return _markdown(header, rows)


def ratio_table(baseline: dict[str, Any], peers: list[dict[str, Any]]) -> str:
    """fevex against the best peer on each figure, as a plain ratio and as an advantage."""
    header = ["figure", BASELINE, "best peer", f"{BASELINE} / best peer", f"{BASELINE} is"]
    rows = []
    for figure in FIGURES:
        pick = max if figure.higher_is_better else min
        best = pick(peers, key=lambda peer: peer[figure.key])
        ours, theirs = baseline[figure.key], best[figure.key]
        ratio = ours / theirs
        advantage = ratio if figure.higher_is_better else 1 / ratio
        verdict = f"{advantage:.2f}x better" if advantage >= 1 else f"{1 / advantage:.2f}x worse"
        rows.append(
            [
                figure.label,
                figure.show(ours),
                f"{figure.show(theirs)} ({best['framework']})",
                f"{ratio:.3f}",
                verdict,
            ]
        )
    return _markdown(header, rows)


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(line[column]) for line in [header, *rows]) for column in range(len(header))]

    def line(cells: list[str]) -> str:
        padded = (cell.ljust(width) for cell, width in zip(cells, widths, strict=True))
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join("-" * (width + 2) for width in widths) + "|"
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


if __name__ == "__main__":
    sys.exit(main())
