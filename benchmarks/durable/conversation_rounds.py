"""fevex against LangGraph's SQLite checkpointer on a 25-turn conversation, in alternating rounds.

Each side runs in its own interpreter and environment (``--fevex-python``,
``--langgraph-python``). On a small shared machine the load changes from one minute to the
next, so instead of measuring one side and then the other, the rounds alternate (fevex,
LangGraph, LangGraph, fevex, ...) and every round writes fresh files in a new directory;
each figure is the median of every conversation timed across the rounds.

Standard library only. Run with ``python -m benchmarks.durable.conversation_rounds
--fevex-python .venv/bin/python --langgraph-python .nox/<env>/bin/python [--out FILE]``
from the repository root. ``--smoke`` runs one round of one conversation per side, LangGraph's
only where it is given or installed here: it shows the benchmark still works.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.durable import conversation, timing
from benchmarks.measure import OFFLINE_ENVIRONMENT

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 4
ROUND_TIMEOUT_SECONDS = 300
MODULES = {
    "fevex": "benchmarks.durable.fevex_conversation",
    "langgraph": "benchmarks.durable.langgraph_conversation",
}


def run_round(python: str, side: str, directory: Path, conversations: int) -> dict[str, Any]:
    completed = subprocess.run(
        [
            python,
            "-m",
            MODULES[side],
            "--directory",
            str(directory),
            "--conversations",
            str(conversations),
        ],
        cwd=ROOT,
        env={**os.environ, **OFFLINE_ENVIRONMENT},
        capture_output=True,
        text=True,
        timeout=ROUND_TIMEOUT_SECONDS,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"the {side} round failed:\n{completed.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def measure(pythons: dict[str, str], rounds: int, conversations: int) -> dict[str, Any]:
    sides: dict[str, dict[str, Any]] = {}
    for number in range(rounds):
        # ABBA order: neither side always runs first after the other.
        order = list(pythons) if number % 2 == 0 else list(reversed(pythons))
        for side in order:
            with tempfile.TemporaryDirectory(prefix=f"fevex-bench-{side}-") as directory:
                print(f"round {number + 1}/{rounds}: {side}", file=sys.stderr, flush=True)
                result = run_round(pythons[side], side, Path(directory), conversations)
            merged = sides.setdefault(side, {"versions": result["versions"], "variants": {}})
            for name, variant in result["variants"].items():
                into = merged["variants"].setdefault(name, {**variant, "ms_per_conversation": []})
                into["ms_per_conversation"].extend(variant["ms_per_conversation"])
    for merged in sides.values():
        for variant in merged["variants"].values():
            variant["ms"] = timing.summary(variant.pop("ms_per_conversation"))
    return {
        "benchmark": "conversation",
        "machine": timing.machine(),
        "turns": conversation.TURNS,
        "rounds": rounds,
        "conversations_per_round": conversations,
        "sides": sides,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fevex-python", default=sys.executable)
    parser.add_argument("--langgraph-python", help="an interpreter with LangGraph installed")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--conversations", type=int, default=conversation.CONVERSATIONS)
    parser.add_argument("--out", type=Path, help="also write the JSON result to this file")
    parser.add_argument("--smoke", action="store_true", help="one short round: does it work")
    arguments = parser.parse_args(argv)
    pythons = {"fevex": arguments.fevex_python}
    if arguments.langgraph_python:
        pythons["langgraph"] = arguments.langgraph_python
    elif arguments.smoke and importlib.util.find_spec("langgraph") is not None:
        pythons["langgraph"] = sys.executable
    rounds, conversations = arguments.rounds, arguments.conversations
    if arguments.smoke:
        rounds, conversations = 1, 1
    result = measure(pythons, rounds, conversations)
    timing.write_result(arguments.out, result)


if __name__ == "__main__":
    main()
