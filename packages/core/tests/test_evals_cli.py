"""``fevex eval`` as CI runs it: real processes, a deliberate regression that fails the gate
and names its case, the same suite without it passing, and status 2 with one line when the
evaluation cannot run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fevex.evals import load_eval_report, serialize_eval_report

SERVICE = '''
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel

from fevex import WorkflowStep, create_fevex, define_agent, define_tool, define_workflow
from fevex.evals import CaseOutcome, Score, define_scorer
from fevex.models import Completed, ModelInput, ModelResult, OutputDelta, ToolCall, Usage


class Query(BaseModel):
    account_id: int


@define_tool(name="accounts_get", description="Get an account.")
async def accounts_get(query: Query) -> dict:
    return {"id": query.account_id, "status": "active"}


class Scripted:
    """Looks the account up, then answers; ``broken`` is the question it answers wrong."""

    def __init__(self, broken: str | None = None) -> None:
        self.broken = broken

    async def stream(self, input: ModelInput) -> AsyncIterator[Any]:
        question = next(m.text for m in input.messages if m.role == "user")
        if input.messages[-1].role != "tool":
            call = ToolCall("call-1", "accounts_get", {"account_id": 42})
            yield Completed(ModelResult(tool_calls=(call,), usage=Usage(8, 2)))
            return
        answer = "I do not know." if question == self.broken else "Account 42 is active."
        yield OutputDelta(answer)
        yield Completed(ModelResult(output=answer, usage=Usage(10, 5)))


@define_workflow(name="triage", version="1")
async def triage(step: WorkflowStep, question: str) -> str:
    return (await step.agent("ask", "support", input=question)).output


def build(broken: str | None = None):
    support = define_agent(name="support", instructions="Answer.", tools=["accounts_get"])
    return create_fevex(
        models={"default": Scripted(broken)},
        agents=[support],
        tools=[accounts_get],
        workflows=[triage],
    )


app = build()
regressed_app = lambda: build(broken="Who owns 42?")


@define_scorer(name="short")
def short(outcome: CaseOutcome) -> Score:
    fits = len(str(outcome.output)) <= 15
    return Score(1.0 if fits else 0.0, fits, "at most 15 characters")


scorers = [short]
'''

CASES = [
    {
        "id": "active",
        "input": "Is 42 active?",
        "expected": {"output": "Account 42 is active.", "tools": ["accounts_get"]},
    },
    {
        "id": "owner",
        "input": "Who owns 42?",
        "expected": {"output": "Account 42 is active.", "forbidden_tools": ["accounts_close"]},
    },
]


def environment() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("FEVEX_")}
    return {**env, "FEVEX_DISABLE_PLUGIN_AUTOLOAD": "1"}


def fevex(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fevex.cli", *arguments],
        cwd=cwd,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "service.py").write_text(SERVICE)
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CASES))
    return tmp_path


def test_a_deliberate_regression_fails_the_gate_and_names_the_case(project: Path) -> None:
    agent = ["--dataset", "cases.jsonl", "--agent", "support"]
    first = fevex("eval", "--app", "service:app", *agent, "--out", "baseline.json", cwd=project)
    assert first.returncode == 0, first.stderr
    assert "2 cases, 2 passed, 0 failed, 0 errors" in first.stdout
    # The baseline is canonical: what serialize_eval_report writes for what it holds.
    baseline_text = (project / "baseline.json").read_text()
    assert baseline_text == serialize_eval_report(load_eval_report(project / "baseline.json"))

    regressed = fevex(
        "eval", "--app", "service:regressed_app", *agent, "--baseline", "baseline.json",
        cwd=project,
    )  # fmt: skip
    assert regressed.returncode == 1, regressed.stderr
    assert "1 regression against the baseline:" in regressed.stdout
    assert (
        "case 'owner', scorer 'exact_output': passed in the baseline, fails now "
        '(expected "Account 42 is active.", got "I do not know.")'
    ) in regressed.stdout
    assert "case 'active'" not in regressed.stdout
    assert "Traceback" not in regressed.stderr

    unchanged = fevex(
        "eval", "--app", "service:app", *agent, "--baseline", "baseline.json", cwd=project
    )
    assert unchanged.returncode == 0, unchanged.stdout + unchanged.stderr
    assert "no regressions against the baseline" in unchanged.stdout


def test_progress_is_plain_lines_off_a_terminal_and_the_table_goes_to_stdout(
    project: Path,
) -> None:
    done = fevex("eval", "--app", "service:app", "--dataset", "cases.jsonl", "--agent",
                 "support", cwd=project)  # fmt: skip
    assert done.returncode == 0
    lines = done.stderr.splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        "[1/2] active: passed",
        "[2/2] owner: passed",
    ]
    assert "\r" not in done.stderr
    assert "\x1b" not in done.stderr
    header = done.stdout.splitlines()[0].split()
    assert header == ["case", "status", "exact_output", "forbidden_tools", "tool_selection",
                      "ms", "tokens"]  # fmt: skip


def test_progress_is_a_bar_redrawn_in_place_on_a_terminal(project: Path) -> None:
    controller, terminal = os.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "fevex.cli", "eval", "--app", "service:app",
         "--dataset", "cases.jsonl", "--agent", "support"],
        cwd=project, env=environment(), stdout=subprocess.PIPE, stderr=terminal,
    )  # fmt: skip
    os.close(terminal)
    drawn = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # the terminal's last writer closed it
            break
        if not chunk:
            break
        drawn += chunk
    os.close(controller)
    assert process.wait(timeout=120) == 0
    assert process.stdout is not None
    process.stdout.close()
    text = drawn.decode()
    assert "\r[------------------------] 0/2 \x1b[K" in text
    assert "\r[############------------] 1/2 active passed\x1b[K" in text
    assert "\r[########################] 2/2 owner passed\x1b[K" in text


def test_a_workflow_with_concurrency_scorers_and_strict(project: Path) -> None:
    common = ["--app", "service:app", "--dataset", "cases.jsonl", "--workflow", "triage"]
    done = fevex("eval", *common, "--concurrency", "2", "--scorers", "service:scorers",
                 "--out", "report.json", "--html", "report.html", "--suite", "nightly",
                 "--target-version", "v7", cwd=project)  # fmt: skip
    # "short" fails every case, but without a baseline nothing regressed.
    assert done.returncode == 0, done.stderr
    report = load_eval_report(project / "report.json")
    assert (report.suite_name, report.target_kind, report.target_name) == (
        "nightly",
        "workflow",
        "triage",
    )
    assert report.target_version == "v7"
    assert [sorted(case.scores) for case in report.cases] == [["short"], ["short"]]
    assert [case.tool_calls for case in report.cases] == [("accounts_get",)] * 2
    assert "nightly" in (project / "report.html").read_text()

    strict = fevex("eval", *common, "--scorers", "service:scorers", "--strict", cwd=project)
    assert strict.returncode == 1
    assert "2 cases, 0 passed, 2 failed, 0 errors" in strict.stdout


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--dataset", "missing.jsonl"], "EVAL_DATASET_INVALID"),
        (["--dataset", "bad.jsonl"], "bad.jsonl:2: not JSON"),
        (["--baseline", "missing.json"], "EVAL_REPORT_INVALID"),
        (["--baseline", "cases.jsonl"], "EVAL_REPORT_INVALID"),
        (["--agent", "suport"], "AGENT_NOT_FOUND"),
        (["--app", "missing_module:app"], "APP_NOT_FOUND"),
        (["--scorers", "service:nothing"], "--scorers service:nothing: loading it raised"),
        (["--scorers", "service:short"], "is not a list of scorers"),
    ],
)
def test_an_evaluation_that_cannot_run_exits_2_with_one_line(
    project: Path, arguments: list[str], message: str
) -> None:
    (project / "bad.jsonl").write_text('{"id": "a", "input": "x"}\n{"id": \n')
    options = {"--app": "service:app", "--dataset": "cases.jsonl", "--agent": "support"}
    extra: list[str] = []
    for name, value in zip(arguments[::2], arguments[1::2], strict=True):
        if name in options:
            options[name] = value
        else:
            extra += [name, value]
    flat = [part for pair in options.items() for part in pair]
    completed = fevex("eval", *flat, *extra, cwd=project)
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert message in completed.stderr
    assert "Traceback" not in completed.stderr
    assert completed.stderr.startswith("fevex: ")
    assert completed.stderr.count("\n") == 1, completed.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--agent", "support", "--workflow", "triage"], "not allowed with argument"),
        ([], "one of the arguments --agent --workflow is required"),
        (["--agent", "support", "--concurrency", "0"], "--concurrency: must be at least 1"),
        (["--agent", "support", "--tolerance", "1.5"], "--tolerance: must be between 0 and 1"),
        (["--agent", "support", "--timeout", "0"], "--timeout: must be more than 0 seconds"),
    ],
)
def test_bad_arguments_exit_2(project: Path, arguments: list[str], message: str) -> None:
    completed = fevex(
        "eval", "--app", "service:app", "--dataset", "cases.jsonl", *arguments, cwd=project
    )
    assert completed.returncode == 2
    assert message in completed.stderr
    assert "Traceback" not in completed.stderr
