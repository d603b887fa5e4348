"""fevex.evals: running a dataset against an agent or a workflow, the built-in and users'
scorers, canonical reports, comparison with a baseline, and the text reporter."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from fevex import FevexConfigurationError, FevexRunError, create_fevex, define_agent, define_tool
from fevex.evals import (
    CaseOutcome,
    CaseResult,
    EvalCase,
    EvalDataset,
    EvalReport,
    Score,
    compare_evaluation_reports,
    dataset_from_json,
    define_scorer,
    eval_report_from_json,
    exact_output,
    forbidden_tools,
    format_summary,
    json_reporter,
    load_dataset,
    load_eval_report,
    max_cost,
    max_latency,
    max_tokens,
    run_evaluation,
    serialize_eval_report,
    text_reporter,
    tool_selection,
)
from fevex.evals.progress import EvalProgress
from fevex.events import Cost
from fevex.models import Completed, ModelInput, ModelResult, OutputDelta, ToolCall, Usage
from fevex.workflows import WorkflowStep, define_workflow

pytestmark = pytest.mark.anyio


class Query(BaseModel):
    account_id: int


@define_tool(name="accounts_get", description="Get an account.")
async def accounts_get(query: Query) -> dict[str, Any]:
    return {"id": query.account_id, "status": "active"}


@define_tool(name="accounts_close", description="Close an account.")
async def accounts_close(query: Query) -> dict[str, Any]:
    return {"closed": query.account_id}


class Scripted:
    """Answers each model step with ``answer(question, step_input)``; counts the steps in
    flight at once."""

    def __init__(self, answer: Callable[[str, ModelInput], ModelResult]) -> None:
        self.answer = answer
        self.inputs: list[ModelInput] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.gate: asyncio.Event | None = None
        self.gate_at = 0

    async def stream(self, input: ModelInput) -> AsyncIterator[OutputDelta | Completed]:
        self.inputs.append(input)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if self.gate is not None:
                if self.in_flight >= self.gate_at:
                    self.gate.set()
                # A guard against a hang, not a timing: the gate opens as soon as enough
                # steps are in flight together (a timeout fails the case, and the test).
                await asyncio.wait_for(self.gate.wait(), 60)
            for _ in range(3):
                await asyncio.sleep(0)
            result = self.answer(question_of(input), input)
        finally:
            self.in_flight -= 1
        if isinstance(result.output, str) and result.output:
            yield OutputDelta(result.output)
        yield Completed(result)


def question_of(model_input: ModelInput) -> str:
    return next(m.text for m in model_input.messages if m.role == "user")


def looks_up_then_answers(question: str, model_input: ModelInput) -> ModelResult:
    """A tool call on the first step, then an answer that depends on the question."""
    if model_input.messages[-1].role != "tool":
        call = ToolCall("call-1", "accounts_get", {"account_id": 42})
        return ModelResult(tool_calls=(call,), usage=Usage(10, 2))
    if "crash" in question:
        raise RuntimeError("the model fell over")
    return ModelResult(output=f"Answer to {question}", usage=Usage(20, 5))


def support_app(model: Any) -> Any:
    agent = define_agent(
        name="support", instructions="Answer.", tools=["accounts_get", "accounts_close"]
    )
    return create_fevex(
        models={"default": model}, agents=[agent], tools=[accounts_get, accounts_close]
    )


def case(case_id: str, question: str, **expected: Any) -> EvalCase:
    return EvalCase(case_id, question, expected)


DEFAULT_SCORERS = [exact_output(), tool_selection(), forbidden_tools()]


# -- running ----------------------------------------------------------------------------


async def test_cases_run_one_after_another_each_in_a_fresh_session() -> None:
    model = Scripted(looks_up_then_answers)
    app = support_app(model)
    dataset = EvalDataset(
        "support",
        (
            case("first", "Is 42 active?", output="Answer to Is 42 active?"),
            case("second", "Who owns 42?", output="Answer to Who owns 42?"),
        ),
        version="3",
    )
    report = await run_evaluation(
        app, suite_name="support-regression", agent_name="support", dataset=dataset,
        scorers=DEFAULT_SCORERS, target_version="v2",
    )  # fmt: skip

    assert [c.status for c in report.cases] == ["passed", "passed"]
    assert (report.dataset_name, report.dataset_version, report.target_version) == (
        "support",
        "3",
        "v2",
    )
    assert model.most_in_flight == 1
    # The second case's model never sees the first case's conversation.
    second_inputs = [i for i in model.inputs if question_of(i) == "Who owns 42?"]
    assert second_inputs
    assert all("Is 42 active?" not in json.dumps([m.to_json() for m in i.messages])
               for i in second_inputs)  # fmt: skip
    runs = await app.list_runs()
    assert len({run.session_id for run in runs}) == 2


async def test_concurrency_runs_that_many_cases_at_once_and_no_more() -> None:
    model = Scripted(looks_up_then_answers)
    model.gate, model.gate_at = asyncio.Event(), 3
    app = support_app(model)
    cases = [case(f"case-{n}", f"Question {n}?") for n in range(7)]
    report = await run_evaluation(
        app, suite_name="s", agent_name="support", dataset=cases, scorers=[], concurrency=3
    )
    assert model.most_in_flight == 3
    assert {c.status for c in report.cases} == {"passed"}
    # Results keep the dataset's order, whatever order the cases ended in.
    assert [c.case_id for c in report.cases] == [f"case-{n}" for n in range(7)]


async def test_a_case_that_hangs_times_out_and_the_suite_goes_on() -> None:
    never = asyncio.Event()

    def answer(question: str, model_input: ModelInput) -> ModelResult:
        return ModelResult(output="Fine.")

    class Hanging(Scripted):
        async def stream(self, input: ModelInput) -> AsyncIterator[OutputDelta | Completed]:
            if question_of(input) == "hang":
                await never.wait()
            async for event in super().stream(input):
                yield event

    app = support_app(Hanging(answer))
    report = await run_evaluation(
        app, suite_name="s", agent_name="support", timeout=0.2,
        dataset=[case("hangs", "hang"), case("answers", "Hi", output="Fine.")],
        scorers=[exact_output()],
    )  # fmt: skip
    hung, answered = report.cases
    assert hung.status == "error"
    assert hung.error is not None
    assert hung.error["code"] == "RUN_TIMEOUT"
    assert answered.status == "passed"


async def test_a_failing_case_is_recorded_and_the_suite_goes_on() -> None:
    app = support_app(Scripted(looks_up_then_answers))
    cases = [
        case("crashes", "Please crash", output="anything"),
        case("answers", "Is 42 active?", output="Answer to Is 42 active?"),
    ]
    finished: list[str] = []
    report = await run_evaluation(
        app, suite_name="s", agent_name="support", dataset=cases, scorers=DEFAULT_SCORERS,
        on_case=lambda result: finished.append(result.case_id),
    )  # fmt: skip

    crashed, answered = report.cases
    assert crashed.status == "error"
    assert crashed.error is not None
    assert crashed.error["code"] == "MODEL_ERROR"
    assert crashed.scores["exact_output"] == Score(0.0, False, "the run failed with MODEL_ERROR")
    # What the failed run did before it failed is still there to score.
    assert crashed.tool_calls == ("accounts_get",)
    assert crashed.usage == Usage(10, 2)
    assert answered.status == "passed"
    assert finished == ["crashes", "answers"]


@pytest.mark.parametrize("concurrency", [1, 3])
async def test_a_target_the_app_lacks_stops_the_suite_before_any_run(concurrency: int) -> None:
    model = Scripted(looks_up_then_answers)
    app = support_app(model)
    cases = [case(f"c{n}", "Hi") for n in range(5)]
    finished: list[CaseResult] = []
    for target, code in [
        ({"agent_name": "suport"}, "AGENT_NOT_FOUND"),
        ({"workflow_name": "nope"}, "WORKFLOW_NOT_FOUND"),
    ]:
        with pytest.raises(FevexRunError) as raised:
            await run_evaluation(
                app, suite_name="s", dataset=cases, scorers=[], concurrency=concurrency,
                on_case=finished.append, **target,
            )  # fmt: skip
        assert raised.value.code == code
    assert model.inputs == []
    assert finished == []
    assert await app.list_runs() == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "exactly one of agent_name and workflow_name"),
        ({"agent_name": "support", "workflow_name": "w"}, "exactly one of"),
        ({"agent_name": "support", "concurrency": 0}, "concurrency must be"),
        ({"agent_name": "support", "suite_name": ""}, "suite_name must be"),
        ({"agent_name": "support", "timeout": -1}, "timeout must be a number of seconds"),
    ],
)
async def test_arguments_out_of_range_are_refused(arguments: dict[str, Any], message: str) -> None:
    app = support_app(Scripted(looks_up_then_answers))
    arguments = {"suite_name": "s", **arguments}
    with pytest.raises(FevexConfigurationError) as raised:
        await run_evaluation(app, dataset=[case("a", "Hi")], scorers=[], **arguments)
    assert raised.value.code == "INVALID_ARGUMENT"
    assert message in str(raised.value)


async def test_each_case_has_its_measured_duration_and_its_usage() -> None:
    ticks = iter([10.0, 10.25, 20.0, 22.0])
    app = support_app(Scripted(looks_up_then_answers))
    report = await run_evaluation(
        app, suite_name="s", agent_name="support",
        dataset=[case("fast", "Is 42 active?"), case("slow", "Who owns 42?")],
        scorers=[max_latency(1.0)], clock=lambda: next(ticks),
    )  # fmt: skip
    fast, slow = report.cases
    assert (fast.duration_ms, slow.duration_ms) == (250.0, 2000.0)
    assert fast.scores["max_latency"] == Score(1.0, True, "took 250 ms, limit 1000 ms")
    assert slow.scores["max_latency"] == Score(0.5, False, "took 2000 ms, limit 1000 ms")
    assert fast.usage == Usage(30, 7)


async def test_a_workflow_target_scores_its_child_agents_tools_usage_and_cost() -> None:
    @define_workflow(name="triage", version="1")
    async def triage(step: WorkflowStep, question: str) -> dict[str, Any]:
        answer = await step.agent("ask", "support", input=question)
        return {"answer": answer.output}

    model = Scripted(looks_up_then_answers)
    support = define_agent(name="support", instructions="Answer.", tools=["accounts_get"])
    app = create_fevex(
        models={"default": model}, agents=[support], tools=[accounts_get], workflows=[triage]
    )
    prices: list[tuple[Usage, str]] = []

    def cost(usage: Usage, model: str) -> float:
        prices.append((usage, model))
        return (usage.input_tokens or 0) * 0.001

    report = await run_evaluation(
        app, suite_name="s", workflow_name="triage",
        dataset=[case("q", "Is 42 active?", output={"answer": "Answer to Is 42 active?"},
                      tools=["accounts_get"])],
        scorers=[*DEFAULT_SCORERS, max_cost(0.02, cost=cost)],
    )  # fmt: skip
    [result] = report.cases
    assert result.status == "failed"
    assert result.output == {"answer": "Answer to Is 42 active?"}
    assert result.tool_calls == ("accounts_get",)
    assert result.scores["exact_output"].passed
    assert result.scores["tool_selection"].passed
    assert prices == [(Usage(30, 7), "default")]
    assert result.scores["max_cost"] == Score(pytest.approx(0.02 / 0.03), False,
                                              "cost 0.03, limit 0.02")  # fmt: skip
    assert report.target_kind == "workflow"


# -- scorers ----------------------------------------------------------------------------


def outcome(
    expected: dict[str, Any] | None = None,
    *,
    output: Any = None,
    tools: tuple[str, ...] = (),
    usage: Usage | None = None,
    by_model: dict[str, Usage] | None = None,
    error: dict[str, Any] | None = None,
) -> CaseOutcome:
    return CaseOutcome(
        case=EvalCase("c", "input", expected or {}),
        output=output,
        tool_calls=tools,
        duration_ms=5.0,
        usage=usage or Usage(),
        usage_by_model=by_model or {},
        error=error,
    )


async def score(scorer: Any, case_outcome: CaseOutcome) -> Score | None:
    result: Score | None = await scorer(case_outcome)
    return result


@pytest.mark.parametrize(
    ("expected", "output", "passed"),
    [
        ({"answer": 1, "ok": True}, {"ok": True, "answer": 1.0}, True),
        ({"answer": 1}, {"answer": True}, False),
        ([1, 2], [2, 1], False),
        ("text", "text", True),
        (None, None, True),
        (None, "", False),
        ({"a": [1, {"b": None}]}, {"a": [1, {"b": None}]}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
    ],
)
async def test_exact_output_compares_as_json(expected: Any, output: Any, passed: bool) -> None:
    result = await score(exact_output(), outcome({"output": expected}, output=output))
    assert result is not None
    assert (result.passed, result.value) == (passed, 1.0 if passed else 0.0)


async def test_a_scorer_without_its_expectation_gives_no_score() -> None:
    for scorer in (exact_output(), tool_selection(), forbidden_tools()):
        assert await score(scorer, outcome({}, output="x", tools=("a",))) is None


@pytest.mark.parametrize(
    ("ordered", "expected", "called", "value", "passed"),
    [
        (True, ["a", "b"], ["a", "b"], 1.0, True),
        (True, ["a", "b"], ["b", "a"], 0.5, False),
        (True, ["a", "b", "c"], ["a", "c"], 2 / 3, False),
        (True, [], [], 1.0, True),
        (True, [], ["a"], 0.0, False),
        (False, ["a", "b"], ["b", "a"], 1.0, True),
        (False, ["a", "a"], ["a"], 0.5, False),
        (False, ["a", "b"], ["a", "c"], 1 / 3, False),
    ],
)
async def test_tool_selection_ordered_and_unordered(
    ordered: bool, expected: list[str], called: list[str], value: float, passed: bool
) -> None:
    result = await score(
        tool_selection(ordered=ordered), outcome({"tools": expected}, tools=tuple(called))
    )
    assert result is not None
    assert (result.value, result.passed) == (pytest.approx(value), passed)


async def test_forbidden_tools_from_the_scorer_and_from_the_case() -> None:
    scorer = forbidden_tools(["accounts_close"])
    used = await score(scorer, outcome({}, tools=("accounts_get", "accounts_close")))
    assert used == Score(0.0, False, "called forbidden [accounts_close]")
    by_case = await score(
        forbidden_tools(), outcome({"forbidden_tools": ["refund"]}, tools=("refund",))
    )
    assert by_case is not None
    assert not by_case.passed
    clean = await score(scorer, outcome({}, tools=("accounts_get",)))
    assert clean is not None
    assert clean.passed
    with pytest.raises(FevexConfigurationError):
        forbidden_tools("accounts_close")


@pytest.mark.parametrize(
    ("kind", "usage", "result"),
    [
        ("total", Usage(60, 40, 100), Score(1.0, True, "used 100 total tokens, limit 100")),
        ("total", Usage(150, 50), Score(0.5, False, "used 200 total tokens, limit 100")),
        ("input", Usage(200, 1), Score(0.5, False, "used 200 input tokens, limit 100")),
        ("output", Usage(200, 1), Score(1.0, True, "used 1 output tokens, limit 100")),
        ("total", Usage(), Score(0.0, False, "the model reported no total tokens")),
    ],
)
async def test_max_tokens(kind: Any, usage: Usage, result: Score) -> None:
    assert await score(max_tokens(100, kind=kind), outcome(usage=usage)) == result


async def test_max_cost_prices_each_model_with_the_cost_function() -> None:
    prices = {"default": 0.5, "openai:gpt-5": 2.0}
    scorer = max_cost(
        3.0, cost=lambda usage, model: (usage.total_tokens or 0) * prices[model] / 100
    )
    cheap = outcome(by_model={"default": Usage(total_tokens=100), "openai:gpt-5": Usage(
        total_tokens=100)})  # fmt: skip
    assert await score(scorer, cheap) == Score(1.0, True, "cost 2.5, limit 3")
    dear = outcome(by_model={"openai:gpt-5": Usage(total_tokens=300)})
    assert await score(scorer, dear) == Score(0.5, False, "cost 6, limit 3")
    broken = max_cost(1.0, cost=lambda usage, model: float("nan"))
    nan = await score(broken, outcome(by_model={"default": Usage(1)}))
    assert nan is not None
    assert not nan.passed
    assert "returned nan" in nan.reason
    with pytest.raises(FevexConfigurationError, match="takes cost="):
        max_cost(1.0, cost="cheap")  # type: ignore[arg-type]


async def test_max_cost_without_a_cost_function_uses_the_apps_prices() -> None:
    from fevex.observability import Observability

    support = define_agent(name="support", instructions="Answer.", tools=["accounts_get"])

    def build(calculate_cost: Any) -> Any:
        return create_fevex(
            models={"default": Scripted(looks_up_then_answers)},
            agents=[support],
            tools=[accounts_get],
            observability=None if calculate_cost is None else Observability(
                calculate_cost=calculate_cost),
        )  # fmt: skip

    def price(usage: Usage, model: str) -> Cost:
        return Cost((usage.input_tokens or 0) * 0.001, "USD")

    for app, expected in (
        (build(price), Score(pytest.approx(0.02 / 0.03), False, "cost 0.03, limit 0.02")),
        (build(None), None),
    ):
        report = await run_evaluation(
            app, suite_name="s", agent_name="support",
            dataset=[case("q", "Is 42 active?")], scorers=[max_cost(0.02)],
        )  # fmt: skip
        [result] = report.cases
        if expected is None:
            assert not result.scores["max_cost"].passed
            assert "no model step was priced" in result.scores["max_cost"].reason
        else:
            assert result.scores["max_cost"] == expected
        await app.close()


@pytest.mark.parametrize(
    "build",
    [
        lambda: max_latency(0),
        lambda: max_latency(float("inf")),
        lambda: max_tokens(-1),
        lambda: max_tokens(10, kind="cached"),
        lambda: max_cost(-1, cost=lambda u, m: 0.0),
        lambda: tool_selection(ordered=True, name=""),
    ],
)
def test_built_in_scorers_refuse_bad_bounds(build: Callable[[], Any]) -> None:
    with pytest.raises(FevexConfigurationError) as raised:
        asyncio.run(run_evaluation(None, suite_name="s", agent_name="a", dataset=[],  # type: ignore[arg-type]
                                   scorers=[build()]))  # fmt: skip
    assert raised.value.code == "INVALID_ARGUMENT"


async def test_users_scorers_sync_and_async_and_their_failures() -> None:
    def mentions_account(outcome: CaseOutcome) -> Score:
        mentioned = "42" in str(outcome.output)
        return Score(1.0 if mentioned else 0.0, mentioned, "mentions the account")

    @define_scorer(name="polite")
    async def polite(outcome: CaseOutcome) -> Score:
        await asyncio.sleep(0)
        return Score(0.75, True, "polite enough")

    def raises(outcome: CaseOutcome) -> Score:
        raise ValueError("bad scorer")

    def out_of_range(outcome: CaseOutcome) -> Score:
        return Score(1.5, True)

    def not_a_score(outcome: CaseOutcome) -> Any:
        return True

    app = support_app(Scripted(looks_up_then_answers))
    report = await run_evaluation(
        app, suite_name="s", agent_name="support", dataset=[case("a", "Is 42 active?")],
        scorers=[mentions_account, polite, raises, out_of_range, not_a_score],
    )  # fmt: skip
    scores = report.cases[0].scores
    assert scores["mentions_account"] == Score(1.0, True, "mentions the account")
    assert scores["polite"] == Score(0.75, True, "polite enough")
    assert scores["raises"] == Score(0.0, False, "the scorer raised ValueError: bad scorer")
    assert scores["out_of_range"].reason == "the scorer returned 1.5, not a value in [0, 1]"
    assert scores["not_a_score"].reason == "the scorer returned bool, not a Score"
    assert report.cases[0].status == "failed"


@pytest.mark.parametrize(
    ("scorers", "message"),
    [
        ([exact_output(), exact_output()], "Two scorers are named 'exact_output'"),
        ([lambda outcome: None], "define_scorer(fn, name=...)"),
        (["exact_output"], "is not a scorer"),
        (exact_output(), "must be a list"),
    ],
)
async def test_scorers_must_be_named_once(scorers: Any, message: str) -> None:
    app = support_app(Scripted(looks_up_then_answers))
    with pytest.raises(FevexConfigurationError) as raised:
        await run_evaluation(
            app, suite_name="s", agent_name="support", dataset=[case("a", "Hi")], scorers=scorers
        )
    assert message in str(raised.value)


# -- datasets ---------------------------------------------------------------------------


def test_datasets_load_from_jsonl_and_json(tmp_path: Path) -> None:
    lines = tmp_path / "support.jsonl"
    lines.write_text(
        '{"id": "a", "input": "Hi", "expected": {"output": "Hello", "tools": []}}\n\n'
        '{"id": "b", "input": {"account_id": 42}, "metadata": {"tier": "gold"}}\n'
    )
    dataset = load_dataset(lines)
    assert dataset.name == "support"
    assert dataset.cases == (
        EvalCase("a", "Hi", {"output": "Hello", "tools": []}),
        EvalCase("b", {"account_id": 42}, {}, {"tier": "gold"}),
    )
    whole = tmp_path / "cases.json"
    whole.write_text(
        json.dumps({"name": "named", "version": "2", "cases": [{"id": "a", "input": "Hi"}]})
    )
    assert load_dataset(whole) == EvalDataset("named", (EvalCase("a", "Hi"),), "2")
    assert dataset_from_json([{"id": "x", "input": "y"}], name="n").cases == (EvalCase("x", "y"),)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"id": "a", "input": "x"}\n{"id": "a", "input": "y"}\n', "'a': the id is used by"),
        (
            '{"id": "a", "input": "x"}\n{"id": "b", "inptu": "y"}\n',
            "cases.jsonl:2: unknown case keys ['inptu']",
        ),
        ('{"id": "a", "input": "x"}\n{"id": "b", "input": \n', "cases.jsonl:2: not JSON"),
        ('{"id": "", "input": "x"}\n', "the id must be a non-empty string"),
        ('{"id": 7, "input": "x"}\n', "the id must be a non-empty string"),
        ('{"input": "x"}\n', "the id must be a non-empty string"),
        ('{"id": "a"}\n', "cases.jsonl:1: the case has no input"),
        (
            '{"id": "a", "input": "x", "expected": {"tools": "accounts_get"}}\n',
            "expected.tools must be",
        ),
        ('{"id": "a", "input": "x", "expected": []}\n', "expected must be an object"),
        ('["not", "a", "case"]\n', "a case is a JSON object"),
        ('{"id": "a", "input": NaN}\n', "not JSON"),
        ("[" * 100_000 + "\n", "cases.jsonl:1:"),
    ],
)
def test_a_bad_dataset_file_names_the_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(text)
    with pytest.raises(FevexConfigurationError) as raised:
        load_dataset(path)
    assert raised.value.code == "EVAL_DATASET_INVALID"
    assert message in str(raised.value)


def test_a_missing_or_undecodable_dataset_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FevexConfigurationError, match="no such file"):
        load_dataset(tmp_path / "missing.jsonl")
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(FevexConfigurationError, match="cannot be read as UTF-8"):
        load_dataset(binary)
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"cases": [], "name": "x", "extra": 1}')
    with pytest.raises(FevexConfigurationError, match=r"wrong.json: unknown dataset keys"):
        load_dataset(wrong)


# -- reports ----------------------------------------------------------------------------


def result(
    case_id: str, scores: dict[str, Score], *, status: Any = None, error: Any = None
) -> CaseResult:
    from fevex.evals.report import case_status

    return CaseResult(
        case_id=case_id,
        status=status or case_status(error, scores),
        input=f"question {case_id}",
        expected={"output": "x"},
        output="x",
        tool_calls=("accounts_get",),
        duration_ms=12.3456789,
        usage=Usage(3, 4),
        scores=scores,
        error=error,
    )


def report_of(*cases: CaseResult) -> EvalReport:
    return EvalReport("suite", "agent", "support", "v1", "data", "1", cases)


def test_the_serialized_report_is_canonical_and_reads_back() -> None:
    scores = {"b": Score(1 / 3, False, "third"), "a": Score(1.0, True, "ok ✓")}
    report = report_of(result("one", scores), result("two", dict(reversed(scores.items()))))
    text = serialize_eval_report(report)

    assert text == serialize_eval_report(report)
    assert text.endswith("}\n")
    assert "ok ✓" in text  # UTF-8, not \u escapes
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert data["cases"][0]["duration_ms"] == 12.346
    assert data["cases"][0]["scores"]["b"]["value"] == 0.333333
    assert data["summary"] == {
        "cases": 2, "passed": 0, "failed": 2, "errors": 0,
        "mean_scores": {"a": 1.0, "b": 0.333333},
    }  # fmt: skip
    # The two cases differ only in the order their scores were given: same JSON.
    assert data["cases"][0]["scores"] == data["cases"][1]["scores"]
    assert "run_" not in text
    again = eval_report_from_json(data)
    assert serialize_eval_report(again) == text


def test_the_serialized_report_is_one_text_for_one_value() -> None:
    zero = report_of(result("a", {"s": Score(0.0, False)}))
    negative_zero = report_of(result("a", {"s": Score(-0.0, False)}))
    assert serialize_eval_report(zero) == serialize_eval_report(negative_zero)
    # A lone surrogate has no UTF-8 form: the whole text is escaped, still readable.
    odd = EvalReport("suite \ud800", "agent", "support", None, "data", None, ())
    text = serialize_eval_report(odd)
    text.encode("utf-8")
    assert json.loads(text)["suite"] == "suite \ud800"
    with pytest.raises(TypeError, match="NaN"):
        serialize_eval_report(report_of(result("a", {"s": Score(float("nan"), False)})))


def test_a_bad_baseline_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    for text, message in [
        ("{", "not a JSON report"),
        ('{"format": 2}', "not an evaluation report of format 1"),
        ("[]", "not an evaluation report"),
    ]:
        path.write_text(text)
        with pytest.raises(FevexConfigurationError) as raised:
            load_eval_report(path)
        assert raised.value.code == "EVAL_REPORT_INVALID"
        assert message in str(raised.value)
    good = json.loads(serialize_eval_report(report_of(result("a", {"s": Score(1.0, True)}))))
    for mutate in (
        lambda d: d["cases"][0]["scores"]["s"].update(value=float("nan")),
        lambda d: d["cases"][0]["scores"]["s"].update(value=2),
        lambda d: d["cases"][0].update(status="weird"),
        lambda d: d["cases"].append(dict(d["cases"][0])),
        lambda d: d.pop("target"),
    ):
        data = json.loads(json.dumps(good))
        mutate(data)
        path.write_text(json.dumps(data))
        with pytest.raises(FevexConfigurationError) as raised:
            load_eval_report(path)
        assert raised.value.code == "EVAL_REPORT_INVALID"
    with pytest.raises(FevexConfigurationError, match="no such file"):
        load_eval_report(tmp_path / "missing.json")


# -- comparison -------------------------------------------------------------------------


def test_comparison_lists_every_kind_of_regression() -> None:
    baseline = report_of(
        result("gone", {"s": Score(1.0, True)}),
        result("now-fails", {"s": Score(1.0, True)}),
        result("drops", {"s": Score(0.9, True)}),
        result("drops-a-little", {"s": Score(0.9, True)}),
        result("improves", {"s": Score(0.2, False)}),
        result("unscored", {"s": Score(1.0, True), "t": Score(1.0, True)}),
        result("errors", {}),
    )
    current = report_of(
        result("now-fails", {"s": Score(0.0, False, "wrong answer")}),
        result("drops", {"s": Score(0.6, True)}),
        result("drops-a-little", {"s": Score(0.85, True)}),
        result("improves", {"s": Score(1.0, True)}),
        result("unscored", {"s": Score(1.0, True)}),
        result("errors", {}, error={"code": "MODEL_ERROR", "message": "down"}),
        result("new", {"s": Score(0.0, False)}),
    )
    comparison = compare_evaluation_reports(baseline, current, tolerance=0.1)
    found = [(r.case_id, r.kind, r.scorer) for r in comparison.regressions]
    assert found == [
        ("gone", "case_missing", None),
        ("now-fails", "score_failed", "s"),
        ("drops", "score_dropped", "s"),
        ("unscored", "score_missing", "t"),
        ("errors", "case_errored", None),
    ]
    assert comparison.regressions[1].message == (
        "case 'now-fails', scorer 's': passed in the baseline, fails now (wrong answer)"
    )
    assert comparison.new_cases == ("new",)
    assert comparison.has_regressions
    strict = compare_evaluation_reports(baseline, current)
    assert ("drops-a-little", "score_dropped", "s") in [
        (r.case_id, r.kind, r.scorer) for r in strict.regressions
    ]
    with pytest.raises(FevexConfigurationError):
        compare_evaluation_reports(baseline, current, tolerance=1.5)


def test_a_report_compared_with_its_own_baseline_file_has_no_regression() -> None:
    # The baseline file keeps six places; the fresh report has every digit of 1/3 and 2/3.
    report = report_of(result("a", {"s": Score(1 / 3, False), "t": Score(2 / 3, True)}))
    baseline = eval_report_from_json(json.loads(serialize_eval_report(report)))
    assert not compare_evaluation_reports(baseline, report).has_regressions


# -- reporters and progress -------------------------------------------------------------


def test_json_and_text_reporters_write_through_the_callback() -> None:
    baseline = report_of(result("a", {"s": Score(1.0, True)}), result("b", {"s": Score(1.0, True)}))
    current = report_of(
        result("a", {"s": Score(0.0, False, "no")}), result("b", {"s": Score(1.0, True)})
    )
    written: list[str] = []
    json_reporter(written.append)(current)
    assert written == [serialize_eval_report(current)]

    out = io.StringIO()
    text_reporter(out.write, baseline=baseline)(current)
    table = out.getvalue()
    assert "0.00 fail (1.00)" in table
    assert "suite on agent support (v1): 2 cases, 1 passed, 1 failed, 0 errors" in table
    assert "1 regression against the baseline:" in table
    assert "case 'a', scorer 's': passed in the baseline, fails now (no)" in table


def test_text_from_a_case_cannot_drive_the_terminal() -> None:
    hostile = "a\x1b[2J\x1b]0;owned\x07\r\u202eb"
    report = report_of(result(hostile, {"s": Score(1.0, True)}, error={
        "code": "MODEL_ERROR", "message": "boom\x1b[31m"}))  # fmt: skip
    table = format_summary(report)
    assert "\x1b" not in table
    assert "\r" not in table
    assert "\u202e" not in table
    assert "a\\x1b[2J\\x1b]0;owned\\x07\\r\\u202eb" in table
    assert "boom\\x1b[31m" in table
    stream = io.StringIO()
    progress = EvalProgress(stream, 1)
    progress.case_finished(report.cases[0])
    assert "\x1b" not in stream.getvalue()


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_bar_on_a_terminal_and_lines_elsewhere() -> None:
    cases = [result(f"case-{n}", {"s": Score(1.0, n != 1)}) for n in range(3)]
    terminal = Terminal()
    bar = EvalProgress(terminal, 3)
    for finished in cases:
        bar.case_finished(finished)
    bar.close()
    drawn = terminal.getvalue()
    assert drawn.count("\r") == 4
    assert drawn.endswith("\n")
    assert drawn.count("\n") == 1
    assert "\r[########################] 3/3, 1 not passed case-2 passed\x1b[K" in drawn
    assert "\r[########----------------] 1/3 case-0 passed\x1b[K" in drawn

    log = io.StringIO()
    plain = EvalProgress(log, 3)
    for finished in cases:
        plain.case_finished(finished)
    plain.close()
    assert log.getvalue().splitlines() == [
        "[1/3] case-0: passed (12 ms)",
        "[2/3] case-1: failed (12 ms)",
        "[3/3] case-2: passed (12 ms)",
    ]
