"""Instructions per run, counted by callgrind: the repeatable tie-breaker of the overhead
benchmark on a machine whose speed drifts.

For each framework whose ``bench_env`` environment exists, and for its blocking and its
async entry point, the scenario runs under ``valgrind --tool=callgrind`` twice in a fresh
interpreter: 20 warm-up runs alone, then the same 20 runs plus ``--runs`` more. The
difference divided by ``--runs`` is what one run costs, without the interpreter's start,
the imports and the warm-up. Counts are of instructions, not time: they do not move with
the machine's load.

Run with ``python -m benchmarks.instructions [--frameworks fevex,agno] [--runs 200]`` after
``nox -s bench`` (or ``nox -s bench_instructions``, which does both).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WARMUP = 20
_COLLECTED = re.compile(r"Collected : (\d+)")
_SCENARIO = """
import asyncio, importlib, sys
scenario = importlib.import_module(sys.argv[1])
mode, runs = sys.argv[2], int(sys.argv[3])
if mode == "sync":
    for _ in range(runs):
        scenario.run_sync()
else:
    async def main():
        for _ in range(runs):
            await scenario.run_async()
    asyncio.run(main())
"""


def count(python: Path, module: str, mode: str, runs: int) -> int:
    completed = subprocess.run(
        [
            *("valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"),
            *(str(python), "-c", _SCENARIO, module, mode, str(runs)),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    found = _COLLECTED.search(completed.stderr)
    if found is None:
        raise RuntimeError(f"callgrind reported no count for {module} {mode}")
    return int(found.group(1))


def per_run(python: Path, framework: str, mode: str, runs: int) -> int:
    module = "benchmarks.frameworks.with_" + framework.replace("-", "_")
    base = count(python, module, mode, WARMUP)
    return (count(python, module, mode, WARMUP + runs) - base) // runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default="fevex,agno")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 1
    counts: dict[str, dict[str, int]] = {}
    for framework in args.frameworks.split(","):
        python = ROOT / ".nox" / f"bench_env-framework-{framework}" / "bin" / "python"
        if not python.exists():
            print(f"{framework}: no environment at {python}; run nox -s bench first")
            continue
        counts[framework] = {
            mode: per_run(python, framework, mode, args.runs) for mode in ("sync", "async")
        }
    if not counts:
        return 1
    print("| framework | instructions/run sync | instructions/run async |")
    print("|---|---|---|")
    for framework, figures in counts.items():
        print(f"| {framework} | {figures['sync']:,} | {figures['async']:,} |")
    if "fevex" in counts and "agno" in counts:
        for mode in ("sync", "async"):
            ratio = counts["fevex"][mode] / counts["agno"][mode]
            print(f"fevex / agno, {mode}: {ratio:.3f}")
    if args.out is not None:
        args.out.write_text(json.dumps(counts, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
