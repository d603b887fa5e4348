"""The four views of a run, projected from the events of real runs driven by a FakeModel."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from fevex import (
    Fevex,
    FevexRunError,
    RunCancelledError,
    RunEvent,
    ToolDefinition,
    create_fevex,
    define_agent,
    define_tool,
)
from fevex.events import (
    Cost,
    StateTransition,
    TextDelta,
    ToolCallRequested,
    ToolResultReceived,
    project_run,
)
from fevex.messages import ContentPart, ImagePart, Message, TextPart, ToolCallPart, ToolResultPart
from fevex.models import Usage
from fevex.testing import FakeModel


@dataclasses.dataclass
class AccountQuery:
    account_id: int


@define_tool
def accounts_get(query: AccountQuery) -> dict[str, Any]:
    """Look up an account."""
    return {"account_id": query.account_id, "status": "active"}


@define_tool(name="accounts_get")
def broken_accounts_get(query: AccountQuery) -> dict[str, Any]:
    """Look up an account, while the ledger is down."""
    raise RuntimeError("ledger offline")


@define_tool
async def accounts_history(query: AccountQuery) -> list[str]:
    """An account's history, slower than any run waits."""
    await asyncio.sleep(30)
    return []


QUESTION = "Is account 42 active?"
ANSWER = "Account 42 is active."
CALL_42 = {"id": "call-1", "name": "accounts_get", "input": {"account_id": 42}}
CALL_7 = {"id": "call-2", "name": "accounts_get", "input": {"account_id": 7}}
USAGE_1 = {"input_tokens": 10, "output_tokens": 3, "total_tokens": 13}
USAGE_2 = {"input_tokens": 20, "output_tokens": 6, "total_tokens": 26}
TOOL_STEP = {"tool_calls": [CALL_42], "usage": USAGE_1}
ANSWER_STEP = {"output": ANSWER, "usage": USAGE_2}

ASKED_42 = ToolCallPart("call-1", "accounts_get", {"account_id": 42})
ANSWERED_42 = ToolResultPart("call-1", "accounts_get", {"account_id": 42, "status": "active"})


def _app(
    *responses: dict[str, Any],
    chunk_size: int | None = None,
    tools: Sequence[ToolDefinition] = (accounts_get,),
    on_event: Callable[[RunEvent], Any] | None = None,
) -> Fevex:
    agent = define_agent(
        name="support",
        instructions="Answer account questions.",
        tools=[tool.name for tool in tools],
    )
    return create_fevex(
        models={"default": FakeModel(*responses, chunk_size=chunk_size)},
        agents=[agent],
        tools=tools,
        on_event=on_event,
    )


def _price(usage: Usage, model: str | None) -> Cost:
    # Binary fractions, so the expected amounts are exact.
    return Cost((usage.input_tokens or 0) * 0.25 + (usage.output_tokens or 0) * 1.0, "USD")


def _milliseconds_between(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)) / timedelta(milliseconds=1)


def _states(transitions: Sequence[StateTransition]) -> list[tuple[Any, ...]]:
    return [(t.state, t.sequence, t.step, t.tool_call_id) for t in transitions]


async def _completed_run_events() -> tuple[RunEvent, ...]:
    app = _app(TOOL_STEP, ANSWER_STEP, chunk_size=4)
    result = await app.run_agent("support", QUESTION)
    return result.events


@pytest.mark.anyio
async def test_a_completed_run_projects_into_every_layer() -> None:
    app = _app(TOOL_STEP, ANSWER_STEP, chunk_size=4)
    result = await app.run_agent("support", QUESTION)
    events = result.events
    # The sequences below are the ones this run commits.
    assert [e.type for e in events] == [
        "run.started",
        "model.started",
        "model.completed",
        "tool.started",
        "tool.completed",
        "model.started",
        *["model.output.delta"] * 6,
        "model.completed",
        "run.completed",
    ]
    priced: list[tuple[Usage, str | None]] = []

    def price(usage: Usage, model: str | None) -> Cost:
        priced.append((usage, model))
        return _price(usage, model)

    view = project_run(events, calculate_cost=price)

    assert view.run_id == result.run_id
    assert view.stream == (
        ToolCallRequested(3, 1, ASKED_42),
        ToolResultReceived(5, 1, ANSWERED_42),
        TextDelta(7, 2, "Acco"),
        TextDelta(8, 2, "unt "),
        TextDelta(9, 2, "42 i"),
        TextDelta(10, 2, "s ac"),
        TextDelta(11, 2, "tive"),
        TextDelta(12, 2, "."),
    )
    assert _states(view.state) == [
        ("started", 1, None, None),
        ("thinking", 2, 1, None),
        ("tool_planned", 3, 1, "call-1"),
        ("tool_executing", 4, 1, "call-1"),
        ("tool_completed", 5, 1, "call-1"),
        ("thinking", 6, 2, None),
        ("responding", 7, 2, None),
        ("completed", 14, None, None),
    ]
    assert [t.occurred_at for t in view.state] == [
        events[t.sequence - 1].occurred_at for t in view.state
    ]
    assert view.messages == (
        Message.user(QUESTION),
        Message("assistant", (ASKED_42,)),
        Message("tool", (ANSWERED_42,)),
        Message.assistant(ANSWER),
    )

    turn = view.turn
    assert turn is not None
    assert turn.run_id == result.run_id
    assert turn.status == "completed"
    assert turn.request == Message.user(QUESTION)
    assert turn.response == Message.assistant(ANSWER)
    assert turn.usage == Usage(30, 9, 39) == result.usage
    # Each model step is priced with its own usage and model; the turn costs their sum.
    assert priced == [(Usage(10, 3, 13), "default"), (Usage(20, 6, 26), "default")]
    assert turn.cost == Cost(16.5, "USD")
    assert (turn.steps, turn.tool_calls, turn.error) == (2, 1, None)
    assert (turn.started_at, turn.ended_at) == (events[0].occurred_at, events[-1].occurred_at)
    assert turn.duration_ms >= 0
    assert turn.duration_ms == _milliseconds_between(events[0].occurred_at, events[-1].occurred_at)


