"""``fevex.channels.handle_channel_input``: conversations map to sessions, each delivery id
is handled once, durably (a process killed mid-run, and the redelivery in another process
is still ignored), and channel events tell what happened around the run."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fevex.channels import (
    ChannelAdapter,
    ChannelEvent,
    conversation_session_id,
    delivery_run_id,
    handle_channel_input,
    handle_channel_input_sync,
)
from fevex.errors import FevexError

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent / "channels"
GUARD = 60.0


def load_channel_app() -> ModuleType:
    spec = importlib.util.spec_from_file_location("channel_app", HERE / "channel_app.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


channel_app = load_channel_app()


def message(delivery_id: str, text: str = "hello", conversation: str = "c1") -> dict[str, Any]:
    return {"id": f"m-{delivery_id}", "delivery_id": delivery_id, "conversation": conversation,
            "text": text}  # fmt: skip


async def handle(app: Any, adapter: Any, input: Any, sessions: dict[str, str]) -> Any:
    events: list[ChannelEvent] = []
    result = await handle_channel_input(
        input,
        fevex=app,
        agent_name="assistant",
        adapter=adapter,
        resolve_session_id=lambda parsed: sessions.get(parsed.conversation_id),
        on_event=events.append,
    )
    assert list(result.events) == events
    if not result.ignored and result.run is not None:
        sessions[result.message.conversation_id] = result.run.session_id
    return result


async def test_a_conversation_continues_its_session_and_answers_go_back() -> None:
    adapter = channel_app.MemoryAdapter()
    assert isinstance(adapter, ChannelAdapter)
    sessions: dict[str, str] = {}
    async with channel_app.build_app() as app:
        first = await handle(app, adapter, message("d1", "hello"), sessions)
        second = await handle(app, adapter, message("d2", "again"), sessions)

        assert (first.ignored, second.ignored) == (False, False)
        assert first.run.id == delivery_run_id("memory", "d1")
        assert first.run.session_id == second.run.session_id
        assert [event.type for event in first.events] == [
            "channel.message.received",
            "channel.run.started",
            "channel.run.completed",
            "channel.message.delivered",
        ]
        assert first.events[1].payload == {"session_id": first.run.session_id}
        assert [output.output for output in adapter.delivered] == ["Echo: hello", "Echo: again"]
        assert second.delivery == {"sent": "Echo: again"}
        history = (await app.get_session(second.run.session_id)).messages()
        assert [m.text for m in history if m.role == "user"] == ["hello", "again"]


async def test_without_a_resolver_a_conversation_keeps_one_session() -> None:
    adapter = channel_app.MemoryAdapter()
    async with channel_app.build_app() as app:
        results = [
            await handle_channel_input(
                message(delivery, text, conversation),
                fevex=app,
                agent_name="assistant",
                adapter=adapter,
            )
            for delivery, text, conversation in (
                ("d1", "hello", "c1"),
                ("d2", "again", "c1"),
                ("d3", "other", "c2"),
            )
        ]
        first, second, other = (result.run for result in results)
        assert first.session_id == second.session_id == conversation_session_id("memory", "c1")
        assert other.session_id == conversation_session_id("memory", "c2") != first.session_id
        # The second message's run saw the first exchange: the session holds both.
        history = (await app.get_session(first.session_id)).messages()
        said = [item.text for item in history if item.role == "user"]
        assert said == ["hello", "again"]
        assert [output.output for output in adapter.delivered] == [
            "Echo: hello",
            "Echo: again",
            "Echo: other",
        ]


def test_the_blocking_twin_handles_messages_without_an_event_loop() -> None:
    adapter = channel_app.MemoryAdapter()
    app = channel_app.build_app()
    try:
        events: list[str] = []
        first = handle_channel_input_sync(
            message("d1", "hello"),
            fevex=app,
            agent_name="assistant",
            adapter=adapter,
            on_event=lambda event: events.append(event.type),
        )
        second = handle_channel_input_sync(
            message("d2", "again"), fevex=app, agent_name="assistant", adapter=adapter
        )
        repeated = handle_channel_input_sync(
            message("d1", "hello"), fevex=app, agent_name="assistant", adapter=adapter
        )
        assert first.run is not None
        assert second.run is not None
        assert (first.run.status, second.run.status) == ("completed", "completed")
        assert first.run.session_id == second.run.session_id
        assert repeated.ignored
        assert events[-1] == "channel.message.delivered"
        assert len(app.get_session_sync(first.run.session_id).messages()) == 8
    finally:
        app.close_sync()


async def test_a_delivery_handled_before_is_ignored() -> None:
    adapter = channel_app.MemoryAdapter()
    async with channel_app.build_app() as app:
        first = await handle(app, adapter, message("d1"), {})
        again = await handle(app, adapter, message("d1"), {})

        assert again.ignored
        assert again.run.id == first.run.id
        assert [event.type for event in again.events] == [
            "channel.message.received",
            "channel.message.ignored",
        ]
        assert len(adapter.delivered) == 1
        assert len(await app.list_runs()) == 1
        # Another channel may reuse the id: delivery ids are scoped by channel.
        other = channel_app.MemoryAdapter()
        other.name = "other"
        assert not (await handle(app, other, message("d1"), {})).ignored


async def test_concurrent_deliveries_of_one_id_run_once() -> None:
    adapter = channel_app.MemoryAdapter()
    async with channel_app.build_app() as app:
        results = await asyncio.gather(
            *(handle(app, adapter, message("d1", conversation=f"c{n}"), {}) for n in range(4))
        )
        assert sorted(result.ignored for result in results) == [False, True, True, True]
        assert len(await app.list_runs()) == 1
        assert len(adapter.delivered) == 1


async def test_a_paused_run_is_not_delivered_and_a_failed_one_raises() -> None:
    adapter = channel_app.MemoryAdapter()
    async with channel_app.build_app() as app:
        paused = await handle(app, adapter, message("d1", "approve"), {})
        assert paused.run.status == "paused"
        assert paused.events[-1].type == "channel.run.paused"
        assert adapter.delivered == []

        events: list[ChannelEvent] = []
        with pytest.raises(FevexError) as failed:
            await handle_channel_input(
                message("d2", "fail", conversation="c2"),
                fevex=app,
                agent_name="assistant",
                adapter=adapter,
                on_event=events.append,
            )
        assert failed.value.code == "MODEL_ERROR"
        assert [event.type for event in events][-1] == "channel.run.failed"
        assert events[-1].payload == {"code": "MODEL_ERROR"}
        # The failed delivery stays handled.
        assert (await handle(app, adapter, message("d2", "fail", conversation="c2"), {})).ignored


async def test_a_busy_conversation_is_refused_not_ignored() -> None:
    adapter = channel_app.MemoryAdapter()
    sessions: dict[str, str] = {}
    async with channel_app.build_app() as app:
        paused = await handle(app, adapter, message("d1", "approve"), sessions)
        with pytest.raises(FevexError) as busy:
            await handle(app, adapter, message("d2", "hello"), sessions)
        assert busy.value.code == "RUN_CONFLICT"
        # Nothing recorded d2 as handled: once the conversation is free, it runs.
        await app.cancel_run(paused.run.id)
        assert not (await handle(app, adapter, message("d2", "hello"), sessions)).ignored


async def test_refused_input_and_failing_observers() -> None:
    adapter = channel_app.MemoryAdapter()
    async with channel_app.build_app() as app:
        with pytest.raises(ValueError, match="not a message"):
            await handle(app, adapter, {"text": "forged"}, {})
        assert await app.list_runs() == []

        def broken(event: ChannelEvent) -> None:
            raise RuntimeError("observer bug")

        result = await handle_channel_input(
            message("d1"), fevex=app, agent_name="assistant", adapter=adapter, on_event=broken
        )
        assert (result.run.status, len(adapter.delivered)) == ("completed", 1)


async def test_a_redelivery_after_the_handling_process_died_is_still_ignored(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    first = message("d1")
    handler = subprocess.Popen(  # noqa: ASYNC220 - waited for with timeouts
        [sys.executable, str(HERE / "channel_app.py"), json.dumps(first)],
        env={**os.environ, "FEVEX_RUN_STORE": store, "FEVEX_TEST_TOOL_DELAY": "30",
             "FEVEX_TEST_LEASE_SECONDS": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    run_id = delivery_run_id("memory", "d1")
    adapter = channel_app.MemoryAdapter()
    try:
        async with channel_app.build_app(store) as app:
            deadline = time.monotonic() + GUARD
            while "tool.started" not in [e.type for e in await app.run_store.list_events(run_id)]:
                assert handler.poll() is None, handler.communicate()
                assert time.monotonic() < deadline, "the handler never started its run"
                await asyncio.sleep(0.05)
            handler.send_signal(signal.SIGKILL)
            await asyncio.to_thread(handler.communicate, timeout=GUARD)

            again = await handle(app, adapter, first, {})

            assert again.ignored
            assert again.run.id == run_id
            assert adapter.delivered == []
            assert [run.id for run in await app.list_runs()] == [run_id]
            # The run itself is recovered as any run whose process died.
            await asyncio.sleep(1.5)
            recovered = await app.recover_run(run_id, actor={"id": "test"})
            assert recovered.output == "Echo: hello"
    finally:
        if handler.poll() is None:
            handler.kill()
            handler.communicate()
