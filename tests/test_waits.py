"""Waits and wake-ups of the execution kernel, on every store: events sent from another
app, timers and event deadlines fired by wake-up passes, parents woken by their children,
and concurrent workers that never wake one run twice. Driven by the probe run kind of
``waits_probe`` (workflows and teams pause the same way)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from tests.waits_probe import create_probe_app, probe_kind, soon, start_probe

from fevex import Fevex, FevexRunError, RunPausedError
from fevex.runtime import InMemoryRunStore, RunLease
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio


def make_app(store: Any) -> Fevex:
    return create_probe_app(
        models={"fake": FakeModel({"output": "hi"})},
        agents=[],
        run_store=store,
        lease_seconds=5.0,
    )


@pytest.fixture
async def apps(url: str | None) -> AsyncIterator[tuple[Fevex, Fevex]]:
    """Two apps sharing one store: two processes, as far as the store can tell."""
    first = make_app(url)
    second = make_app(url if url is not None else first.run_store)
    yield first, second
    if url is not None:
        await second.close()
    await first.close()


async def test_an_event_sent_from_another_app_continues_the_run(
    apps: tuple[Fevex, Fevex],
) -> None:
    starter, sender = apps
    run = await start_probe(starter, [("event", {"name": "approved"})])
    assert run.status == "paused"
    assert run.pause == {
        "reason": "event",
        "step_id": "step-0",
        "event": "approved",
        "wake_at": None,
    }
    assert run.wake_at is None

    result = await sender.send_event(
        run.id, "approved", {"ok": True}, actor={"id": "reviewer-1", "type": "user"}
    )

    (received,) = result.output
    assert received["payload"] == {"ok": True}
    assert received["actor"] == {"id": "reviewer-1", "type": "user"}
    assert isinstance(received["received_at"], str)
    ended = await starter.get_run(run.id)
    assert ended.status == "completed"
    assert ended.pause is None
    types = [event.type for event in await starter.list_events(run.id)]
    assert types == ["run.started", "run.paused", "run.resumed", "run.completed"]
    resumed = (await starter.list_events(run.id))[2]
    assert resumed.payload["reason"] == "event"
    assert resumed.payload["event"] == "approved"


async def test_an_event_the_run_does_not_wait_for_changes_nothing(
    apps: tuple[Fevex, Fevex],
) -> None:
    app, other = apps
    kind = probe_kind(other)
    run = await start_probe(app, [("event", {"name": "approved"})])
    before = await app.get_run(run.id)

    for attempt in (
        other.send_event(run.id, "rejected", {}),
        other.send_event("run_unknown", "approved", {}),
    ):
        with pytest.raises(FevexRunError) as refused:
            await attempt
        assert refused.value.code in ("EVENT_NOT_EXPECTED", "RUN_NOT_FOUND")
    with pytest.raises(FevexRunError, match="not JSON") as bad_payload:
        await other.send_event(run.id, "approved", {"when": object()})
    assert bad_payload.value.code == "INVALID_ARGUMENT"
    with pytest.raises(FevexRunError) as bad_actor:
        await other.send_event(run.id, "approved", {}, actor={"type": "user"})
    assert bad_actor.value.code == "INVALID_ARGUMENT"
    kind.refuse_events.add("approved")
    with pytest.raises(FevexRunError) as refused_by_definition:
        await other.send_event(run.id, "approved", {})
    assert refused_by_definition.value.code == "EVENT_NOT_EXPECTED"
    assert await app.get_run(run.id) == before

    kind.refuse_events.clear()
    await other.send_event(run.id, "approved", {})
    with pytest.raises(FevexRunError) as after_end:
        await other.send_event(run.id, "approved", {})
    assert after_end.value.code == "EVENT_NOT_EXPECTED"
    assert after_end.value.details["status"] == "completed"


async def test_an_approval_decision_never_ends_an_event_wait(
    apps: tuple[Fevex, Fevex],
) -> None:
    app, _ = apps
    run = await start_probe(app, [("event", {"name": "approved"})])
    with pytest.raises(FevexRunError) as refused:
        await app.resume_run(
            run.id, {"approval_id": "nope", "decision": "approve", "actor": {"id": "a"}}
        )
    assert refused.value.code == "APPROVAL_NOT_FOUND"
    assert (await app.get_run(run.id)).status == "paused"


async def test_a_timer_is_fired_by_a_wake_up_pass_once_it_is_due(
    apps: tuple[Fevex, Fevex],
) -> None:
    app, worker = apps
    wake_at = soon(0.5)
    run = await start_probe(app, [("sleep", wake_at)])
    assert run.status == "paused"
    assert run.wake_at == wake_at

    early = await worker.wake_due_runs()
    assert (early.claimed, early.woken) == (0, ())

    await asyncio.sleep(max(0.0, wake_at - time.time()) + 0.2)
    sweep = await worker.wake_due_runs()
    assert [woken.id for woken in sweep.woken] == [run.id]
    ended = await app.get_run(run.id)
    assert ended.status == "completed"
    assert "fired_at" in ended.output[0]
    assert ended.wake_at is None
    assert (await worker.wake_due_runs()).claimed == 0


async def test_an_event_that_misses_its_deadline_fails_the_step(
    apps: tuple[Fevex, Fevex],
) -> None:
    app, worker = apps
    run = await start_probe(app, [("event", {"name": "approved", "wake_at": soon(0.3)})])
    await asyncio.sleep(0.6)

    sweep = await worker.wake_due_runs()

    assert [woken.id for woken in sweep.woken] == [run.id]
    failed = await app.get_run(run.id)
    assert failed.status == "failed"
    assert failed.error is not None
    assert failed.error["code"] == "EVENT_TIMEOUT"
    with pytest.raises(FevexRunError) as late:
        await app.send_event(run.id, "approved", {})
    assert late.value.code == "EVENT_NOT_EXPECTED"


async def test_a_parent_wakes_when_its_last_child_ends(apps: tuple[Fevex, Fevex]) -> None:
    app, worker = apps
    context = {"actor": {"id": "ada", "type": "user"}, "namespace": "acme", "attributes": {"a": 1}}
    parent = await start_probe(app, [("children", 2)], context)
    assert parent.status == "paused"
    assert parent.pause is not None
    child_ids = parent.pause["run_ids"]
    children = [await app.get_run(child_id) for child_id in child_ids]
    assert all(child.status == "paused" for child in children)
    assert all(
        (child.parent_run_id, child.root_run_id) == (parent.id, parent.id) for child in children
    )
    # Children inherit the context, merged with their own; the parent's actor stays.
    assert [child.context for child in children] == [
        {
            "actor": {"id": "ada", "type": "user"},
            "namespace": "acme",
            "attributes": {"a": 1, "child": f"step-0-{index}"},
            "prompt_values": {},
        }
        for index in range(2)
    ]
    listed = await app.list_runs(parent_run_id=parent.id)
    assert sorted(run.id for run in listed) == sorted(child_ids)
    assert (await worker.wake_due_runs()).claimed == 0

    await worker.send_event(child_ids[0], "finish", {"n": 1})
    assert (await app.get_run(parent.id)).wake_at is not None
    early = await worker.wake_due_runs()
    # Woken by the first child, the parent finds the second still going and pauses again.
    assert (early.claimed, early.woken) == (1, ())
    again = await app.get_run(parent.id)
    assert (again.status, again.wake_at) == ("paused", None)
    assert again.pause == parent.pause

    await app.send_event(child_ids[1], "finish", {"n": 2})
    sweep = await worker.wake_due_runs()

    assert [woken.id for woken in sweep.woken] == [parent.id]
    ended = await app.get_run(parent.id)
    assert ended.status == "completed"
    (outcome,) = ended.output
    assert {child_id: entry["status"] for child_id, entry in outcome.items()} == {
        child_ids[0]: "completed",
        child_ids[1]: "completed",
    }


async def test_concurrent_wake_up_passes_wake_each_run_once(
    apps: tuple[Fevex, Fevex],
) -> None:
    first, second = apps
    runs = [await start_probe(first, [("sleep", soon(0.2))]) for _ in range(12)]
    await asyncio.sleep(0.5)

    sweeps = await asyncio.gather(*(app.wake_due_runs() for app in (first, second, first)))

    woken = [run.id for sweep in sweeps for run in sweep.woken]
    assert sorted(woken) == sorted(run.id for run in runs)
    for run in runs:
        events = [event.type for event in await first.list_events(run.id)]
        assert events.count("run.resumed") == 1
        assert (await first.get_run(run.id)).status == "completed"


async def test_a_paused_waiting_run_is_cancelled_and_stays_so(apps: tuple[Fevex, Fevex]) -> None:
    app, other = apps
    run = await start_probe(app, [("sleep", soon(0.2))])
    cancelled = await other.cancel_run(run.id)
    assert cancelled.status == "cancelled"
    await asyncio.sleep(0.4)
    assert (await app.wake_due_runs()).claimed == 0
    with pytest.raises(FevexRunError) as refused:
        await app.send_event(run.id, "anything", {})
    assert refused.value.code == "EVENT_NOT_EXPECTED"


WORKER_APP = """
from fevex.testing import FakeModel
from tests.waits_probe import create_probe_app

