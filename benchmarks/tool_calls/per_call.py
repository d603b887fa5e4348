"""Instructions per tool call at 1, 10, 100 and 300 calls a run, in both shapes (one call
per model step, all calls in one step), fevex and Agno side by side in the same run.

For each framework whose environment exists, each entry point (``run`` / ``run_sync`` and
``arun`` / ``run_agent``), each shape and each size ``n``, the scenario runs under
``valgrind --tool=callgrind`` twice in a fresh interpreter: ``WARMUP`` runs of ``n`` calls
alone, then the same runs and ``repeats`` more. The difference divided by ``repeats * n`` is
what one tool call costs a run of ``n`` calls, the run's own start and answer shared among
its calls. Flat means the figure at 300 calls stays within 1.2x of the one at 10.

The environments are ``bench_env``'s (``.nox/bench_env-framework-<name>``; ``nox -s
bench_tool_calls`` builds them), or ``--python name=PATH``.

``--smoke`` is the suite's run: sizes 1 and 3, in this interpreter, timed with the process
clock (no valgrind); Agno's side only where Agno is installed. Any run that goes wrong (a
wrong answer, a tool call missing) fails it.

Run with ``python -m benchmarks.tool_calls.per_call [--smoke] [--frameworks fevex,agno]
[--modes sync,async] [--sizes 1,10,100,300] [--out FILE]`` from the repository root.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.tool_calls import scenario

ROOT = Path(__file__).resolve().parent.parent.parent
FRAMEWORKS = ("fevex", "agno")
MODES = ("sync", "async")
WARMUP = 1
# Tool calls measured per figure (beyond the warm-up): repeats = CALLS_MEASURED // n.
CALLS_MEASURED = 300
_COLLECTED = re.compile(r"Collected : (\d+)")
_SCENARIO = """
import asyncio, importlib, sys
side = importlib.import_module(sys.argv[1])
mode, shape, calls, runs = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
if mode == "sync":
    for _ in range(runs):
        side.run_sync(shape, calls)
else:
    async def main():
        for _ in range(runs):
            await side.run_async(shape, calls)
    asyncio.run(main())
"""


def _module(framework: str) -> str:
    return f"benchmarks.tool_calls.with_{framework}"


def _count(python: Path, framework: str, mode: str, shape: str, calls: int, runs: int) -> int:
    arguments = (_module(framework), mode, shape, str(calls), str(runs))
    completed = subprocess.run(
        [
            *("valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"),
            *(str(python), "-c", _SCENARIO, *arguments),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "AGNO_TELEMETRY": "false"},
        check=False,
    )
    found = _COLLECTED.search(completed.stderr)
    if completed.returncode != 0 or found is None:
        raise RuntimeError(f"{framework} {mode} {shape} {calls}: {completed.stderr[-2000:]}")
    return int(found.group(1))


def instructions_per_call(python: Path, framework: str, mode: str, shape: str, n: int) -> int:
    repeats = max(1, CALLS_MEASURED // n)
    base = _count(python, framework, mode, shape, n, WARMUP)
    total = _count(python, framework, mode, shape, n, WARMUP + repeats)
    return (total - base) // (repeats * n)


def _time_per_call(framework: str, mode: str, shape: str, n: int) -> float:
    """Microseconds of process time per tool call, in this interpreter (the smoke run)."""
    side = importlib.import_module(_module(framework))
    if mode == "sync":
        side.run_sync(shape, n)
        start = time.process_time()
        side.run_sync(shape, n)
    else:
        asyncio.run(side.run_async(shape, n))

        async def timed() -> None:
            await side.run_async(shape, n)

        start = time.process_time()
        asyncio.run(timed())
    return (time.process_time() - start) / n * 1e6


def _available(framework: str) -> bool:
    name = "fevex" if framework == "fevex" else "agno.agent"
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def table(figures: dict[str, Any], unit: str) -> str:
    rows = ["| mode | shape | calls | " + " | ".join(figures["frameworks"]) + " | fevex / agno |"]
    rows.append("|" + "---|" * (4 + len(figures["frameworks"])))
    by_key: dict[tuple[str, str, int], dict[str, float]] = {}
    for row in figures["rows"]:
        key = (row["mode"], row["shape"], row["calls"])
        by_key.setdefault(key, {})[row["framework"]] = row[unit]
    for (mode, shape, calls), values in by_key.items():
        cells = [f"{values[f]:,.0f}" if f in values else "-" for f in figures["frameworks"]]
        ratio = (
            f"{values['fevex'] / values['agno']:.2f}" if {"fevex", "agno"} <= values.keys() else "-"
        )
        rows.append(f"| {mode} | {shape} | {calls} | {' | '.join(cells)} | {ratio} |")
    return "\n".join(rows)


def flatness(figures: dict[str, Any], unit: str) -> list[str]:
    """Per framework, mode and shape: the figure at the largest size over the one at 10."""
    lines = []
    values = {(r["framework"], r["mode"], r["shape"], r["calls"]): r[unit] for r in figures["rows"]}
    largest = max(r["calls"] for r in figures["rows"])
    for framework, mode, shape, calls in values:
        if calls == largest and (framework, mode, shape, 10) in values:
            ratio = values[(framework, mode, shape, calls)] / values[(framework, mode, shape, 10)]
            lines.append(f"{framework} {mode} {shape}: {calls} calls / 10 calls = {ratio:.2f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--shapes", default=",".join(scenario.SHAPES))
    parser.add_argument("--sizes", default=None)
    parser.add_argument("--python", action="append", default=[], help="name=PATH")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    wanted = args.frameworks.split(",")
    modes, shapes = args.modes.split(","), args.shapes.split(",")
    figures: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_before": _load(),
        "python": platform.python_version(),
        "rows": [],
    }
    if args.smoke:
        unit = "us_per_call"
        frameworks = [f for f in wanted if f == "fevex" or _available(f)]
        for framework in frameworks:
            for mode in modes:
                for shape in shapes:
                    for n in sizes or scenario.SMOKE_SIZES:
                        us = _time_per_call(framework, mode, shape, n)
                        row = {"framework": framework, "mode": mode, "shape": shape}
                        figures["rows"].append({**row, "calls": n, unit: us})
    else:
        unit = "instructions_per_call"
        if shutil.which("valgrind") is None:
            print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
            return 1
        pythons = dict(item.split("=", 1) for item in args.python)
        frameworks = []
        for framework in wanted:
            default = ROOT / ".nox" / f"bench_env-framework-{framework}" / "bin" / "python"
            python = Path(pythons.get(framework, default))
            if not python.exists():
                print(f"{framework}: no environment at {python}; run nox -s bench_tool_calls")
                continue
            frameworks.append((framework, python))
        # Sizes outermost and frameworks innermost: both sides of a ratio are counted
        # next to each other.
        for n in sizes or scenario.SIZES:
            for mode in modes:
                for shape in shapes:
                    for framework, python in frameworks:
                        count = instructions_per_call(python, framework, mode, shape, n)
                        row = {"framework": framework, "mode": mode, "shape": shape}
                        figures["rows"].append({**row, "calls": n, unit: count})
                        print(f"{framework} {mode} {shape} {n}: {count:,}", flush=True)
        frameworks = [name for name, _ in frameworks]
    if not figures["rows"]:
        return 1
    figures["frameworks"] = frameworks
    figures["load_after"] = _load()
    figures["command"] = "python -m benchmarks.tool_calls.per_call " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    print(f"{unit.replace('_', ' ')}; {figures['date']}; load {figures['load_before']}")
    print(table(figures, unit))
    for line in flatness(figures, unit):
        print(line)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
