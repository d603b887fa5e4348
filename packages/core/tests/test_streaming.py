"""Streaming with backpressure, background runs, cancellation, timeouts and observers."""

from __future__ import annotations

import asyncio
import gc
import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fevex import (
    Fevex,
    FevexRunError,
    RunCancelledError,
    RunEvent,
    create_fevex,
    define_agent,
    define_tool,
)
from fevex.models import Completed, ModelInput, ModelResult, OutputDelta
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio


class GatedModel:
    """Streams one delta, then waits for the test to open the gate."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started = asyncio.Event()
        self.closed = False

    async def stream(self, input: ModelInput) -> AsyncIterator[Any]:
        try:
            self.started.set()
            yield OutputDelta("Hel")
            await self.gate.wait()
            yield OutputDelta("lo")
            yield Completed(ModelResult(output="Hello"))
        finally:
            self.closed = True


def make_app(model: Any, **options: Any) -> Fevex:
    return create_fevex(
        models={"default": model},
        agents=[define_agent(name="support", instructions="Help.")],
        run_store=InMemoryRunStore(),
        **options,
    )


async def test_the_run_advances_only_as_the_consumer_asks() -> None:
    model = FakeModel({"output": "Hello world"}, chunk_size=5)
    app = make_app(model)
    stream = app.stream_agent("support", "hi")
    first = await anext(stream)
    assert first.type == "run.started"
    assert model.calls == []
    second = await anext(stream)
    assert second.type == "model.started"
    assert model.calls == []
    third = await anext(stream)
    assert third.payload == {"step": 1, "delta": "Hello"}
    events = await app.list_events(first.run_id)
    assert [e.type for e in events] == ["run.started", "model.started", "model.output.delta"]
    rest = [event async for event in stream]
    assert [e.payload.get("delta") for e in rest if e.type == "model.output.delta"] == [
        " worl",
        "d",
    ]
    assert rest[-1].type == "run.completed"


async def test_abandoning_the_stream_cancels_and_persists_the_run() -> None:
    model = GatedModel()
    app = make_app(model)
    stream = app.stream_agent("support", "hi")
    run_id = ""
    async for event in stream:
        run_id = event.run_id
        if event.type == "model.output.delta":
            break
    await stream.aclose()
    run = await app.get_run(run_id)
    assert run.status == "cancelled"
    events = await app.list_events(run_id)
    assert events[-1].type == "run.cancelled"
    assert events[-1].payload == {"reason": "aborted"}
    assert model.closed
    session = await app.get_session(run.session_id)
    assert session.active_run_id is None


async def test_closing_the_stream_after_its_opening_event_cancels_the_run() -> None:
    entered: list[str] = []

    @define_tool(name="effect", description="An effect the caller abandons.")
    async def effect(request: dict[str, Any]) -> dict[str, Any]:
        entered.append("effect")
        return {}

    app = create_fevex(
        models={
            "default": FakeModel(
                {"tool_calls": [{"id": "c1", "name": "effect", "input": {}}]}, {"output": "x"}
            )
        },
        agents=[define_agent(name="support", instructions="Help.", tools=["effect"])],
        tools=[effect],
        run_store=InMemoryRunStore(),
    )
    stream = app.stream_agent("support", "hi")
    first = await anext(stream)
    assert first.type == "run.started"
    await stream.aclose()
    run = await app.get_run(first.run_id)
    assert run.status == "cancelled"
    assert (await app.list_events(run.id))[-1].type == "run.cancelled"
    assert (await app.get_session(run.session_id)).active_run_id is None
    assert entered == []
    # The session is free for the next run, and nothing is left for recovery to execute.
    assert (await app.run_agent("support", "again", session_id=run.session_id)).output == "x"
    assert entered == ["effect"]
    with pytest.raises(FevexRunError) as caught:
        await app.recover_run(run.id, actor={"id": "x"})
    assert caught.value.code == "RUN_CONFLICT"


async def test_dropping_the_stream_without_closing_it_also_cancels() -> None:
    app = make_app(GatedModel())
    stream = app.stream_agent("support", "hi")
    run_id = (await anext(stream)).run_id
    await anext(stream)
    del stream
    gc.collect()
    for _ in range(20):
        await asyncio.sleep(0)
        if (await app.get_run(run_id)).status == "cancelled":
            break
    assert (await app.get_run(run_id)).status == "cancelled"


async def test_start_agent_runs_in_the_background_and_is_consultable() -> None:
    model = GatedModel()
    app = make_app(model)
    started = await app.start_agent("support", "hi")
    assert started.status == "running"
    await model.started.wait()
    assert (await app.get_run(started.id)).status == "running"
    model.gate.set()
    for _ in range(50):
        await asyncio.sleep(0)
        if (await app.get_run(started.id)).status == "completed":
            break
    run = await app.get_run(started.id)
    assert run.status == "completed"
    assert run.output == "Hello"


async def test_cancel_run_stops_a_background_run() -> None:
    model = GatedModel()
    app = make_app(model)
    started = await app.start_agent("support", "hi")
    await model.started.wait()
    cancelled = await app.cancel_run(started.id)
    assert cancelled.status == "cancelled"
    events = await app.list_events(started.id)
    assert events[-1].type == "run.cancelled"
    assert events[-1].payload == {"reason": "aborted"}
    assert [e.type for e in events].count("run.cancelled") == 1
    assert (await app.cancel_run(started.id)).status == "cancelled"


async def test_cancel_run_reaches_a_streaming_consumer() -> None:
    model = GatedModel()
    app = make_app(model)
    seen: list[RunEvent] = []

    async def consume() -> None:
        async for event in app.stream_agent("support", "hi"):
            seen.append(event)

    consumer = asyncio.create_task(consume())
    await model.started.wait()
    await asyncio.sleep(0)
    run_id = seen[0].run_id
    await app.cancel_run(run_id)
    with pytest.raises(RunCancelledError) as caught:
        await consumer
    assert caught.value.reason == "aborted"
    assert seen[-1].type == "run.cancelled"
    assert (await app.get_run(run_id)).status == "cancelled"


async def test_a_timeout_cancels_the_run_with_a_timeout_reason() -> None:
    model = GatedModel()
    app = make_app(model)
    with pytest.raises(RunCancelledError) as caught:
        await app.run_agent("support", "hi", timeout=0.05)
    assert caught.value.reason == "timeout"
    assert caught.value.code == "RUN_TIMEOUT"
    run = await app.get_run(caught.value.run_id)
    assert run.status == "cancelled"
    events = await app.list_events(run.id)
    assert events[-1].payload == {"reason": "timeout"}


async def test_the_stream_emits_run_failed_before_raising() -> None:
    app = make_app(FakeModel(RuntimeError("boom")))
    seen: list[RunEvent] = []
    with pytest.raises(FevexRunError) as caught:
        async for event in app.stream_agent("support", "hi"):
            seen.append(event)
    assert caught.value.code == "MODEL_ERROR"
    assert seen[-1].type == "run.failed"
    assert seen[-1].payload["error"]["code"] == "MODEL_ERROR"


async def test_observers_are_isolated_from_the_run() -> None:
    received: list[str] = []

    def record(event: RunEvent) -> None:
        received.append(event.type)

    def explode(event: RunEvent) -> None:
        raise RuntimeError("observer bug")

    async def explode_later(event: RunEvent) -> None:
        raise RuntimeError("async observer bug")

    app = make_app(FakeModel({"output": "ok"}), on_event=[explode, explode_later, record])
    result = await app.run_agent("support", "hi")
    await asyncio.sleep(0)
    assert result.output == "ok"
    assert received == [e.type for e in result.events]


async def test_observers_see_events_after_the_stream_consumer() -> None:
    order: list[str] = []
    app = make_app(
        FakeModel({"output": "ok"}), on_event=lambda e: order.append(f"observer {e.sequence}")
    )
    async for event in app.stream_agent("support", "hi"):
        order.append(f"consumer {event.sequence}")
    assert order[:4] == ["consumer 1", "observer 1", "consumer 2", "observer 2"]


async def test_list_events_pages_with_cursors() -> None:
    app = make_app(FakeModel({"output": "abcdef"}, chunk_size=1))
    result = await app.run_agent("support", "hi")
    events = await app.list_events(result.run_id)
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    page = await app.list_events(result.run_id, after=events[2].id, limit=2)
    assert [e.sequence for e in page] == [4, 5]
    latest = await app.list_events(result.run_id, order="desc", limit=1)
    assert latest[0].type == "run.completed"
    tail = await app.list_events(result.run_id, after=events[-2].id)
    assert [e.type for e in tail] == ["run.completed"]


@pytest.mark.parametrize("cursor", ["evt_unknown", "foreign"])
async def test_unknown_or_foreign_cursors_are_invalid(cursor: str) -> None:
    app = make_app(FakeModel({"output": "a"}, {"output": "b"}))
    first = await app.run_agent("support", "one")
    second = await app.run_agent("support", "two")
    if cursor == "foreign":
        cursor = second.events[0].id
    with pytest.raises(FevexRunError) as caught:
        await app.list_events(first.run_id, after=cursor)
    assert caught.value.code == "INVALID_CURSOR"


async def test_invalid_page_arguments() -> None:
    app = make_app(FakeModel({"output": "a"}))
    result = await app.run_agent("support", "one")
    for arguments in ({"limit": 0}, {"limit": True}, {"order": "sideways"}):
        with pytest.raises(FevexRunError) as caught:
            await app.list_events(result.run_id, **arguments)
        assert caught.value.code == "INVALID_ARGUMENT"
    with pytest.raises(FevexRunError) as caught:
        await app.list_events("run_missing")
    assert caught.value.code == "RUN_NOT_FOUND"


def test_blocking_twins_work_in_scripts() -> None:
    app = make_app(FakeModel({"output": "one"}, {"output": "two two"}, chunk_size=4))
    result = app.run_agent_sync("support", "hi")
    assert result.output == "one"
    assert app.get_run_sync(result.run_id).status == "completed"
    assert len(app.list_events_sync(result.run_id)) == len(result.events)
    deltas = [
        e.payload["delta"]
        for e in app.stream_agent_sync("support", "again", session_id=result.session_id)
        if e.type == "model.output.delta"
    ]
    assert deltas == ["two ", "two"]
    assert len(app.get_session_sync(result.session_id).history) == 4
    assert app.compact_session_sync(result.session_id, "short").summary == "short"


async def test_blocking_twins_refuse_to_run_inside_an_event_loop() -> None:
    app = make_app(FakeModel({"output": "one"}))
    with pytest.raises(FevexRunError) as caught:
        app.run_agent_sync("support", "hi")
    assert caught.value.code == "SYNC_CALL_IN_EVENT_LOOP"


def test_blocking_twins_in_worker_threads_leave_no_open_loop() -> None:
    import threading

    app = make_app(FakeModel({"output": "from a thread"}))
    outputs: list[str] = []
    worker = threading.Thread(
        target=lambda: outputs.append(app.run_agent_sync("support", "hi").output)
    )
    worker.start()
    worker.join()
    del worker
    gc.collect()  # an unclosed loop would surface here as an unraisable ResourceWarning
    assert outputs == ["from a thread"]


INTERRUPTED_SCRIPT = """
import json, sys, time
from fevex import create_fevex, define_agent, define_tool
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel

