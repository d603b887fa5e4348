"""The first check of the run-store conformance suite: every field of a run, its events,
its checkpoint and its session read back as they were written, by a creation, a terminal
commit and a child run's creation. Part of :mod:`fevex.testing.run_store_contract`, which
documents and runs it."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from fevex._ground.clock import new_id
from fevex.messages import Message
from fevex.runtime.executions import ExecutionCreate
from fevex.runtime.records import AgentRun
from fevex.runtime.run_store import RunStore
from fevex.testing._run_store_steps import (
    LONG,
    ManualClock,
    RunStoreFactory,
    _creation,
    _ensure,
    _event,
    _finish,
    _history,
    _holds,
    _new_run,
    _opened,
    _Run,
)

__all__ = ["check_create_and_read_back"]


async def check_create_and_read_back(
    factory: RunStoreFactory, clock: ManualClock | None = None
) -> None:
    async with _opened(factory) as store:
        tracked, session = await _created_reads_back(store, clock)
        await _terminal_commit_reads_back(store, tracked, session)
        await _child_run_reads_back(store, tracked.run)


async def _created_reads_back(
    store: RunStore, clock: ManualClock | None
) -> tuple[_Run, dict[str, Any]]:
    """A new run reads back as created, with its events, checkpoint and reserved session;
    unknown ids read as nothing."""
    run = _new_run()
    events = (_event(run.id, 1), _event(run.id, 2))
    checkpoint = {"step": 0, "messages": [Message.user("hé").to_json()], "ratio": 0.5}
    create = ExecutionCreate(run, None, events, checkpoint, "worker-a", LONG)
    lease = await store.create_execution(create)
    _ensure(
        lease.owner == "worker-a" and type(lease.generation) is int and lease.generation >= 1,
        f"create_execution returned {lease}; want owner worker-a and a generation >= 1",
    )
    if clock is not None:
        expected_expiry = clock() + LONG
        _ensure(
            abs(lease.expires_at - expected_expiry) < 1.0,
            f"the lease expires at {lease.expires_at}, want {expected_expiry} by the clock",
        )
    tracked = _Run(run, lease, 1, [event.id for event in events])
    created = await _holds(store, tracked, "after create_execution")
    _ensure(await store.get_run(run.id) == run, f"get_run read back {created['run']}")
    _ensure(
        created["events"] == [event.to_json() for event in events],
        f"list_events read back {created['events']}",
    )
    _ensure(created["checkpoint"] == checkpoint, f"checkpoint read {created['checkpoint']}")
    session = created["session"]
    _ensure(
        session["active_run_id"] == run.id and session["revision"] >= 1,
        f"a new session must be reserved by its run, with revision >= 1: {session}",
    )
    reads: tuple[Callable[[str], Awaitable[object]], ...] = (
        store.get_run,
        store.get_checkpoint,
        store.get_session,
    )
    for read in reads:
        found = await read(new_id("unknown"))
        _ensure(found is None, f"{read.__name__} of an unknown id returned {found!r}")
    return tracked, session


async def _terminal_commit_reads_back(
    store: RunStore, tracked: _Run, session: dict[str, Any]
) -> None:
    """A terminal commit reads back: the run's new fields, its checkpoint, and its session
    freed with the turn's history appended."""
    run = tracked.run
    output = {"answer": "Account 42 is active.", "score": 0.75, "tags": ["a", "b"]}
    usage = {"input_tokens": 3, "output_tokens": 5, "total_tokens": 8}
    history = _history("hé", "Account 42 is active.")
    commit = await _finish(
        store,
        tracked,
        changes={"output": output, "usage": usage},
        checkpoint={"step": 1, "done": True},
        history=history,
    )
    ended = await _holds(store, tracked, "after a terminal commit")
    changed: dict[str, Any] = {
        "output": output,
        "usage": usage,
        "updated_at": commit.updated_at,
    }
    expected = dataclasses.replace(run, status="completed", revision=2, **changed)
    _ensure(
        await store.get_run(run.id) == expected,
        f"after a terminal commit, get_run read back {ended['run']}, want {expected}",
    )
    _ensure(
        ended["checkpoint"] == {"step": 1, "done": True},
        f"a commit's checkpoint read back as {ended['checkpoint']}",
    )
    freed = ended["session"]
    _ensure(
        freed["active_run_id"] is None
        and freed["history"] == list(history)
        and freed["revision"] > session["revision"],
        "a terminal commit must free the session, append its history and advance the "
        f"revision; the session was {session} and is {freed}",
    )


async def _child_run_reads_back(store: RunStore, run: AgentRun) -> None:
    """A child run of another kind, with a version and a context, reads back whole."""
    context = {
        "actor": {"id": "user-7", "type": "user"},
        "namespace": "tenant-ü",
        "attributes": {"plan": "pro", "limits": [1, 2.5, None, True], "empty": {}},
        "prompt_values": {"who": "Ada ✓"},
    }
    child = dataclasses.replace(
        _new_run(),
        kind="workflow",
        name="refunds",
        version="2.1.0",
        parent_run_id=run.id,
        root_run_id=run.root_run_id,
        context=context,
    )
    create = _creation(child, None)
    tracked = _Run(child, await store.create_execution(create), 1, [create.events[0].id])
    kept = await _holds(store, tracked, "after creating a child run")
    _ensure(
        await store.get_run(child.id) == child,
        f"a child workflow run read back as {kept['run']}, want {child.to_json()}",
    )
    await _finish(store, tracked)