@pytest.mark.anyio
async def test_the_stored_events_give_the_same_view_as_the_run_result() -> None:
    app = _app(TOOL_STEP, ANSWER_STEP, chunk_size=4)
    result = await app.run_agent("support", QUESTION)

    stored = project_run(await app.list_events(result.run_id), calculate_cost=_price)

    assert stored == project_run(result.events, calculate_cost=_price)
    assert stored.turn is not None
    assert stored.turn.response == Message.assistant(ANSWER)


@pytest.mark.anyio
async def test_a_live_run_has_no_turn_until_it_ends_and_only_complete_messages() -> None:
    app = _app(TOOL_STEP, ANSWER_STEP, chunk_size=4)
    seen: list[RunEvent] = []
    views = []
    async for event in app.stream_agent("support", QUESTION):
        seen.append(event)
        views.append(project_run(seen))

    assert [v.turn is None for v in views] == [True] * (len(seen) - 1) + [False]
    final = views[-1]
    for view in views:
        assert final.stream[: len(view.stream)] == view.stream
        assert final.state[: len(view.state)] == view.state

    after_tool = views[4]  # tool.completed: the step's tool message is still open
    assert after_tool.state[-1].state == "tool_completed"
    assert after_tool.stream[-1] == ToolResultReceived(5, 1, ANSWERED_42)
    assert after_tool.messages == (Message.user(QUESTION), Message("assistant", (ASKED_42,)))

    first_delta = views[6]  # the next step started, which closed the tool message
    assert first_delta.state[-1] == StateTransition("responding", 7, seen[6].occurred_at, step=2)
    assert first_delta.stream[-1] == TextDelta(7, 2, "Acco")
    assert first_delta.messages == (
        Message.user(QUESTION),
        Message("assistant", (ASKED_42,)),
        Message("tool", (ANSWERED_42,)),
    )


@pytest.mark.anyio
async def test_a_failed_tool_fails_the_turn_and_keeps_the_error_as_a_tool_result() -> None:
    seen: list[RunEvent] = []
    app = _app(TOOL_STEP, tools=(broken_accounts_get,), on_event=seen.append)

    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("support", QUESTION)
    assert caught.value.code == "TOOL_FAILED"
    events = await app.list_events(seen[0].run_id)
    view = project_run(events, calculate_cost=_price)

    assert [e.type for e in events][-2:] == ["tool.failed", "run.failed"]
    error = events[4].payload["error"]
    assert error["code"] == "TOOL_FAILED"
    failed_result = ToolResultPart("call-1", "accounts_get", error, is_error=True)
    assert view.stream == (
        ToolCallRequested(3, 1, ASKED_42),
        ToolResultReceived(5, 1, failed_result),
    )
    assert _states(view.state) == [
        ("started", 1, None, None),
        ("thinking", 2, 1, None),
        ("tool_planned", 3, 1, "call-1"),
        ("tool_executing", 4, 1, "call-1"),
        ("tool_failed", 5, 1, "call-1"),
        ("failed", 6, None, None),
    ]
    assert view.messages == (
        Message.user(QUESTION),
        Message("assistant", (ASKED_42,)),
        Message("tool", (failed_result,)),
    )
    turn = view.turn
    assert turn is not None
    assert turn.status == "failed"
    assert turn.error is not None
    assert turn.error["code"] == "TOOL_FAILED"
    assert "ledger offline" in turn.error["message"]
    assert turn.response == Message("assistant", (ASKED_42,))
    assert turn.usage == Usage(10, 3, 13)
    assert turn.cost == Cost(5.5, "USD")
    assert (turn.steps, turn.tool_calls) == (1, 1)
    assert turn.duration_ms == _milliseconds_between(events[0].occurred_at, events[-1].occurred_at)


