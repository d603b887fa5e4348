"""Sessions: history of completed runs, compaction, one run at a time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fevex import Fevex, FevexRunError, create_fevex, define_agent
from fevex.messages import TextPart
from fevex.models import Completed, ModelInput, ModelResult, OutputDelta
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio


def make_app(model: Any) -> Fevex:
    return create_fevex(
        models={"default": model},
        agents=[define_agent(name="support", instructions="Help.")],
        run_store=InMemoryRunStore(),
    )


def texts(model_input: ModelInput) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in model_input.messages]


async def test_a_session_carries_completed_runs_into_the_next_prompt() -> None:
    model = FakeModel({"output": "Account 42 is active."}, {"output": "Nothing."})
    app = make_app(model)
    first = await app.run_agent("support", "What is the status of account 42?")
    second = await app.run_agent("support", "What should I do next?", session_id=first.session_id)
    assert second.session_id == first.session_id
    assert texts(model.calls[1]) == [
        ("system", "Help."),
        ("user", "What is the status of account 42?"),
        ("assistant", "Account 42 is active."),
        ("user", "What should I do next?"),
    ]
    session = await app.get_session(first.session_id)
    assert [m.text for m in session.messages()] == [
        "What is the status of account 42?",
        "Account 42 is active.",
        "What should I do next?",
        "Nothing.",
    ]


async def test_failed_and_cancelled_runs_stay_out_of_history() -> None:
    model = FakeModel({"output": "first"}, RuntimeError("down"), {"output": "third"})
    app = make_app(model)
    first = await app.run_agent("support", "one")
    with pytest.raises(FevexRunError):
        await app.run_agent("support", "two", session_id=first.session_id)
    await app.run_agent("support", "three", session_id=first.session_id)
    assert texts(model.calls[2])[1:] == [
        ("user", "one"),
        ("assistant", "first"),
        ("user", "three"),
    ]


async def test_compaction_replaces_history_with_a_summary() -> None:
    model = FakeModel({"output": "first"}, {"output": "second"})
    app = make_app(model)
    first = await app.run_agent("support", "one")
    before = await app.get_session(first.session_id)
    compacted = await app.compact_session(first.session_id, "The user said one.")
    assert compacted.history == ()
    assert compacted.revision == before.revision + 1
    await app.run_agent("support", "two", session_id=first.session_id)
    assert texts(model.calls[1]) == [
        ("system", "Help."),
        ("system", "Summary of the conversation so far:\nThe user said one."),
        ("user", "two"),
    ]


async def test_compaction_rejects_a_stale_snapshot() -> None:
    model = FakeModel({"output": "first"}, {"output": "second"})
    app = make_app(model)
    first = await app.run_agent("support", "one")
    snapshot = await app.get_session(first.session_id)
    await app.run_agent("support", "two", session_id=first.session_id)
    with pytest.raises(FevexRunError) as caught:
        await app.compact_session(first.session_id, "old summary", revision=snapshot.revision)
    assert caught.value.code == "SESSION_CONFLICT"
    assert len((await app.get_session(first.session_id)).history) == 4


class Blocking:
    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.called = asyncio.Event()
        self.calls = 0

    async def stream(self, input: ModelInput) -> AsyncIterator[Any]:
        self.calls += 1
        self.called.set()
        await self.gate.wait()
        yield OutputDelta("done")
        yield Completed(ModelResult(output="done"))


async def test_one_run_at_a_time_per_session() -> None:
    model = Blocking()
    app = make_app(model)
    running = await app.start_agent("support", "one")
    await asyncio.wait_for(model.called.wait(), 10)  # a hang guard, not a measurement
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("support", "two", session_id=running.session_id)
    assert caught.value.code == "RUN_CONFLICT"
    with pytest.raises(FevexRunError) as caught:
        await app.compact_session(running.session_id, "summary")
    assert caught.value.code == "RUN_CONFLICT"
    assert model.calls == 1
    model.gate.set()
    async with asyncio.timeout(10):  # a hang guard: following ends with the run
        ended = [event.type async for event in app.follow_events(running.id, poll_interval=0.01)]
    assert ended[-1] == "run.completed"
    assert (await app.get_run(running.id)).status == "completed"
    model.gate.set()
    await app.run_agent("support", "two", session_id=running.session_id)


async def test_concurrent_runs_racing_for_one_session_have_one_winner() -> None:
    model = Blocking()
    app = make_app(model)
    seed = FakeModel({"output": "seed"})
    seeded = create_fevex(
        models={"default": seed},
        agents=[define_agent(name="support", instructions="Help.")],
        run_store=app.run_store,
    )
    session_id = (await seeded.run_agent("support", "seed")).session_id
    racers = [
        asyncio.ensure_future(app.run_agent("support", f"run {i}", session_id=session_id))
        for i in range(100)
    ]
    for _ in range(5):
        await asyncio.sleep(0)
    assert sum(racer.done() for racer in racers) == 99
    model.gate.set()
    outcomes = await asyncio.gather(*racers, return_exceptions=True)
    winners = [o for o in outcomes if not isinstance(o, BaseException)]
    losers = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(winners) == 1
    assert all(isinstance(o, FevexRunError) and o.code == "RUN_CONFLICT" for o in losers)
    assert model.calls == 1


async def test_session_lookups() -> None:
    app = make_app(FakeModel({"output": "x"}))
    with pytest.raises(FevexRunError) as caught:
        await app.get_session("missing")
    assert caught.value.code == "SESSION_NOT_FOUND"
    result = await app.run_agent("support", [TextPart("chosen id")], session_id="conversation-7")
    assert result.session_id == "conversation-7"
