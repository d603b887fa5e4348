"""Checks of the run-store conformance suite for wake-ups: due runs handed out by
``claim_due_run``, parents woken by the end of a child run, and followers told that a run
moved on. Part of
:mod:`fevex.testing.run_store_contract`, which documents and runs them."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time

from fevex._ground.clock import new_id
from fevex.runtime.records import AgentRun
from fevex.runtime.run_store import NotifyingRunStore, RunLease, RunStore
from fevex.testing._run_store_steps import (
    LONG,
    ManualClock,
    RunStoreFactory,
    _commit,
    _creation,
    _ensure,
    _finish,
    _found,
    _new_run,
    _opened,
    _refused,
    _Run,
)

# Far enough from the store's now that clock skew between the suite and a database never
# decides a check.
_MARGIN = 3600.0


def _now(clock: ManualClock | None) -> float:
    return clock() if clock is not None else time.time()


async def _start(store: RunStore, run: AgentRun) -> _Run:
    create = _creation(run, None)
    return _Run(run, await store.create_execution(create), 1, [create.events[0].id])


async def _pause(store: RunStore, run: _Run, **changes: object) -> None:
    await _commit(store, run, changes={"status": "paused", **changes}, release_lease=True)


async def _wake_at(store: RunStore, run: _Run) -> float | None:
    return _found(await store.get_run(run.id), f"run {run.id} is missing").wake_at


async def check_due_wake_ups(factory: RunStoreFactory, clock: ManualClock | None = None) -> None:
    async with _opened(factory) as store:
        # A name of its own: a shared storage may hold other due runs.
        name = new_id("due")
        now = _now(clock)

        async def paused(wake_at: float | None) -> _Run:
            run = await _start(store, _new_run(agent_name=name))
            await _pause(store, run, wake_at=wake_at)
            return run

        due = [await paused(now - _MARGIN + offset) for offset in (30.0, 10.0, 20.0, 0.0)]
        later = await paused(now + _MARGIN)
        never = await paused(None)
        stored = await _wake_at(store, due[0])
        _ensure(
            stored == now - _MARGIN + 30.0 and type(stored) is float,
            f"a committed wake_at read back as {stored!r}, want {now - _MARGIN + 30.0!r}",
        )
        running = await _start(store, _new_run(agent_name=name))
        await _commit(store, running, changes={"wake_at": now - _MARGIN}, release_lease=True)
        held = await paused(now - _MARGIN)
        held.lease = await store.acquire_lease(held.id, "resumer", LONG, status="paused")

        for names in ((), {new_id("other")}):
            none = await store.claim_due_run("nobody", LONG, names=names)
            _ensure(none is None, f"claim_due_run(names={names!r}) claimed {none}")
        await _refused(
            "INVALID_ARGUMENT",
            store.claim_due_run("w", LONG, names=name),
            "claim_due_run with a single string as names",
        )

        await _claim_each_due_run_once(store, name, due)
        await _refused(
            "RUN_CONFLICT",
            store.acquire_lease(later.id, "w", LONG, status="running"),
            "acquire_lease of a paused run as running",
        )
        for run in (later, never, held):
            if run is not held:
                run.lease = await store.acquire_lease(run.id, "closer", LONG, status="paused")
            await _finish(store, run, status="cancelled")
        running.lease = await store.acquire_lease(running.id, "closer", LONG)
        await _finish(store, running, status="cancelled")

        await _check_wake_at_is_seconds(store, name)


async def _claim_each_due_run_once(store: RunStore, name: str, due: list[_Run]) -> None:
    """Claims, one then eight at once, hand out each run of ``due`` once, earliest first,
    leased to its claimer with the next generation and still paused, its wake_at moved to
    the lease's expiry; each is finished."""
    first = await store.claim_due_run("first", LONG, names={name})
    claimed_id, lease = _found(first, "claim_due_run claimed none of four due runs")
    _ensure(
        claimed_id == due[3].id,
        f"claim_due_run took {claimed_id}, want the earliest due run {due[3].id}",
    )
    claims: list[tuple[str, str, RunLease]] = [(claimed_id, "first", lease)]

    async def claimer(owner: str) -> None:
        for _ in range(100):
            claimed = await store.claim_due_run(owner, LONG, names={name})
            if claimed is None:
                return
            claims.append((claimed[0], owner, claimed[1]))

    await asyncio.gather(*(claimer(f"claimer-{i}") for i in range(8)))
    claimed_ids = sorted(run_id for run_id, _, _ in claims)
    _ensure(
        claimed_ids == sorted(run.id for run in due),
        f"claim_due_run handed out {claimed_ids}; want each due run once: "
        f"{sorted(run.id for run in due)} (never one due later, one without wake_at, a "
        "running run or one whose lease is live)",
    )
    by_run = {run_id: (owner, lease) for run_id, owner, lease in claims}
    for run in due:
        owner, lease = by_run[run.id]
        stored_run = _found(await store.get_run(run.id), f"run {run.id} is missing")
        _ensure(
            lease.owner == owner
            and lease.generation > run.lease.generation
            and stored_run.status == "paused"
            and stored_run.wake_at == lease.expires_at,
            f"{owner} claimed a due run and got {lease}; the run reads back as "
            f"{stored_run}: want the next generation, the run still paused and its "
            "wake_at moved to the lease's expiry",
        )
        run.lease = lease
        await _finish(store, run)


