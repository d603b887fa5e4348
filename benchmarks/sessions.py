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
    # From this checkout, as packages/core/pyproject.toml says, not the workspace's sources
    # (uv refuses the core's extras on workspace members it is not told about).
    session.install(
        "-r", str(REQUIREMENTS / f"{framework}.txt"), *editable, env={"UV_NO_SOURCES": "1"}
    )
    module = "benchmarks.frameworks.with_" + framework.replace("-", "_")
    out = RESULTS / f"{framework}.json"
    session.run("python", "-m", module, "--out", str(out), env=OFFLINE_ENVIRONMENT)


@nox.session(venv_backend="none", default=False)
def bench_report(session: nox.Session) -> None:
    """Print the table from whatever results .nox/bench-results/ holds."""
    if overhead.main(["--results", str(RESULTS)]) != 0:
        session.error(f"No benchmark results in {RESULTS}")


@nox.session(venv_backend="none", default=False)
def bench_instructions(session: nox.Session) -> None:
    """Instructions per run of fevex and Agno under callgrind (needs valgrind and the
    environments ``bench`` builds)."""
    from benchmarks import instructions

    arguments = ["--out", str(RESULTS / "instructions.json"), *session.posargs]
    if instructions.main(arguments) != 0:
        session.error("No instruction counts: run nox -s bench first, with valgrind installed.")


@nox.session(venv_backend="none", default=False)
def bench_tool_calls(session: nox.Session) -> None:
    """Instructions per tool call at 1 to 300 calls a run, both shapes, fevex and Agno under
    callgrind (needs valgrind; builds fevex's and Agno's ``bench_env`` environments first)."""
    from benchmarks.tool_calls import per_call

    for framework in ("fevex", "agno"):
        session.run(
            "nox", "--install-only", "-s", f"bench_env(framework='{framework}')", external=True
        )
    arguments = ["--out", str(RESULTS / "tool_calls.json"), *session.posargs]
    if per_call.main(arguments) != 0:
        session.error("No counts: is valgrind installed?")


# -- the durable benchmark: run stores, LangGraph's SQLite checkpointer, pgbench ----------

DURABLE_RESULTS = RESULTS / "durable"
DURABLE_SIDES = ("langgraph", "fevex")


@nox.session(venv_backend="none", default=False)
def bench_durable(session: nox.Session) -> None:
    """Benchmark the durable stores and LangGraph's SQLite checkpointer, then print the tables."""
    shutil.rmtree(DURABLE_RESULTS, ignore_errors=True)
    for side in DURABLE_SIDES:
        session.notify(f"bench_durable_env(side='{side}')")
    session.notify("bench_durable_conversation")
    session.notify("bench_durable_report")


@nox.session(python="3.11", default=False)
@nox.parametrize("side", DURABLE_SIDES)
def bench_durable_env(session: nox.Session, side: str) -> None:
    """Install one side's environment; fevex's also measures what needs no peer."""
    session.chdir(ROOT)
    if side == "langgraph":
        session.install("-r", str(REQUIREMENTS / "langgraph-sqlite.txt"))
    else:
        packages = [
            ("-e", str(ROOT / "packages" / name)) for name in ("core", "sqlite", "postgres")
        ]
        requirements = ROOT / "benchmarks" / "durable" / "requirements-fevex.txt"
        session.install("-r", str(requirements), *(part for pair in packages for part in pair))
    # The conversation rounds alternate between the two environments' interpreters.
    python = session.run("python", "-c", "import sys; print(sys.executable)", silent=True)
    DURABLE_RESULTS.mkdir(parents=True, exist_ok=True)
    (DURABLE_RESULTS / f"{side}-python.txt").write_text(str(python).strip(), encoding="utf-8")
    if side == "fevex":
        module = "benchmarks.durable.fevex_side"
        out = str(DURABLE_RESULTS)
        session.run("python", "-m", module, "--out", out, env=OFFLINE_ENVIRONMENT)


@nox.session(venv_backend="none", default=False)
def bench_durable_conversation(session: nox.Session) -> None:
    """The 25-turn conversation, in rounds alternating between the two environments."""
    from benchmarks.durable import conversation_rounds

    pythons = {side: DURABLE_RESULTS / f"{side}-python.txt" for side in DURABLE_SIDES}
    missing = [side for side, path in pythons.items() if not path.is_file()]
    if "fevex" in missing:
        session.error("Run bench_durable_env(side='fevex') first.")
    arguments = ["--fevex-python", pythons["fevex"].read_text("utf-8")]
    if "langgraph" not in missing:
        arguments += ["--langgraph-python", pythons["langgraph"].read_text("utf-8")]
    conversation_rounds.main([*arguments, "--out", str(DURABLE_RESULTS / "conversation.json")])


@nox.session(venv_backend="none", default=False)
def bench_durable_report(session: nox.Session) -> None:
    """Print the durable tables from whatever .nox/bench-results/durable/ holds."""
    from benchmarks.durable import report

    if report.main(["--results", str(DURABLE_RESULTS)]) != 0:
        session.error(f"No durable benchmark results in {DURABLE_RESULTS}")


# -- the workflow benchmark: fevex, DBOS Transact, LangGraph's functional API -------------

