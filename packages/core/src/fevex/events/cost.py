"""What a run's model steps cost, priced by the application.

One function prices both live runs and stored ones: ``calculate_cost(usage, model)`` gets
one model step's token usage and the model that answered it, and returns a :class:`Cost`
or ``None`` (not priced). Live (``Observability(calculate_cost=...)``), a step's cost is
committed on its ``model.completed`` event, the run's total on ``run.completed``;
``project_run(events, calculate_cost=...)`` prices a stored run's steps the same way. Both
names are also exported by :mod:`fevex.observability`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from fevex.models import Usage

__all__ = ["Cost", "CostCalculator", "total_cost"]


@dataclass(frozen=True, slots=True)
class Cost:
    """An amount of money in one currency (an ISO 4217 code such as ``"USD"``)."""

    amount: float
    currency: str

    def __add__(self, other: Cost) -> Cost:
        """The sum of two costs of one currency; ``ValueError`` for two currencies, which
        fevex never converts."""
        if not isinstance(other, Cost):
            return NotImplemented
        if other.currency != self.currency:
            raise ValueError(f"cannot add {other.currency} to {self.currency}")
        return Cost(self.amount + other.amount, self.currency)

    def to_json(self) -> dict[str, Any]:
        return {"amount": self.amount, "currency": self.currency}

    @classmethod
    def from_json(cls, data: Any) -> Cost | None:
        """The cost an event payload records; ``None`` for anything else."""
        if not isinstance(data, Mapping):
            return None
        return checked_cost(Cost(data.get("amount"), data.get("currency")))  # type: ignore[arg-type]


# ``calculate_cost(usage, model)``: ``model`` is the model's name (its ``model_name``, or
# the agent's model reference), ``None`` when the events do not record it.
CostCalculator: TypeAlias = Callable[[Usage, str | None], Cost | None]


def checked_cost(value: Any) -> Cost | None:
    """``value`` when it is a usable cost (a finite amount, a currency code), else ``None``."""
    if not isinstance(value, Cost):
        return None
    amount, currency = value.amount, value.currency
    if isinstance(amount, bool) or not isinstance(amount, int | float) or not math.isfinite(amount):
        return None
    if not isinstance(currency, str) or not currency:
        return None
    return value


def total_cost(costs: Iterable[Cost | None]) -> Cost | None:
    """The sum of the costs given (``None`` entries are not priced); ``None`` when none is
    a cost, or when they are in several currencies."""
    total: Cost | None = None
    for cost in costs:
        if cost is None:
            continue
        if total is None:
            total = cost
        elif cost.currency != total.currency:
            return None
        else:
            total = total + cost
    return total
