"""``compare_evaluation_reports``: what got worse between a baseline and a new report.

A regression is a case of the baseline that is gone, a case that ran and now errors, a
score that passed and now fails, a score that dropped by more than the tolerance, or a
score the baseline had that the new report lacks (a removed scorer must not hide a
failure). New cases and improvements are never regressions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from fevex.errors import FevexConfigurationError
from fevex.evals.report import EvalReport

__all__ = ["EvalComparison", "Regression", "RegressionKind", "compare_evaluation_reports"]

RegressionKind = Literal[
    "case_missing", "case_errored", "score_failed", "score_dropped", "score_missing"
]


@dataclass(frozen=True, slots=True)
class Regression:
    """One regression of one case; ``scorer`` and the two values for score regressions."""

    case_id: str
    kind: RegressionKind
    message: str
    scorer: str | None = None
    baseline: float | None = None
    current: float | None = None


@dataclass(frozen=True, slots=True)
class EvalComparison:
    """Regressions in case order (then by kind and scorer), and the ids of cases the
    baseline did not have."""

    regressions: tuple[Regression, ...]
    new_cases: tuple[str, ...]
    tolerance: float

    @property
    def has_regressions(self) -> bool:
        return bool(self.regressions)

    def for_case(self, case_id: str) -> tuple[Regression, ...]:
        return tuple(r for r in self.regressions if r.case_id == case_id)


def compare_evaluation_reports(
    baseline: EvalReport, current: EvalReport, *, tolerance: float = 0.0
) -> EvalComparison:
    """List what regressed from ``baseline`` to ``current``; a score regresses by a drop
    of more than ``tolerance`` (in [0, 1]) even when it still passes."""
    if (
        not isinstance(tolerance, int | float)
        or isinstance(tolerance, bool)
        or not math.isfinite(tolerance)
        or not 0 <= tolerance <= 1
    ):
        raise FevexConfigurationError(
            "INVALID_ARGUMENT", f"tolerance must be a number in [0, 1], not {tolerance!r}."
        )
    regressions: list[Regression] = []
    now_by_id = {case.case_id: case for case in current.cases}
    for before in baseline.cases:
        after = now_by_id.get(before.case_id)
        case_id = before.case_id
        if after is None:
            regressions.append(
                Regression(case_id, "case_missing", f"case {case_id!r} is no longer evaluated")
            )
            continue
        if after.status == "error" and before.status != "error":
            code = (after.error or {}).get("code")
            regressions.append(
                Regression(case_id, "case_errored", f"case {case_id!r} now fails with {code}")
            )
        for name, was in sorted(before.scores.items()):
            now = after.scores.get(name)
            where = f"case {case_id!r}, scorer {name!r}"
            if now is None:
                regressions.append(
                    Regression(case_id, "score_missing", f"{where}: no longer scored", name)
                )
            elif was.passed and not now.passed:
                message = f"{where}: passed in the baseline, fails now ({now.reason})"
                regressions.append(
                    Regression(case_id, "score_failed", message, name, was.value, now.value)
                )
            # Compared as a baseline file keeps them (six places), with room for the
            # rounding of the subtraction itself.
            elif round(was.value, 6) - round(now.value, 6) > tolerance + 1e-9:
                message = (
                    f"{where}: dropped from {was.value:.3f} to {now.value:.3f} "
                    f"(tolerance {tolerance:g})"
                )
                regressions.append(
                    Regression(case_id, "score_dropped", message, name, was.value, now.value)
                )
    known = {case.case_id for case in baseline.cases}
    new_cases = tuple(case.case_id for case in current.cases if case.case_id not in known)
    return EvalComparison(tuple(regressions), new_cases, float(tolerance))
