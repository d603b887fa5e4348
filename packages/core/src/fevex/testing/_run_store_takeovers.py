"""Checks of the run-store conformance suite for takeovers: a stored run taken over in one
operation (``take_over_run``). Part of :mod:`fevex.testing.run_store_contract`, which
documents and runs them."""

from __future__ import annotations

import asyncio

from fevex._ground.clock import new_id
from fevex.runtime.run_store import RunStore, take_over_run
from fevex.testing._run_store_steps import (
    LONG,
    RACERS,
    SHORT_LEASE,
    ManualClock,
    RunStoreFactory,
    _codes,
    _commit,
    _create,
    _ensure,
    _finish,
    _found,
    _let_short_leases_expire,
    _opened,
    _refused,
)


async def check_run_takeover(factory: RunStoreFactory, clock: ManualClock | None = None) -> None:
    """What a takeover finds, for a store's own ``take_over_run`` or, for a store without
    one, for :func:`~fevex.runtime.run_store.take_over_run` composing the contract."""
    async with _opened(factory) as store:
        await _paused_run_taken_over(store, clock)
        await _refusals_take_nothing(store)
        await _lapsed_run_taken_over(store, clock)
        await _one_of_many_takers_wins(store)


async def _paused_run_taken_over(store: RunStore, clock: ManualClock | None) -> None:
    run = await _create(store, checkpoint={"step": 0})
    pause = {"reason": "event", "event": "go", "step_id": "s4"}
    checkpoint = {"step": 3, "note": "héllo ✓", "values": [0.5, None, {"k": True}]}
    changes = {"status": "paused", "pause": pause}
    await _commit(store, run, events=2, changes=changes, checkpoint=checkpoint, release_lease=True)
    before = _found(await store.get_run(run.id), f"run {run.id} is missing")

    taken = await take_over_run(store, run.id, "taker", LONG, status="paused")
    lease = taken.lease
    _ensure(
        lease.owner == "taker" and lease.generation == run.lease.generation + 1,
        f"taking over a run released by {run.lease} gave the lease {lease}; want owner "
        "taker and the next generation",
    )
    if clock is not None:
        _ensure(
            abs(lease.expires_at - (clock() + LONG)) < 1.0,
            f"the lease taken expires at {lease.expires_at}, want {clock() + LONG} by the clock",
        )
    _ensure(taken.run == before, f"the takeover read the run {taken.run}, want {before}")
    _ensure(
        taken.checkpoint == checkpoint,
        f"the takeover read the checkpoint {taken.checkpoint!r}, want {checkpoint!r}",
    )
    _ensure(
        taken.last_sequence == len(run.event_ids),
        f"the takeover read {taken.last_sequence} as the last event's sequence, want "
        f"{len(run.event_ids)}",
    )
    # The released lease is fenced out; the one taken writes after the events read.
    stale = store.commit_execution(run.next_commit(changes={"status": "running"}))
    await _refused("LEASE_LOST", stale, "a commit under the lease released before a takeover")
    run.lease = lease
    await _commit(store, run, changes={"status": "running", "pause": None})
    await _finish(store, run)


async def _refusals_take_nothing(store: RunStore) -> None:
    run = await _create(store)
    live = take_over_run(store, run.id, "taker", LONG)
    await _refused("RUN_CONFLICT", live, "take_over_run of a run whose lease is live")
    await _commit(store, run, changes={"status": "paused"}, release_lease=True)
    other_status = take_over_run(store, run.id, "taker", LONG, status="running")
    await _refused("RUN_CONFLICT", other_status, "take_over_run(status='running') of a paused run")
    unknown = take_over_run(store, new_id("unknown"), "taker", LONG)
    await _refused("RUN_NOT_FOUND", unknown, "take_over_run of an unknown run")
    # Nothing was taken: the next acquisition has the generation after the released one.
    acquired = await store.acquire_lease(run.id, "worker-b", LONG, status="paused")
    _ensure(
        acquired.generation == run.lease.generation + 1,
        f"after refused takeovers, acquire_lease gave generation {acquired.generation}, want "
        f"{run.lease.generation + 1}: a refused takeover changed the lease",
    )
    run.lease = acquired
    await _finish(store, run, status="cancelled")


async def _lapsed_run_taken_over(store: RunStore, clock: ManualClock | None) -> None:
    run = await _create(store, seconds=SHORT_LEASE, checkpoint={"step": 1})
    await _let_short_leases_expire(clock)
    taken = await take_over_run(store, run.id, "rescuer", LONG)
    _ensure(
        (taken.run.status, taken.checkpoint, taken.last_sequence) == ("running", {"step": 1}, 1)
        and taken.lease.generation == run.lease.generation + 1,
        f"a running run whose lease expired was taken over as {taken}",
    )
    await _finish(store, run.taken_over(taken.lease))


async def _one_of_many_takers_wins(store: RunStore) -> None:
    run = await _create(store)
    await _commit(store, run, changes={"status": "paused"}, release_lease=True)
    attempts = [
        take_over_run(store, run.id, f"taker-{n}", LONG, status="paused") for n in range(RACERS)
    ]
    outcomes = await asyncio.gather(*attempts, return_exceptions=True)
    winners = [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]
    codes = _codes(outcomes)
    _ensure(
        len(winners) == 1 and set(codes) == {"RUN_CONFLICT"},
        f"{RACERS} concurrent takeovers of one run: {len(winners)} won, the others failed "
        f"with {sorted(set(codes))}; want exactly one winner and RUN_CONFLICT",
    )
    taken = winners[0]
    _ensure(
        taken.lease.generation == run.lease.generation + 1,
        f"the winning takeover has generation {taken.lease.generation}, want "
        f"{run.lease.generation + 1}",
    )
    await _finish(store, run.taken_over(taken.lease))