@pytest.mark.anyio
async def test_a_cancelled_run_sums_the_usage_of_its_steps() -> None:
    seen: list[RunEvent] = []
    history_call = {"id": "call-2", "name": "accounts_history", "input": {"account_id": 42}}
    app = _app(
        TOOL_STEP,
        {"tool_calls": [history_call], "usage": USAGE_2},
        tools=(accounts_get, accounts_history),
        on_event=seen.append,
    )

    with pytest.raises(RunCancelledError):
        await app.run_agent("support", QUESTION, timeout=0.2)
    events = await app.list_events(seen[0].run_id)
    view = project_run(events)

    assert events[-1].payload == {"reason": "timeout"}
    assert _states(view.state)[-2:] == [
        ("tool_executing", 8, 2, "call-2"),
        ("cancelled", 9, None, None),
    ]
    # The second call started but never answered: no tool message for it.
    asked_history = ToolCallPart("call-2", "accounts_history", {"account_id": 42})
    assert view.messages == (
        Message.user(QUESTION),
        Message("assistant", (ASKED_42,)),
        Message("tool", (ANSWERED_42,)),
        Message("assistant", (asked_history,)),
    )
    turn = view.turn
    assert turn is not None
    assert turn.status == "cancelled"
    assert turn.response == Message("assistant", (asked_history,))
    assert turn.usage == Usage(30, 9, 39)
    assert turn.cost is None
    assert turn.error is None
    assert (turn.steps, turn.tool_calls) == (2, 2)
    assert turn.duration_ms >= 200 * 0.9


@pytest.mark.anyio
async def test_the_calls_of_one_step_share_one_tool_message() -> None:
    app = _app({"tool_calls": [CALL_42, CALL_7], "usage": USAGE_1}, ANSWER_STEP)
    result = await app.run_agent("support", QUESTION)
    view = project_run(result.events)

    asked_7 = ToolCallPart("call-2", "accounts_get", {"account_id": 7})
    answered_7 = ToolResultPart("call-2", "accounts_get", {"account_id": 7, "status": "active"})
    assert view.messages == (
        Message.user(QUESTION),
        Message("assistant", (ASKED_42, asked_7)),
        Message("tool", (ANSWERED_42, answered_7)),
        Message.assistant(ANSWER),
    )
    assert view.stream[:4] == (
        ToolCallRequested(3, 1, ASKED_42),
        ToolCallRequested(3, 1, asked_7),
        ToolResultReceived(5, 1, ANSWERED_42),
        ToolResultReceived(7, 1, answered_7),
    )
    planned = [t.tool_call_id for t in view.state if t.state == "tool_planned"]
    assert planned == ["call-1", "call-2"]
    assert view.turn is not None
    assert view.turn.tool_calls == 2


@pytest.mark.anyio
async def test_content_part_input_becomes_the_request_message() -> None:
    app = _app({"output": "A library card.", "usage": USAGE_1})
    parts: list[ContentPart] = [
        TextPart("What is on this card?"),
        ImagePart("image/png", url="https://x.test/c.png"),
    ]
    result = await app.run_agent("support", parts)

    view = project_run(result.events, calculate_cost=lambda usage, model: None)

    assert view.messages == (Message.user(parts), Message.assistant("A library card."))
    assert view.turn is not None
    assert view.turn.request == Message.user(parts)
    assert view.turn.cost is None
    assert (view.turn.steps, view.turn.tool_calls) == (1, 0)
    assert [t.state for t in view.state] == ["started", "thinking", "responding", "completed"]


def _mixed(events: tuple[RunEvent, ...]) -> list[RunEvent]:
    return [*events[:-1], dataclasses.replace(events[-1], run_id="run_other")]


def _after_the_end(events: tuple[RunEvent, ...]) -> list[RunEvent]:
    extra = dataclasses.replace(events[-1], id="evt_extra", sequence=len(events) + 1)
    return [*events, extra]


INVALID: dict[str, Callable[[tuple[RunEvent, ...]], Sequence[RunEvent]]] = {
    "mixed runs": _mixed,
    "a gap": lambda events: [*events[:2], *events[3:]],
    "out of order": lambda events: [events[0], events[2], events[1], *events[3:]],
    "not from the start": lambda events: events[1:],
    "a second start": lambda events: [
        *events[:5],
        dataclasses.replace(events[5], type="run.started"),
        *events[6:],
    ],
    "events after the end": _after_the_end,
    "no events": lambda events: [],
    "a malformed payload": lambda events: [events[0], dataclasses.replace(events[1], payload={})],
}


@pytest.mark.anyio
@pytest.mark.parametrize("change", INVALID.values(), ids=INVALID.keys())
async def test_invalid_event_lists_are_rejected(
    change: Callable[[tuple[RunEvent, ...]], Sequence[RunEvent]],
) -> None:
    events = await _completed_run_events()
    project_run(events)  # the untouched run projects

    with pytest.raises(FevexRunError) as caught:
        project_run(change(events))
    assert caught.value.code == "INVALID_EVENTS"


def test_a_json_input_is_the_request_as_json_text() -> None:
    # A workflow's, a team's or a schema agent's input: the JSON the engine hands on.
    started = RunEvent(
        id="e1",
        run_id="r1",
        sequence=1,
        type="run.started",
        occurred_at="2026-01-01T00:00:00.000000Z",
        payload={"input": {"account_id": 7, "amount": 12}},
    )
    view = project_run([started])
    assert view.messages[0].text == '{"account_id": 7, "amount": 12}'