async def _check_wake_at_is_seconds(store: RunStore, name: str) -> None:
    """A commit's wake_at is seconds since the epoch (a finite number) or nothing."""
    refused = await _start(store, _new_run(agent_name=name))
    for wrong in ("soon", math.nan, math.inf, True):
        await _refused(
            "INVALID_ARGUMENT",
            store.commit_execution(refused.next_commit(changes={"wake_at": wrong})),
            f"a commit with wake_at={wrong!r}",
        )
    await _finish(store, refused)


async def check_children_wake_parents(
    factory: RunStoreFactory, clock: ManualClock | None = None
) -> None:
    async with _opened(factory) as store:
        name = new_id("parent")

        async def child_of(parent: _Run) -> _Run:
            run = dataclasses.replace(
                _new_run(), parent_run_id=parent.id, root_run_id=parent.run.root_run_id
            )
            return await _start(store, run)

        waiting = await _start(store, _new_run(agent_name=name))
        await _pause(store, waiting, wake_at=None)
        child = await child_of(waiting)
        await _commit(store, child, changes={"status": "paused"}, release_lease=True)
        _ensure(
            await _wake_at(store, waiting) is None,
            "a child's commit that does not end it woke its parent",
        )
        none = await store.claim_due_run("w", LONG, names={name})
        _ensure(none is None, f"claim_due_run claimed {none} before any child ended")
        child.lease = await store.acquire_lease(child.id, "w", LONG, status="paused")
        before = _now(clock)
        await _finish(store, child, status="failed")
        woken = await _wake_at(store, waiting)
        _ensure(
            woken is not None and abs(woken - before) < _MARGIN,
            f"the end of a child left its paused parent's wake_at at {woken!r}; want the "
            "store's now",
        )
        claimed = _found(
            await store.claim_due_run("w", LONG, names={name}),
            "a parent woken by its child's end was not claimable",
        )
        _ensure(claimed[0] == waiting.id, f"claim_due_run claimed {claimed[0]}, not the parent")
        waiting.lease = claimed[1]
        await _finish(store, waiting)

        # A parent still running when its child ends finds the wake-up once it pauses.
        running = await _start(store, _new_run(agent_name=name))
        quick = await child_of(running)
        await _finish(store, quick)
        await _pause(store, running)
        claimed = _found(
            await store.claim_due_run("w", LONG, names={name}),
            "a parent that paused after its child ended was not claimable",
        )
        _ensure(claimed[0] == running.id, f"claim_due_run claimed {claimed[0]}, not the parent")
        running.lease = claimed[1]
        await _finish(store, running)

        # A parent that has ended stays as it ended.
        ended = await _start(store, _new_run(agent_name=name))
        late = await child_of(ended)
        await _finish(store, ended)
        await _finish(store, late, status="cancelled")
        _ensure(
            await _wake_at(store, ended) is None,
            "the end of a child changed the wake_at of its parent, which had completed",
        )


async def check_followers_are_told(
    factory: RunStoreFactory, clock: ManualClock | None = None
) -> None:
    """For a store that offers ``wait_for_events`` (a :class:`NotifyingRunStore`): a wait
    ends at once when the run has events after the cursor or has ended, ends when a commit
    lands during it, and times out on an idle run. A store without it is followed by
    reading, and has nothing more to prove here."""
    async with _opened(factory) as store:
        if not isinstance(store, NotifyingRunStore):
            return
        run = await _start(store, _new_run())
        first = run.event_ids[0]
        waited = await store.wait_for_events(run.id, after=None, timeout=5.0)
        _ensure(waited, "wait_for_events(after=None) on a run with an event did not end at once")
        idle = await store.wait_for_events(run.id, after=first, timeout=0.3)
        _ensure(not idle, "wait_for_events on an idle run returned True before its timeout")

        async def commit_soon() -> None:
            await asyncio.sleep(0.2)
            await _commit(store, run)

        committing = asyncio.create_task(commit_soon())
        told = await store.wait_for_events(run.id, after=first, timeout=10.0)
        await committing
        _ensure(told, "a commit during wait_for_events did not end the wait")
        last = run.event_ids[-1]
        await _finish(store, run, events=0)
        ended = await store.wait_for_events(run.id, after=last, timeout=5.0)
        _ensure(ended, "wait_for_events on an ended run did not end at once")
        unknown = await store.wait_for_events(run.id, after=new_id("evt"), timeout=5.0)
        _ensure(unknown, "wait_for_events with an unknown cursor did not end at once")
