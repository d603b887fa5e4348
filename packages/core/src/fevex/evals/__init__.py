from fevex.evals.comparison import (
    EvalComparison,
    Regression,
    RegressionKind,
    compare_evaluation_reports,
)
from fevex.evals.dataset import EvalCase, EvalDataset, dataset_from_json, load_dataset
from fevex.evals.html_report import render_html_report
from fevex.evals.report import (
    CaseResult,
    CaseStatus,
    EvalReport,
    eval_report_from_json,
    load_eval_report,
    serialize_eval_report,
)
from fevex.evals.reporters import Reporter, format_summary, json_reporter, text_reporter
from fevex.evals.runner import run_evaluation
from fevex.evals.scorers import (
    CostFunction,
    exact_output,
    forbidden_tools,
    max_cost,
    max_latency,
    max_tokens,
    tool_selection,
)
from fevex.evals.scoring import CaseOutcome, Score, ScoreFunction, Scorer, define_scorer

__all__ = [
    "CaseOutcome",
    "CaseResult",
    "CaseStatus",
    "CostFunction",
    "EvalCase",
    "EvalComparison",
    "EvalDataset",
    "EvalReport",
    "Regression",
    "RegressionKind",
    "Reporter",
    "Score",
    "ScoreFunction",
    "Scorer",
    "compare_evaluation_reports",
    "dataset_from_json",
    "define_scorer",
    "eval_report_from_json",
    "exact_output",
    "forbidden_tools",
    "format_summary",
    "json_reporter",
    "load_dataset",
    "load_eval_report",
    "max_cost",
    "max_latency",
    "max_tokens",
    "render_html_report",
    "run_evaluation",
    "serialize_eval_report",
    "text_reporter",
    "tool_selection",
]
