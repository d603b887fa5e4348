"""Evaluation reports and their canonical JSON form, the file a CI baseline is kept in.

The JSON is canonical (sorted keys, fixed separators, UTF-8, two-space indent, scores
rounded to six places and durations to microseconds) and holds nothing that changes from
one run to the next by itself, such as run ids or dates: a baseline regenerated from an
unchanged suite differs only in its measured durations, and a review diff shows what
changed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fevex._ground.canonical_json import canonical_json
from fevex.errors import FevexConfigurationError
from fevex.evals.scoring import Score
from fevex.models import Usage

__all__ = [
    "CaseResult",
    "CaseStatus",
    "EvalReport",
    "eval_report_from_json",
    "load_eval_report",
    "serialize_eval_report",
]

REPORT_FORMAT = 1
CaseStatus = Literal["passed", "failed", "error"]
TargetKind = Literal["agent", "workflow"]


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One case's result: ``error`` when its run did not complete (``status == "error"``),
    ``failed`` when a scorer failed it, ``passed`` otherwise."""

    case_id: str
    status: CaseStatus
    input: Any
    expected: Mapping[str, Any]
    output: Any
    tool_calls: tuple[str, ...]
    duration_ms: float
    usage: Usage
    scores: Mapping[str, Score]
    error: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EvalReport:
    """A suite's results against one agent or workflow, cases in dataset order."""

    suite_name: str
    target_kind: TargetKind
    target_name: str
    target_version: str | None
    dataset_name: str
    dataset_version: str | None
    cases: tuple[CaseResult, ...]

    def count(self, status: CaseStatus) -> int:
        return sum(1 for case in self.cases if case.status == status)

    def mean_scores(self) -> dict[str, float]:
        """Each scorer's mean value over the cases it scored."""
        values: dict[str, list[float]] = {}
        for case in self.cases:
            for name, score in case.scores.items():
                values.setdefault(name, []).append(score.value)
        return {name: sum(v) / len(v) for name, v in sorted(values.items())}

    def case(self, case_id: str) -> CaseResult | None:
        return next((case for case in self.cases if case.case_id == case_id), None)


def case_status(error: Mapping[str, Any] | None, scores: Mapping[str, Score]) -> CaseStatus:
    if error is not None:
        return "error"
    return "passed" if all(score.passed for score in scores.values()) else "failed"


def serialize_eval_report(report: EvalReport) -> str:
    """The report as canonical JSON text, ending with a newline."""
    return canonical_json(report_to_json(report), indent=2) + "\n"


def report_to_json(report: EvalReport) -> dict[str, Any]:
    return {
        "format": REPORT_FORMAT,
        "suite": report.suite_name,
        "target": {
            "kind": report.target_kind,
            "name": report.target_name,
            "version": report.target_version,
        },
        "dataset": {"name": report.dataset_name, "version": report.dataset_version},
        "summary": {
            "cases": len(report.cases),
            "passed": report.count("passed"),
            "failed": report.count("failed"),
            "errors": report.count("error"),
            "mean_scores": {name: _round(v) for name, v in report.mean_scores().items()},
        },
        "cases": [_case_to_json(case) for case in report.cases],
    }


def _case_to_json(case: CaseResult) -> dict[str, Any]:
    return {
        "id": case.case_id,
        "status": case.status,
        "input": case.input,
        "expected": dict(case.expected),
        "metadata": dict(case.metadata),
        "output": case.output,
        "tool_calls": list(case.tool_calls),
        "duration_ms": round(float(case.duration_ms), 3),
        "usage": case.usage.to_json(),
        "error": None if case.error is None else dict(case.error),
        "scores": {
            name: {"value": _round(s.value), "passed": s.passed, "reason": s.reason}
            for name, s in case.scores.items()
        },
    }


def _round(value: float) -> float:
    return round(float(value), 6)


def load_eval_report(path: str | Path) -> EvalReport:
    """Read a report written by :func:`serialize_eval_report` (a baseline);
    ``EVAL_REPORT_INVALID`` when it cannot be read or is not one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _invalid(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise _invalid(f"{path}: not a JSON report ({error})") from None
    try:
        return eval_report_from_json(data)
    except FevexConfigurationError as error:
        raise _invalid(f"{path}: {error.message}") from None


def eval_report_from_json(data: Any) -> EvalReport:
    """A report from its parsed JSON form; the ``summary`` is recomputed, not trusted."""
    try:
        if not isinstance(data, dict) or data.get("format") != REPORT_FORMAT:
            raise ValueError(f"not an evaluation report of format {REPORT_FORMAT}")
        target, dataset = data["target"], data["dataset"]
        if target["kind"] not in ("agent", "workflow"):
            raise ValueError(f"unknown target kind {target['kind']!r}")
        cases = tuple(_case_from_json(case) for case in data["cases"])
        report = EvalReport(
            suite_name=_text(data["suite"]),
            target_kind=target["kind"],
            target_name=_text(target["name"]),
            target_version=_optional_text(target.get("version")),
            dataset_name=_text(dataset["name"]),
            dataset_version=_optional_text(dataset.get("version")),
            cases=cases,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise _invalid(f"malformed report: {error!r}") from None
    ids = [case.case_id for case in report.cases]
    if len(set(ids)) != len(ids):
        raise _invalid("two cases share an id")
    return report


def _case_from_json(data: dict[str, Any]) -> CaseResult:
    scores = {
        _text(name): Score(_unit(score["value"]), _flag(score["passed"]), _text(score["reason"]))
        for name, score in data["scores"].items()
    }
    status = data["status"]
    if status not in ("passed", "failed", "error"):
        raise ValueError(f"unknown case status {status!r}")
    error = data.get("error")
    if error is not None and not isinstance(error, dict):
        raise TypeError("a case error is an object")
    tool_calls = data.get("tool_calls", [])
    if not isinstance(tool_calls, list) or not all(isinstance(t, str) for t in tool_calls):
        raise TypeError("tool_calls is a list of names")
    duration = data["duration_ms"]
    if not isinstance(duration, int | float) or isinstance(duration, bool):
        raise TypeError("duration_ms is a number")
    return CaseResult(
        case_id=_text(data["id"]),
        status=status,
        input=data.get("input"),
        expected=dict(data.get("expected") or {}),
        output=data.get("output"),
        tool_calls=tuple(tool_calls),
        duration_ms=float(duration),
        usage=Usage.from_json(data.get("usage")),
        scores=scores,
        error=error,
        metadata=dict(data.get("metadata") or {}),
    )


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not a string")
    return value


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _unit(value: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
        raise ValueError(f"score value {value!r} is not in [0, 1]")
    return float(value)


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{value!r} is not a boolean")
    return value


def _invalid(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("EVAL_REPORT_INVALID", f"Evaluation report: {message}.")
