"""The price of one model call, a run's total, and its token budgets: what the agent
loop and the completions its tools ask for (:mod:`fevex._internal.agents.tool_completions`)
share.

A price function that raises or returns something else than a ``Cost`` leaves the call
unpriced (logged at WARNING); it never changes the run. fevex never converts currencies:
a run's total stays in its first one.
"""

from __future__ import annotations

import logging

from fevex._internal.agents.run_state import RunState
from fevex.agents import Limits
from fevex.errors import FevexRunError
from fevex.events.cost import Cost, CostCalculator, checked_cost
from fevex.models import Usage

__all__ = ["add_cost", "check_token_budgets", "price", "remaining_output_tokens"]

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


def remaining_output_tokens(limits: Limits, state: RunState) -> int | None:
    """The output tokens the run may still use (``None``: no budget);
    ``MAX_OUTPUT_TOKENS_EXCEEDED`` when none are left."""
    limit = limits.max_output_tokens
    if limit is None:
        return None
    remaining = limit - (state.usage.output_tokens or 0)
    if remaining <= 0:
        raise FevexRunError(
            "MAX_OUTPUT_TOKENS_EXCEEDED",
            f"The run used its output token budget of {limit}.",
            details={"limit": limit},
        )
    return remaining


def check_token_budgets(limits: Limits, state: RunState, step_usage: Usage) -> None:
    """After a model call: its usage reported where the run has a budget, and the run's
    totals within them."""
    usage = state.usage
    for limit, reported, total, name in (
        (limits.max_input_tokens, step_usage.input_tokens, usage.input_tokens, "input"),
        (limits.max_output_tokens, step_usage.output_tokens, usage.output_tokens, "output"),
    ):
        if limit is None:
            continue
        if reported is None:
            raise FevexRunError(
                "USAGE_NOT_REPORTED",
                f"The agent limits {name} tokens, but the model did not report "
                f"{name}_tokens usage.",
                details={},
            )
        if total is not None and total > limit:
            raise FevexRunError(
                f"MAX_{name.upper()}_TOKENS_EXCEEDED",
                f"The run used {total} {name} tokens, over its budget of {limit}.",
                details={"limit": limit, "used": total},
            )
