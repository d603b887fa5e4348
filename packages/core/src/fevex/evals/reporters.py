"""Reporters: a report written through a callback of yours (a file, a logger, stdout).

``json_reporter(write)`` writes the canonical JSON; ``text_reporter(write)`` a summary
table for people, with the baseline's values and the regressions when given one. Text
that came from a dataset or a model (ids, reasons, error messages) has its control
characters escaped, so that a case cannot drive the terminal it is printed on.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fevex.evals.comparison import EvalComparison, compare_evaluation_reports
from fevex.evals.report import CaseResult, EvalReport, serialize_eval_report

__all__ = ["Reporter", "format_summary", "json_reporter", "printable", "text_reporter"]

Reporter = Callable[[EvalReport], None]
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def json_reporter(write: Callable[[str], Any]) -> Reporter:
    """A reporter that writes :func:`~fevex.evals.serialize_eval_report`'s text."""

    def report(report: EvalReport) -> None:
        write(serialize_eval_report(report))

    return report


def text_reporter(
    write: Callable[[str], Any], *, baseline: EvalReport | None = None, tolerance: float = 0.0
) -> Reporter:
    """A reporter that writes the summary table (see :func:`format_summary`)."""

    def report(report: EvalReport) -> None:
        comparison = (
            None
            if baseline is None
            else compare_evaluation_reports(baseline, report, tolerance=tolerance)
        )
        write(format_summary(report, baseline, comparison))

    return report


def format_summary(
    report: EvalReport,
    baseline: EvalReport | None = None,
    comparison: EvalComparison | None = None,
) -> str:
    """A table of cases (status, each scorer's value, duration, tokens), the totals, and
    the regressions when ``comparison`` is given. A failing score is marked ``fail``; the
    baseline's value follows in parentheses when it differs."""
    scorers = sorted({name for case in report.cases for name in case.scores})
    header = ["case", "status", *scorers, "ms", "tokens"]
    rows = [header]
    earlier = {case.case_id: case for case in baseline.cases} if baseline is not None else {}
    for case in report.cases:
        before = earlier.get(case.case_id)
        rows.append(
            [
                printable(case.case_id),
                case.status,
                *(_score_cell(case, before, name) for name in scorers),
                f"{case.duration_ms:.0f}",
                "-" if (tokens := _total_tokens(case)) is None else str(tokens),
            ]
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    name = printable(report.suite_name)
    target = f"{report.target_kind} {printable(report.target_name)}"
    if report.target_version:
        target += f" ({printable(report.target_version)})"
    lines.append("")
    lines.append(
        f"{name} on {target}: {_plural(len(report.cases), 'case')}, "
        f"{report.count('passed')} passed, {report.count('failed')} failed, "
        f"{_plural(report.count('error'), 'error')}"
    )
    for case in report.cases:
        if case.error is not None:
            code = printable(str(case.error.get("code")))
            message = printable(str(case.error.get("message", "")))
            lines.append(f"  error in {printable(case.case_id)}: [{code}] {message}")
    if comparison is not None:
        if comparison.regressions:
            regressions = _plural(len(comparison.regressions), "regression")
            lines.append(f"{regressions} against the baseline:")
            lines.extend(f"  {printable(r.message)}" for r in comparison.regressions)
        else:
            lines.append("no regressions against the baseline")
        if comparison.new_cases:
            new = ", ".join(printable(case_id) for case_id in comparison.new_cases)
            lines.append(f"new cases (not in the baseline): {new}")
    return "\n".join(lines) + "\n"


def printable(text: str) -> str:
    """``text`` with control and bidirectional-override characters escaped (``\\x1b``)."""
    return _CONTROL.sub(lambda match: match.group().encode("unicode_escape").decode(), text)


def _score_cell(case: CaseResult, before: CaseResult | None, name: str) -> str:
    score = case.scores.get(name)
    if score is None:
        return "-"
    cell = f"{score.value:.2f}" + ("" if score.passed else " fail")
    was = before.scores.get(name) if before is not None else None
    if was is not None and round(was.value, 2) != round(score.value, 2):
        cell += f" ({was.value:.2f})"
    return cell


def _total_tokens(case: CaseResult) -> int | None:
    usage = case.usage
    if usage.total_tokens is not None:
        return usage.total_tokens
    if usage.input_tokens is None and usage.output_tokens is None:
        return None
    return (usage.input_tokens or 0) + (usage.output_tokens or 0)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