WORKFLOW_RESULTS = RESULTS / "workflows"
WORKFLOW_REQUIREMENTS = {
    "fevex": "fevex-workflows.txt",
    "dbos": "dbos.txt",
    "langgraph": "langgraph-workflows.txt",
}


@nox.session(venv_backend="none", default=False)
def bench_workflows(session: nox.Session) -> None:
    """Five-step workflows: fevex, DBOS and LangGraph on SQLite and PostgreSQL, side by side.

    See benchmarks/workflows/README.md."""
    shutil.rmtree(WORKFLOW_RESULTS, ignore_errors=True)
    for side in WORKFLOW_REQUIREMENTS:
        session.notify(f"bench_workflows_env(side='{side}')")
    session.notify("bench_workflows_rounds")
    session.notify("bench_workflows_report")


@nox.session(python="3.11", default=False)
@nox.parametrize("side", list(WORKFLOW_REQUIREMENTS))
def bench_workflows_env(session: nox.Session, side: str) -> None:
    """Install one side's environment and note its interpreter for the rounds."""
    session.chdir(ROOT)
    editable: list[str] = []
    if side == "fevex":
        for name in ("core", "sqlite", "postgres"):
            editable += ["-e", str(ROOT / "packages" / name)]
    session.install("-r", str(REQUIREMENTS / WORKFLOW_REQUIREMENTS[side]), *editable)
    python = session.run("python", "-c", "import sys; print(sys.executable)", silent=True)
    WORKFLOW_RESULTS.mkdir(parents=True, exist_ok=True)
    (WORKFLOW_RESULTS / f"{side}-python.txt").write_text(str(python).strip(), encoding="utf-8")


@nox.session(venv_backend="none", default=False)
def bench_workflows_rounds(session: nox.Session) -> None:
    """Every side in alternating rounds, against one throwaway PostgreSQL server.

    The rounds run in fevex's environment, which has fevex-postgres to start the server."""
    pythons = {
        side: (WORKFLOW_RESULTS / f"{side}-python.txt").read_text("utf-8")
        for side in WORKFLOW_REQUIREMENTS
        if (WORKFLOW_RESULTS / f"{side}-python.txt").is_file()
    }
    if "fevex" not in pythons:
        session.error("Run bench_workflows_env(side='fevex') first.")
    arguments = [f"--python={side}={python}" for side, python in pythons.items()]
    out = WORKFLOW_RESULTS / "workflows.json"
    session.run(
        pythons["fevex"], "-m", "benchmarks.workflows.rounds", *arguments, "--out", str(out),
        *session.posargs, external=True, env=OFFLINE_ENVIRONMENT,
    )  # fmt: skip


@nox.session(venv_backend="none", default=False)
def bench_workflows_report(session: nox.Session) -> None:
    """Print the workflow tables from .nox/bench-results/workflows/workflows.json."""
    from benchmarks.workflows import report

    if report.main(["--results", str(WORKFLOW_RESULTS / "workflows.json")]) != 0:
        session.error(f"No workflow benchmark results in {WORKFLOW_RESULTS}")


# -- the HTTP benchmark: fevex's SSE observation beside a minimal sse-starlette endpoint ----


@nox.session(python="3.11", default=False)
def bench_http(session: nox.Session) -> None:
    """SSE events/s of one uvicorn worker against sse-starlette, 100 observers of one run,
    and the server's memory under a slow consumer. See benchmarks/http/README.md."""
    session.chdir(ROOT)
    root = nox.project.load_toml(ROOT / "pyproject.toml")
    editable = [
        part for name in ("core", "sqlite") for part in ("-e", str(ROOT / "packages" / name))
    ]
    session.install(*nox.project.dependency_groups(root, "bench-http"), *editable)
    out = RESULTS / "http.json"
    session.run("python", "-m", "benchmarks.http.run", "--out", str(out), *session.posargs)


# -- the OpenAPI benchmark: GitHub's REST description, one provider at a time --------------


@nox.session(python="3.11", default=False)
def bench_openapi(session: nox.Session) -> None:
    """First-provider, next-provider and full-document times and memory of fevex-openapi on
    GitHub's REST description (npm ``@octokit/openapi``; ``-- --generated`` for a synthetic
    one of the same size). See benchmarks/openapi/README.md."""
    session.chdir(ROOT)
    editable = [
        part for name in ("core", "openapi") for part in ("-e", str(ROOT / "packages" / name))
    ]
    session.install(*editable)
    out = RESULTS / "openapi.json"
    session.run("python", "-m", "benchmarks.openapi.run", "--out", str(out), *session.posargs)


# -- long streams: a million one-character deltas against the same text in 1,000 ----------


@nox.session(python="3.11", default=False)
def bench_streams(session: nox.Session) -> None:
    """Time and peak memory of a run streaming a million one-character deltas against the
    same text in 1,000 deltas, on every run store. See benchmarks/long_streams.py."""
    session.chdir(ROOT)
    editable = [
        part
        for name in ("core", "sqlite", "postgres")
        for part in ("-e", str(ROOT / "packages" / name))
    ]
    session.install(*editable)
    out = RESULTS / "long-streams.json"
    session.run("python", "-m", "benchmarks.long_streams", "--out", str(out), *session.posargs)