@define_tool(name="slow", description="A slow blocking tool.")
def slow(request: dict) -> dict:
    print("started", flush=True)
    for _ in range(40):  # about two seconds, in small sleeps
        time.sleep(0.05)
    return {}

runs = []
app = create_fevex(
    models={"default": FakeModel(
        {"tool_calls": [{"id": "c1", "name": "slow", "input": {}}]}, {"output": "done"}
    )},
    agents=[define_agent(name="support", instructions="Help.", tools=["slow"])],
    tools=[slow],
    run_store=InMemoryRunStore(),
    on_event=lambda event: runs.append(event.run_id),
)
try:
    app.run_agent_sync("support", "hi")
except KeyboardInterrupt:
    run = app.get_run_sync(runs[0])
    session = app.get_session_sync(run.session_id)
    print(json.dumps({"status": run.status, "held_by": session.active_run_id}), flush=True)
    raise
"""


def _default_sigint() -> None:
    """In the child before it starts Python: SIGINT as a terminal's foreground process has it.
    A suite started in the background (``&``, ``nohup``) has SIGINT ignored, which a child
    inherits, and Python then installs no ``KeyboardInterrupt`` handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_in_a_blocking_run_cancels_it_with_one_keyboard_interrupt() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED_SCRIPT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "started\n"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode != 0
    assert json.loads(out) == {"status": "cancelled", "held_by": None}
    assert err.count("Traceback") == 1, err
    assert err.rstrip().endswith("KeyboardInterrupt"), err


