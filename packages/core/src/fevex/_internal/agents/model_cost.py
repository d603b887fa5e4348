"""The price of one model call, and a run's total: what the agent loop and the
completions its tools ask for (:mod:`fevex._internal.agents.tool_completions`) share.

A price function that raises or returns something else than a ``Cost`` leaves the call
unpriced (logged at WARNING); it never changes the run. fevex never converts currencies:
a run's total stays in its first one.
"""

from __future__ import annotations

import logging

from fevex._internal.agents.run_state import RunState
from fevex.events.cost import Cost, CostCalculator, checked_cost
from fevex.models import Usage

__all__ = ["add_cost", "price"]

logger = logging.getLogger("fevex")


def price(
    calculate_cost: CostCalculator, usage: Usage, model_name: str, run_id: str
) -> Cost | None:
    """The application's price of one call's ``usage`` on ``model_name``; ``None`` when it
    has none."""
    try:
        cost = calculate_cost(usage, model_name)
    except Exception as error:
        logger.warning(
            "Run %s: calculate_cost raised %s; the model step has no cost",
            run_id,
            type(error).__name__,
            extra={"run_id": run_id},
        )
        return None
    checked = checked_cost(cost)
    if checked is None and cost is not None:
        logger.warning(
            "Run %s: calculate_cost returned a %s, not a Cost with a finite amount and a "
            "currency; the model step has no cost",
            run_id,
            type(cost).__name__,
            extra={"run_id": run_id},
        )
    return checked


def add_cost(state: RunState, cost: Cost, run_id: str) -> None:
    """Add one call's ``cost`` to the run's total."""
    if state.cost is None:
        state.cost = cost
    elif state.cost.currency == cost.currency:
        state.cost = state.cost + cost
    else:
        logger.warning(
            "Run %s: a model step cost %s, the run's total is in %s; it is not added",
            run_id,
            cost.currency,
            state.cost.currency,
            extra={"run_id": run_id},
        )
