"""Checks of the run-store conformance suite for cancel requests: what ``request_cancel``
records, and the renewal a store then refuses. Part of
:mod:`fevex.testing.run_store_contract`, which documents and runs them."""

from __future__ import annotations

import asyncio
import dataclasses
import time

from fevex.errors import FevexRunError
from fevex.runtime.run_store import RunStore
from fevex.testing._run_store_steps import (
    LONG,
    SHORT_LEASE,
    ManualClock,
    RunStoreFactory,
    _commit,
    _create,
    _ensure,
    _finish,
    _found,
    _holds,
    _let_short_leases_expire,
    _opened,
    _refused,
    _Run,
)


async def check_cancel_requests(factory: RunStoreFactory, clock: ManualClock | None = None) -> None:
    async with _opened(factory) as store:
        run = await _create(store, checkpoint={"step": 1})
        await _commit(store, run, checkpoint={"step": 2})
        before = await _holds(store, run, "before a cancel request")
        _ensure(
            before["run"]["cancel_requested"] is False,
            f"a new run must have no cancel request: {before['run']}",
        )
        requested = {**before["run"], "cancel_requested": True}
        for which in ("a first", "a repeated"):
            answer = await store.request_cancel(run.id)
            _ensure(
                answer.to_json() == requested,
                f"{which} request_cancel of a running run returned {answer.to_json()}, want "
                f"{requested}",
            )
            after = await _holds(store, run, f"after {which} cancel request")
            _ensure(
                after == {**before, "run": requested},
                "request_cancel must record the request and change nothing else (not the "
                f"revision, the events, the checkpoint, the session): the store held {before}, "
                f"now {after}",
            )
        # The owner's lease and revision still write, its cancellation included, and the
        # request is never cleared.
        await _commit(store, run)
        await _finish(store, run, status="cancelled")
        ended = _found(await store.get_run(run.id), f"run {run.id} is missing")
        _ensure(
            ended.status == "cancelled" and ended.cancel_requested,
            f"after the owner committed the cancellation the run read back as {ended}; want "
            "it cancelled, its request kept",
        )
        again = await store.request_cancel(run.id)
        _ensure(again == ended, f"request_cancel of a cancelled run returned {again}, not {ended}")

        # A run in another status is returned unchanged, and nothing is recorded.
        paused = await _create(store)
        await _commit(store, paused, changes={"status": "paused"}, release_lease=True)
        completed = await _create(store)
        await _finish(store, completed)
        for other, status in ((paused, "paused"), (completed, "completed")):
            held = await _holds(store, other, f"before a cancel request of a {status} run")
            answer = await store.request_cancel(other.id)
            _ensure(
                answer.to_json() == held["run"],
                f"request_cancel of a {status} run returned {answer.to_json()}; want the run "
                f"unchanged, {held['run']}",
            )
            after = await _holds(store, other, f"after a cancel request of a {status} run")
            _ensure(after == held, f"request_cancel changed a {status} run: {after}")
        paused.lease = await store.acquire_lease(paused.id, "worker-b", LONG, status="paused")
        await _finish(store, paused, status="cancelled")

    # The request is stored like the rest of the run.
    async with _opened(factory) as store:
        kept = _found(await store.get_run(run.id), f"run {run.id} is missing after reopening")
        _ensure(kept == ended, f"after reopening the store, run {run.id} read back as {kept}")


async def check_renewal_after_cancel_request(
    factory: RunStoreFactory, clock: ManualClock | None = None
) -> None:
    async with _opened(factory) as store:
        # Under a live lease: the lease is checked first, then the request; nothing changes,
        # and the owner commits the cancellation after the refusal.
        live = await _create(store)
        await store.request_cancel(live.id)
        before = await _holds(store, live, "after a cancel request")
        stale = dataclasses.replace(live.lease, generation=live.lease.generation + 1)
        renewal = store.renew_lease(live.id, stale, LONG)
        what = "renewing a lease that is not the live one of a run asked to cancel"
        await _refused("LEASE_LOST", renewal, f"{what} (the lease is checked first)")
        renewal = store.renew_lease(live.id, live.lease, LONG)
        await _refused(
            "RUN_CANCEL_REQUESTED", renewal, "renewing the lease of a run asked to cancel"
        )
        after = await _holds(store, live, "after refused renewals")
        _ensure(after == before, f"a refused renewal changed the run: {before}, now {after}")
        await _finish(store, live, status="cancelled")

        # Nothing was renewed: the lease expires when it would have, and is then lost to
        # its owner and taken by another worker, which finds the request.
        run, lapses_at = await _refused_before_expiry(store, clock)
        if clock is None:
            await asyncio.sleep(max(0.0, lapses_at - time.monotonic()) + 0.2)
        else:
            await _let_short_leases_expire(clock)
        try:
            taken = await store.acquire_lease(run.id, "worker-b", LONG)
        except FevexRunError as error:
            raise AssertionError(
                f"acquire_lease after the lease of a run asked to cancel expired failed with "
                f"{error}: a renewal refused with RUN_CANCEL_REQUESTED must not renew"
            ) from None
        _ensure(
            taken.generation == run.lease.generation + 1,
            f"taking over {run.lease} gave {taken}; want the next generation",
        )
        renewal = store.renew_lease(run.id, run.lease, LONG)
        what = "renewing the lease a run asked to cancel was taken from"
        await _refused("LEASE_LOST", renewal, f"{what} (the lease is checked first)")
        run.lease = taken
        stored = _found(await store.get_run(run.id), f"run {run.id} is missing")
        _ensure(stored.cancel_requested, f"a takeover lost the run's cancel request: {stored}")
        refusal = store.renew_lease(run.id, taken, LONG)
        await _refused("RUN_CANCEL_REQUESTED", refusal, "renewing a taken-over run asked to cancel")
        await _finish(store, run, status="cancelled")


async def _refused_before_expiry(store: RunStore, clock: ManualClock | None) -> tuple[_Run, float]:
    """Create a run on a short lease, request its cancellation and have a renewal refused
    while the lease is live; return the run and when (``time.monotonic``) its lease lapses.

    On a store's real clock a loaded machine may let the lease lapse before the renewal is
    refused, which then rightly fails as ``LEASE_LOST``: the attempt is repeated on a
    longer lease, so the check proves the refusal renews nothing on any machine.
    """
    for seconds in (SHORT_LEASE, 2.0, 10.0):
        started = time.monotonic()
        run = await _create(store, seconds=seconds)
        await store.request_cancel(run.id)
        try:
            await store.renew_lease(run.id, run.lease, LONG)
        except FevexRunError as error:
            lapsed = clock is None and time.monotonic() - started >= seconds
            if error.code == "LEASE_LOST" and lapsed:
                run.lease = await store.acquire_lease(run.id, "worker-b", LONG)
                await _finish(store, run, status="cancelled")
                continue
            _ensure(
                error.code == "RUN_CANCEL_REQUESTED",
                f"renewing the lease of a run asked to cancel: want RUN_CANCEL_REQUESTED, "
                f"got {error}",
            )
            return run, started + seconds
        raise AssertionError(
            "renewing the lease of a run asked to cancel: want FevexRunError "
            "RUN_CANCEL_REQUESTED, but it succeeded"
        )
    raise AssertionError(
        "renewing the lease of a run asked to cancel: every lease, up to 10 s, lapsed before "
        "the store answered"
    )
