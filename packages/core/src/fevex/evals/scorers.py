"""The built-in deterministic scorers.

Each returns a :class:`~fevex.evals.Scorer`; ``name=`` renames one, so that two of a kind
(``max_tokens`` on input and on output) can score one suite. A scorer that needs an
expectation the case does not state (``expected.output``, ``expected.tools``) gives no
score for that case rather than a failing one.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from fevex._ground.canonical_json import canonical_json
from fevex.errors import FevexConfigurationError
from fevex.evals.scoring import CaseOutcome, Score, Scorer
from fevex.models import Usage

__all__ = [
    "CostFunction",
    "exact_output",
    "forbidden_tools",
    "max_cost",
    "max_latency",
    "max_tokens",
    "tool_selection",
]

# What ``max_cost`` prices a run with: the usage of one model and the model's reference
# (the agent's ``model``, ``"default"`` when unset) to an amount in your currency.
CostFunction = Callable[[Usage, str], float]
TokenKind = Literal["total", "input", "output"]


def exact_output(*, name: str = "exact_output") -> Scorer:
    """1 when the run's output equals ``expected.output`` as JSON (``1`` equals ``1.0``,
    ``true`` is not ``1``, key order does not matter), else 0."""

    def score(outcome: CaseOutcome) -> Score | None:
        expected = outcome.case.expected
        if "output" not in expected:
            return None
        if outcome.error is not None:
            return Score(0.0, False, f"the run failed with {outcome.error.get('code')}")
        if json_equal(expected["output"], outcome.output):
            return Score(1.0, True, "the output is the expected one")
        return Score(
            0.0, False, f"expected {_brief(expected['output'])}, got {_brief(outcome.output)}"
        )

    return Scorer(name, score)


def tool_selection(*, ordered: bool = True, name: str = "tool_selection") -> Scorer:
    """How well the tools the model called match ``expected.tools``.

    ``ordered=True``: passes when the calls are exactly the expected ones in that order;
    the value is the longest common subsequence over the longer of the two lists.
    ``ordered=False``: passes when each tool is called as many times as expected, in any
    order; the value is the shared calls over all calls of either list.
    """

    def score(outcome: CaseOutcome) -> Score | None:
        expected = outcome.case.expected.get("tools")
        if expected is None:
            return None
        wanted, called = list(expected), list(outcome.tool_calls)
        if ordered:
            longest = max(len(wanted), len(called))
            value = 1.0 if longest == 0 else _common_subsequence(wanted, called) / longest
            passed = wanted == called
        else:
            want, got = Counter(wanted), Counter(called)
            union = sum((want | got).values())
            value = 1.0 if union == 0 else sum((want & got).values()) / union
            passed = want == got
        how = "in order " if ordered else ""
        reason = f"expected {how}{_names(wanted)}, called {_names(called)}"
        return Score(value, passed, reason)

    return Scorer(name, score)


def forbidden_tools(tools: Iterable[str] = (), *, name: str = "forbidden_tools") -> Scorer:
    """0 when the model called any of ``tools`` or of the case's
    ``expected.forbidden_tools``, else 1."""
    forbidden = _tool_names(tools, "forbidden_tools")

    def score(outcome: CaseOutcome) -> Score | None:
        names = forbidden | set(outcome.case.expected.get("forbidden_tools") or ())
        if not names:
            return None
        used = sorted({call for call in outcome.tool_calls if call in names})
        if used:
            return Score(0.0, False, f"called forbidden {_names(used)}")
        return Score(1.0, True, f"called none of {_names(sorted(names))}")

    return Scorer(name, score)


def max_latency(seconds: float, *, name: str = "max_latency") -> Scorer:
    """Passes when the run took at most ``seconds``; the value is 1 within the bound and
    ``seconds / took`` beyond it."""
    limit_ms = _positive(seconds, "max_latency seconds") * 1000

    def score(outcome: CaseOutcome) -> Score:
        took = outcome.duration_ms
        return _bounded(took, limit_ms, f"took {took:.0f} ms, limit {limit_ms:.0f} ms")

    return Scorer(name, score)


def max_tokens(limit: int, *, kind: TokenKind = "total", name: str = "max_tokens") -> Scorer:
    """Passes when the run used at most ``limit`` tokens of ``kind`` (``total``: the
    reported total, or input plus output when no total is reported); a run whose models
    reported none fails. The value is 1 within the bound and ``limit / used`` beyond."""
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise _invalid(f"max_tokens limit must be a whole number of 0 or more, not {limit!r}.")
    if kind not in ("total", "input", "output"):
        raise _invalid(f"max_tokens kind must be 'total', 'input' or 'output', not {kind!r}.")

    def score(outcome: CaseOutcome) -> Score:
        used = _tokens(outcome.usage, kind)
        if used is None:
            return Score(0.0, False, f"the model reported no {kind} tokens")
        return _bounded(used, limit, f"used {used} {kind} tokens, limit {limit}")

    return Scorer(name, score)


def max_cost(limit: float, *, cost: CostFunction | None = None, name: str = "max_cost") -> Scorer:
    """Passes when the run cost at most ``limit``: what the app's
    ``Observability(calculate_cost=)`` priced its model steps at or, given ``cost(usage,
    model)``, the sum of that function's prices of the usage on each model. The value is 1
    within the bound and ``limit / cost`` beyond it; a run nothing priced fails it."""
    bound = _non_negative(limit, "max_cost limit")
    if cost is not None and not callable(cost):
        raise _invalid("max_cost takes cost=: a function (usage, model) -> amount, or None.")

    def score(outcome: CaseOutcome) -> Score:
        if cost is None:
            if outcome.cost is None:
                return Score(
                    0.0,
                    False,
                    "no model step was priced: give the app Observability(calculate_cost=) "
                    "or max_cost(cost=)",
                )
            return _bounded(outcome.cost, bound, f"cost {outcome.cost:.6g}, limit {bound:.6g}")
        total = 0.0
        for model, usage in sorted(outcome.usage_by_model.items()):
            amount = cost(usage, model)
            if (
                not isinstance(amount, int | float)
                or isinstance(amount, bool)
                or not math.isfinite(amount)
                or amount < 0
            ):
                return Score(0.0, False, f"cost() returned {amount!r} for model {model!r}")
            total += amount
        return _bounded(total, bound, f"cost {total:.6g}, limit {bound:.6g}")

    return Scorer(name, score)


def json_equal(left: Any, right: Any) -> bool:
    """Equality as JSON means it: numbers by value, ``true`` never ``1``, objects by keys."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, str) or isinstance(right, str) or left is None or right is None:
        return type(left) is type(right) and left == right
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return len(left) == len(right) and all(map(json_equal, left, right))
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    return False


