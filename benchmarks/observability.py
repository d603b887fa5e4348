"""What watching a run costs: instructions per run of the overhead benchmark's fevex
scenario, observability off and with an in-memory trace exporter, under callgrind.

The traced scenario is the same app with ``Observability(exporters=[InMemoryTraceExporter()])``:
every event is queued, every span built and exported, in the runs that follow one another
(the background export runs while the next run awaits). Both counts come from one
invocation, so their ratio is what to read.

Run with ``python -m benchmarks.observability [--runs 200]`` in the environment ``nox -s bench``
builds for fevex (``.nox/bench_env-framework-fevex/bin/python``), with valgrind installed.
``--smoke`` runs both scenarios without callgrind and counts an empty interpreter, in seconds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from benchmarks import measure
from benchmarks.frameworks import with_fevex
from benchmarks.instructions import WARMUP, count, empty_interpreter, smoke
from fevex import Fevex, create_fevex
from fevex.observability import InMemoryTraceExporter, Observability

SCENARIOS = ("benchmarks.frameworks.with_fevex", "benchmarks.observability")
exporter = InMemoryTraceExporter()
app: Fevex = create_fevex(
    models={"default": with_fevex.AccountsModel()},
    agents=[with_fevex.define_support_agent(0)],
    tools=[with_fevex.get_account],
    observability=Observability(exporters=[exporter]),
)


def run_sync() -> object:
    return app.run_agent_sync("support-0", input=measure.QUESTION).output


async def run_async() -> object:
    return (await app.run_agent("support-0", input=measure.QUESTION)).output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--smoke", action="store_true", help="no counts: does it still work")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None and not args.smoke:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 1
    python = Path(sys.executable)
    if args.smoke:
        for module in SCENARIOS:
            smoke(python, module)
        print(f"both scenarios run; {empty_interpreter(python)}")
        return 0
    # One hash seed for every count: string hashing moves the figures by a percent or two.
    os.environ.setdefault("PYTHONHASHSEED", "0")
    print("| mode | observability off | in-memory exporter | ratio |")
    print("|---|---|---|---|")
    for mode in ("sync", "async"):
        figures = []
        for module in SCENARIOS:
            base = count(python, module, mode, WARMUP)
            figures.append((count(python, module, mode, WARMUP + args.runs) - base) // args.runs)
        off, on = figures
        print(f"| {mode} | {off:,} | {on:,} | {on / off:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
