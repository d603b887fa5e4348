"""nox sessions for the side-by-side overhead benchmark; the root noxfile imports this module.

``nox -s bench`` queues one ``bench_env`` session per framework, each in its own Python 3.11
environment with its pinned requirements, then ``bench_report``, which prints the table.
A framework whose session fails is left out of the table; the others still report.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nox

from benchmarks import overhead
from benchmarks.measure import OFFLINE_ENVIRONMENT

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "benchmarks" / "requirements"
RESULTS = ROOT / ".nox" / "bench-results"
FRAMEWORKS = ("fevex", "agno", "langgraph", "openai-agents", "pydantic-ai")


@nox.session(venv_backend="none", default=False)
def bench(session: nox.Session) -> None:
    """Benchmark fevex and every peer, each in its own environment, then print the table."""
    shutil.rmtree(RESULTS, ignore_errors=True)
    for framework in FRAMEWORKS:
        session.notify(f"bench_env(framework='{framework}')")
    session.notify("bench_report")


@nox.session(python="3.11", default=False)
@nox.parametrize("framework", FRAMEWORKS)
def bench_env(session: nox.Session, framework: str) -> None:
    """Run one framework's scenario and write its figures to .nox/bench-results/."""
    session.chdir(ROOT)
    editable = ["-e", str(ROOT / "packages" / "core")] if framework == "fevex" else []
    session.install("-r", str(REQUIREMENTS / f"{framework}.txt"), *editable)
    module = "benchmarks.frameworks.with_" + framework.replace("-", "_")
    out = RESULTS / f"{framework}.json"
    session.run("python", "-m", module, "--out", str(out), env=OFFLINE_ENVIRONMENT)


@nox.session(venv_backend="none", default=False)
def bench_report(session: nox.Session) -> None:
    """Print the table from whatever results .nox/bench-results/ holds."""
    if overhead.main(["--results", str(RESULTS)]) != 0:
        session.error(f"No benchmark results in {RESULTS}")
