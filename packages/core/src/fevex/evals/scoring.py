"""The scorer protocol: a function of a case's outcome that returns a :class:`Score`.

A scorer is sync or async, reads a :class:`CaseOutcome` and returns a score in [0, 1]
with a pass flag and a reason, or ``None`` when the case gives it nothing to check (no
expected output for ``exact_output``). Wrap a function with :func:`define_scorer` to name
it; a bare function is named after itself.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

from fevex.errors import FevexConfigurationError
from fevex.evals.dataset import EvalCase
from fevex.events import RunEvent
from fevex.models import Usage

__all__ = ["CaseOutcome", "Score", "ScoreFunction", "Scorer", "define_scorer"]


@dataclass(frozen=True, slots=True)
class Score:
    """``value`` in [0, 1] (1 is best), whether the case ``passed`` this scorer, and why."""

    value: float
    passed: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CaseOutcome:
    """What a case's run produced, as scorers see it.

    ``output`` is the run's output as JSON (``None`` when it did not complete),
    ``tool_calls`` the names of the tools the model asked for, in order, across the run and
    its child runs; ``duration_ms`` the measured time of the run; ``usage`` its token usage
    and ``usage_by_model`` the same split by the model each step ran on (as
    ``model.started`` names it); ``cost`` the sum of the prices the app's
    ``Observability(calculate_cost=)`` put on its model steps (``None`` when it priced
    none). ``error`` is the failure's ``to_json()`` when the run did not complete.
    """

    case: EvalCase
    output: Any
    tool_calls: tuple[str, ...]
    duration_ms: float
    usage: Usage
    usage_by_model: Mapping[str, Usage] = field(default_factory=dict)
    cost: float | None = None
    error: Mapping[str, Any] | None = None
    run_id: str | None = None
    events: tuple[RunEvent, ...] = ()


ScoreFunction = Callable[[CaseOutcome], Score | Awaitable[Score | None] | None]


@dataclass(frozen=True, slots=True)
class Scorer:
    """A named score function; the name keys its scores in reports and baselines."""

    name: str
    score: ScoreFunction

    async def __call__(self, outcome: CaseOutcome) -> Score | None:
        """The score, or why the scorer failed as a failing score: a scorer's bug is
        recorded against the case, never a reason to stop the suite."""
        try:
            result = self.score(outcome)
            if inspect.isawaitable(result):
                result = await result
        except Exception as error:
            return Score(0.0, False, f"the scorer raised {type(error).__name__}: {error}")
        if result is None:
            return None
        if not isinstance(result, Score):
            return Score(0.0, False, f"the scorer returned {type(result).__name__}, not a Score")
        value = result.value
        if (
            not isinstance(value, int | float)
            or isinstance(value, bool)
            or not math.isfinite(value)
            or not 0 <= value <= 1
        ):
            return Score(0.0, False, f"the scorer returned {value!r}, not a value in [0, 1]")
        return Score(float(value), bool(result.passed), str(result.reason))


@overload
def define_scorer(function: ScoreFunction, /, *, name: str | None = None) -> Scorer: ...


@overload
def define_scorer(*, name: str | None = None) -> Callable[[ScoreFunction], Scorer]: ...


def define_scorer(
    function: ScoreFunction | None = None, /, *, name: str | None = None
) -> Scorer | Callable[[ScoreFunction], Scorer]:
    """Name a score function: ``define_scorer(fn, name="polite")``, or as a decorator
    ``@define_scorer(name="polite")``. Without ``name``, the function's own name."""

    def wrap(function: ScoreFunction) -> Scorer:
        return as_scorer(function if name is None else Scorer(name, function))

    return wrap if function is None else wrap(function)


def as_scorer(scorer: Scorer | ScoreFunction) -> Scorer:
    if isinstance(scorer, Scorer):
        if not isinstance(scorer.name, str) or not scorer.name:
            raise _invalid(f"A scorer name must be a non-empty string, not {scorer.name!r}.")
        if not callable(scorer.score):
            raise _invalid(f"Scorer {scorer.name!r}: its score function is not callable.")
        return scorer
    if not callable(scorer):
        raise _invalid(f"{scorer!r} is not a scorer: pass a function of a CaseOutcome.")
    name = getattr(scorer, "__name__", None)
    if not isinstance(name, str) or not name or name == "<lambda>":
        raise _invalid("A scorer without a name: wrap it with define_scorer(fn, name=...).")
    return Scorer(name, scorer)


def _invalid(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("INVALID_ARGUMENT", message)


def _check_names(scorers: list[Scorer]) -> None:
    seen: set[str] = set()
    for scorer in scorers:
        if scorer.name in seen:
            raise _invalid(
                f"Two scorers are named {scorer.name!r}; give one another name (name=...)."
            )
        seen.add(scorer.name)


def scorers_of(scorers: Any) -> list[Scorer]:
    """The scorers of ``run_evaluation(scorers=...)``, checked: callables, unique names."""
    if isinstance(scorers, Scorer) or callable(scorers) or not hasattr(scorers, "__iter__"):
        raise _invalid("scorers must be a list of scorers.")
    checked = [as_scorer(scorer) for scorer in scorers]
    _check_names(checked)
    return checked