app = create_probe_app(models={"fake": FakeModel({"output": "hi"})}, agents=[], lease_seconds=5.0)
"""


def test_fevex_worker_fires_due_wake_ups(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    (tmp_path / "probe_app.py").write_text(WORKER_APP, encoding="utf-8")
    app = make_app(url)
    run = asyncio.run(_start_sleeper(app))
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).parents[1])]),
    }
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fevex.cli",
            "worker",
            "--app",
            "probe_app:app",
            "--store",
            url,
            "--interval",
            "0.1",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )
    try:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        assert json.loads(line) == {"action": "woken", "run_id": run, "status": "completed"}
    finally:
        worker.send_signal(signal.SIGTERM)
        _, errors = worker.communicate(timeout=30)
    assert worker.returncode == 0, errors
    assert "Traceback" not in errors


async def _start_sleeper(app: Fevex) -> str:
    try:
        run = await start_probe(app, [("sleep", soon(0.3))])
        return run.id
    finally:
        await app.close()


class FirstAcquireWaits(InMemoryRunStore):
    """Holds the first acquire_lease until ``gate`` opens."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()
        self._held = False

    async def acquire_lease(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunLease:
        if not self._held:
            self._held = True
            self.waiting.set()
            await self.gate.wait()
        return await super().acquire_lease(run_id, owner, seconds, status=status)


async def test_an_event_refused_after_the_takeover_leaves_the_run_free() -> None:
    store = FirstAcquireWaits()
    app = make_app(store)
    run = await start_probe(app, [("event", {"name": "a"}), ("event", {"name": "b"})])
    late = asyncio.create_task(app.send_event(run.id, "a", {"n": "late"}))
    await store.waiting.wait()
    # Another sender delivers "a" first: the run moves on to wait for "b".
    with pytest.raises(RunPausedError):
        await app.send_event(run.id, "a", {"n": "first"})
    assert (await app.get_run(run.id)).pause["event"] == "b"  # type: ignore[index]
    store.gate.set()
    with pytest.raises(FevexRunError) as refused:
        await late
    assert refused.value.code == "EVENT_NOT_EXPECTED"
    # The late sender gave the lease back: "b" is delivered at once, not after the lease.
    result = await app.send_event(run.id, "b", {"n": "second"})
    assert [step["payload"]["n"] for step in result.output] == ["first", "second"]