def _bounded(amount: float, limit: float, reason: str) -> Score:
    if amount <= limit:
        return Score(1.0, True, reason)
    return Score(limit / amount, False, reason)


def _tokens(usage: Usage, kind: TokenKind) -> int | None:
    if kind == "input":
        return usage.input_tokens
    if kind == "output":
        return usage.output_tokens
    if usage.total_tokens is not None:
        return usage.total_tokens
    if usage.input_tokens is None and usage.output_tokens is None:
        return None
    return (usage.input_tokens or 0) + (usage.output_tokens or 0)


def _common_subsequence(left: Sequence[str], right: Sequence[str]) -> int:
    previous = [0] * (len(right) + 1)
    for item in left:
        current = [0]
        for index, other in enumerate(right):
            current.append(
                previous[index] + 1 if item == other else max(previous[index + 1], current[-1])
            )
        previous = current
    return previous[-1]


def _tool_names(tools: Iterable[str], what: str) -> set[str]:
    if isinstance(tools, str):
        raise _invalid(f"{what} takes a list of tool names, not the string {tools!r}.")
    names = set(tools)
    if not all(isinstance(tool, str) and tool for tool in names):
        raise _invalid(f"{what} takes a list of tool names.")
    return names


def _positive(value: float, what: str) -> float:
    if _non_negative(value, what) == 0:
        raise _invalid(f"{what} must be more than 0.")
    return float(value)


def _non_negative(value: float, what: str) -> float:
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value < 0
    ):
        raise _invalid(f"{what} must be a finite number of 0 or more, not {value!r}.")
    return float(value)


def _names(tools: Sequence[str]) -> str:
    return "[" + ", ".join(tools) + "]"


def _brief(value: Any, limit: int = 120) -> str:
    try:
        text = canonical_json(value)
    except TypeError:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _invalid(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("INVALID_ARGUMENT", message)
