"""Validation is linear in the size of the value: a large or hostile value, in a response or
in tool input, is answered within the call's timeout instead of holding the event loop.

Each run goes through :func:`finishes_within`: a check that holds the loop cannot be timed
out from that loop, so the guard watches from another thread. Its bound is generous sanity,
not a benchmark; the outcomes asserted are the point.
"""

from __future__ import annotations

import asyncio
from typing import Any

from openapi_agent_runs import RecordedRun, agent_app, call, finishes_within, recorded_run

from fevex.testing import FakeModel

# Far above an honest run on a loaded machine, far below the minutes a quadratic check takes.
HANG_GUARD_S = 30.0
TIMEOUT_CODES = {"CONNECTION_TIMEOUT", "RUN_TIMEOUT", "OPENAPI_TIMEOUT"}
# Python's re takes 2**40 steps to find that this does not match ^(a+)+$.
BACKTRACKING = "a" * 40 + "!"


def run_clerk(
    billing: Any,
    tool: str,
    input: dict[str, Any],
    *,
    connection_timeout: float = 30.0,
    run_timeout: float | None = None,
) -> RecordedRun:
    async def run() -> RecordedRun:
        model = FakeModel(call(f"billing__{tool}", input), {"output": "Done."})
        app = agent_app(billing, model, [tool], connection_timeout=connection_timeout)
        return await recorded_run(app, "Go.", timeout=run_timeout)

    return finishes_within(HANG_GUARD_S, lambda: asyncio.run(run()))


def test_a_20000_integer_response_with_unique_items_is_checked_within_the_timeout(
    billing: Any,
) -> None:
    billing.state["values"] = list(range(20_000))

    recorded = run_clerk(billing, "getNumbers", {}, connection_timeout=2.0)

    if recorded.error is None:
        (output,) = recorded.tool_outputs
        assert output["values"] == list(range(20_000))
    else:  # a loaded machine may run out of the 2 s; then the timeout is what answers
        assert recorded.error.code in TIMEOUT_CODES


def test_a_repeated_item_in_a_large_response_is_found(billing: Any) -> None:
    # 1.0 is the same JSON number as 1, far from it in the array.
    billing.state["values"] = [*range(20_000), 1.0]

    recorded = run_clerk(billing, "getNumbers", {})

    assert recorded.error is not None
    assert recorded.error.code == "OPENAPI_RESPONSE_INVALID"
    assert "response.values: items are not unique" in recorded.error.message


def test_6000_unique_items_of_tool_input_are_checked_within_the_run_timeout(
    billing: Any,
) -> None:
    # Items alike but for their last element: each of the quadratic check's 18 million
    # comparisons walked a whole item.
    rows = [[0] * 10 + [index] for index in range(6_000)]

    recorded = run_clerk(billing, "createBatch", {"body": {"rows": rows}}, run_timeout=2.0)

    if recorded.error is None:
        assert recorded.tool_outputs == [{"rows": 6_000}]
    else:
        assert recorded.error.code in TIMEOUT_CODES


def test_a_backtracking_pattern_in_a_response_schema_is_answered_promptly(
    billing: Any,
) -> None:
    billing.state["label"] = BACKTRACKING

    recorded = run_clerk(billing, "getLatestLabel", {})

    assert recorded.error is not None
    assert recorded.error.code == "OPENAPI_RESPONSE_INVALID"
    assert "response.text: does not match the pattern" in recorded.error.message


def test_a_backtracking_pattern_in_an_input_schema_is_answered_promptly(billing: Any) -> None:
    recorded = run_clerk(billing, "createLabel", {"body": {"text": BACKTRACKING}})

    assert recorded.error is not None
    # The core checks connection tool input first, with the same engine.
    assert recorded.error.code == "TOOL_INPUT_INVALID"
    assert "value.body.text: does not match the pattern" in recorded.error.message
    assert billing.seen == []


def test_a_value_the_pattern_matches_is_accepted(billing: Any) -> None:
    recorded = run_clerk(billing, "createLabel", {"body": {"text": "aaaa"}})

    assert recorded.error is None
    assert recorded.tool_outputs == [{"text": "aaaa"}]