def test_between_blocking_calls_ctrl_c_interrupts_and_an_own_handler_wins() -> None:
    app = make_app(FakeModel({"output": "one"}, {"output": "two"}))
    original = signal.getsignal(signal.SIGINT)
    # Python's own handler, as in a terminal: a suite started in the background has SIGINT
    # ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert app.run_agent_sync("support", "hi").output == "one"
        # Outside a blocking call, Ctrl-C interrupts as Python's default handler does.
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        caught: list[int] = []
        signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
        assert app.run_agent_sync("support", "hi").output == "two"
        signal.raise_signal(signal.SIGINT)
        assert caught == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, original)


async def test_follow_events_sees_a_run_of_another_app_once_and_in_order() -> None:
    store = InMemoryRunStore()
    model = GatedModel()
    worker = create_fevex(
        models={"default": model},
        agents=[define_agent(name="support", instructions="Help.")],
        run_store=store,
    )
    follower = create_fevex(
        models={"default": FakeModel()},
        agents=[define_agent(name="support", instructions="Help.")],
        run_store=store,
    )
    run = await worker.start_agent("support", "hi")
    await model.started.wait()
    seen: list[RunEvent] = []

    async def follow() -> None:
        async for event in follower.follow_events(run.id, poll_interval=0.01, page_size=2):
            seen.append(event)

    following = asyncio.create_task(follow())
    await asyncio.sleep(0.05)
    assert [e.type for e in seen][:1] == ["run.started"]
    model.gate.set()
    await asyncio.wait_for(following, 30)
    stored = await follower.list_events(run.id)
    assert [e.id for e in seen] == [e.id for e in stored]
    assert seen[-1].type == "run.completed"
    # From a cursor: only what came after it.
    rest = [e async for e in follower.follow_events(run.id, after=stored[1].id)]
    assert [e.id for e in rest] == [e.id for e in stored[2:]]


async def test_closing_a_follower_leaves_the_run_alone() -> None:
    model = GatedModel()
    app = make_app(model)
    run = await app.start_agent("support", "hi")
    await model.started.wait()
    follower = app.follow_events(run.id, poll_interval=0.01)
    assert (await anext(follower)).type == "run.started"
    await follower.aclose()
    model.gate.set()
    for _ in range(100):
        if (await app.get_run(run.id)).status == "completed":
            break
        await asyncio.sleep(0.01)
    assert (await app.get_run(run.id)).status == "completed"
