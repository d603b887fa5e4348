"""Instructions per run, counted by callgrind: the repeatable tie-breaker of the overhead
benchmark on a machine whose speed drifts.

For each framework whose ``bench_env`` environment exists, and for its blocking and its
async entry point, the scenario runs under ``valgrind --tool=callgrind`` twice in a fresh
interpreter: 20 warm-up runs alone, then the same 20 runs plus ``--runs`` more. The
difference divided by ``--runs`` is what one run costs, without the interpreter's start,
the imports and the warm-up. Counts are of instructions, not time: they do not move with
the machine's load. With fevex's environment it also counts ``import fevex`` against
``import pydantic, pluggy; from pydantic import BaseModel`` (:data:`IMPORTS`; bytecode
written first, an empty interpreter's count taken off both).

Run with ``python -m benchmarks.instructions [--frameworks fevex,agno] [--runs 200]`` after
``nox -s bench`` (or ``nox -s bench_instructions``, which does both). ``--smoke`` shows the
script still works in seconds (a callgrind count of an interpreter that imports fevex takes a
minute): each scenario runs 2 runs per entry point without callgrind, for fevex always and for a
peer only where it is installed (in this interpreter when ``nox -s bench`` built no
environment), and callgrind (where installed) counts an empty interpreter through the same
parsing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WARMUP = 20
# What importing fevex is set against: what every fevex user imports anyway.
IMPORTS = {
    "fevex": "import fevex",
    "pydantic + pluggy": "import pydantic, pluggy; from pydantic import BaseModel",
}
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
    return callgrind(python, "-c", _SCENARIO, module, mode, str(runs))


def callgrind(python: Path, *arguments: str) -> int:
    """The instructions ``python *arguments`` executes, counted by callgrind."""
    completed = subprocess.run(
        [
            *("valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"),
            *(str(python), *arguments),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment(),
        check=True,
    )
    found = _COLLECTED.search(completed.stderr)
    if found is None:
        raise RuntimeError(f"callgrind reported no count for {arguments}")
    return int(found.group(1))


def per_run(python: Path, framework: str, mode: str, runs: int) -> int:
    module = scenario_module(framework)
    # Bytecode first: a module compiled by the first count only would make it the dearer.
    subprocess.run(
        [str(python), "-c", _SCENARIO, module, mode, "1"], cwd=ROOT, env=environment(), check=True
    )
    base = count(python, module, mode, WARMUP)
    return (count(python, module, mode, WARMUP + runs) - base) // runs


def scenario_module(framework: str) -> str:
    return "benchmarks.frameworks.with_" + framework.replace("-", "_")


def empty_interpreter(python: Path) -> str:
    """What callgrind counts for an interpreter that does nothing, said in words."""
    if shutil.which("valgrind") is None:
        return "valgrind is not installed, so nothing was counted"
    return f"an empty interpreter is {callgrind(python, '-c', 'pass'):,} instructions"


def import_counts(python: Path) -> dict[str, int]:
    """The instructions of each of :data:`IMPORTS` in a fresh interpreter, beyond an empty
    one's, with the modules' bytecode written beforehand (as an installed package has it)."""
    for code in IMPORTS.values():
        subprocess.run([str(python), "-c", code], cwd=ROOT, env=environment(), check=True)
    empty = callgrind(python, "-c", "pass")
    return {name: callgrind(python, "-c", code) - empty for name, code in IMPORTS.items()}


def environment() -> dict[str, str]:
    """The environment of a counted interpreter: this repository on its path, and bytecode
    written (PYTHONDONTWRITEBYTECODE would make every import compile its source again)."""
    variables = {**os.environ, "PYTHONPATH": str(ROOT)}
    variables.pop("PYTHONDONTWRITEBYTECODE", None)
    return variables


def smoke(python: Path, module: str) -> None:
    """Two runs of the scenario ``module`` per entry point, without callgrind; raises if
    they fail."""
    for mode in ("sync", "async"):
        subprocess.run(
            [str(python), "-c", _SCENARIO, module, mode, "2"],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=True,
        )


def _interpreter(framework: str, smoke: bool) -> Path | None:
    """The framework's bench_env interpreter; in smoke mode this one, if it has the framework
    (fevex always: its side must never be left out silently)."""
    python = ROOT / ".nox" / f"bench_env-framework-{framework}" / "bin" / "python"
    if python.exists():
        return python
    distribution = {"openai-agents": "agents", "pydantic-ai": "pydantic_ai"}.get(framework)
    module = distribution or framework.replace("-", "_")
    if smoke and (framework == "fevex" or importlib.util.find_spec(module) is not None):
        return Path(sys.executable)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default="fevex,agno")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--smoke", action="store_true", help="1 run: does it still work")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None and not args.smoke:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 1
    counts: dict[str, dict[str, int]] = {}
    for framework in args.frameworks.split(","):
        python = _interpreter(framework, args.smoke)
        if python is None:
            print(f"{framework}: no bench_env environment; run nox -s bench first")
        elif args.smoke:
            smoke(python, scenario_module(framework))
            print(f"{framework}: the scenario runs; {empty_interpreter(python)}")
            if framework == "fevex":
                for code in IMPORTS.values():
                    subprocess.run([str(python), "-c", code], cwd=ROOT, check=True)
        else:
            counts[framework] = {
                mode: per_run(python, framework, mode, args.runs) for mode in ("sync", "async")
            }
    if args.smoke:
        return 0 if _interpreter("fevex", smoke=True) is not None else 1
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
    fevex_python = _interpreter("fevex", smoke=False)
    if "fevex" in counts and fevex_python is not None:
        imports = import_counts(fevex_python)
        counts["imports"] = imports
        fevex, anchor = imports["fevex"], imports["pydantic + pluggy"]
        print(f"import fevex: {fevex:,}; {IMPORTS['pydantic + pluggy']}: {anchor:,}", end="")
        print(f"; ratio {fevex / anchor:.2f}")
    if args.out is not None:
        args.out.write_text(json.dumps(counts, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
