"""The run-store conformance suite: what every :class:`~fevex.runtime.RunStore` must guarantee.

A store's tests run the whole suite::

    from fevex.testing import check_run_store

    async def test_the_store_keeps_the_contract(tmp_path):
        await check_run_store(lambda: open_acme_store(f"acme:///{tmp_path}/runs"))

or one pytest test per check, so that a failure names its check::

    @pytest.mark.parametrize("check", RUN_STORE_CHECKS, ids=lambda check: check.__name__)
    async def test_run_store_contract(check, tmp_path):
        await check(lambda: open_acme_store(f"acme:///{tmp_path}/runs"))

``factory`` takes no argument and returns a store, or an awaitable of one. Each call must
give a new handle on the same storage: every check closes the handle it opened, and one
check closes the storage and reopens it through ``factory``. A store that lives only in
memory passes ``lambda: store`` with one instance, whose ``close`` keeps its data.

The checks use fresh random ids, so they can share one storage, also one that holds other
data. Where a lease must expire, a check grants it for 0.2 s and sleeps past it; when the
store reads a :class:`ManualClock`, pass the same clock as ``clock=`` and the suite
advances it instead. Errors are :class:`~fevex.FevexRunError` with the code named below:
one code per fault, the same in every store, as the rules of
:mod:`fevex.runtime.store_rules` (which a store calls) decide it, in their order
(arguments, then the run, the lease, the revision, the events).

What a store must guarantee, and the check that proves it:

- Runs, events, checkpoints and sessions read back equal to what was written, as plain
  JSON (dicts with string keys, lists, strings, numbers, booleans, ``None``); a run's
  ``kind``, ``name``, ``version``, ``parent_run_id``, ``root_run_id`` and ``context``
  included.
  ``create_execution`` reserves the session, advances its revision and grants the first
  lease to ``lease_owner``; a terminal commit applies its changes, appends ``history`` and
  frees the session. [``check_create_and_read_back``]
- Only the live lease writes: same owner, same generation, not expired by the store's
  clock, else ``LEASE_LOST``, also at a stale revision (the lease is checked first).
  Acquiring advances the generation, also for a reused owner id; releasing expires the
  lease and keeps the counter. [``check_lease_fencing``]
- Renewal keeps the generation, moves the expiry forward and never revives an expired
  lease. Acquiring needs an expired or released lease and a run in the asked status
  (``RUN_CONFLICT``), and an existing run (``RUN_NOT_FOUND``). [``check_lease_renewal``]
- ``request_cancel`` records a cancel request on a running run (``cancel_requested``),
  idempotently, and returns the run; it changes nothing else (not the revision, the
  events, the checkpoint or the session), so the owner's commits go on, its cancellation
  included; the request is never cleared and survives reopening. A paused or finished run
  is returned unchanged. [``check_cancel_requests``]
- Renewing the lease of a run asked to cancel is ``RUN_CANCEL_REQUESTED`` (after
  ``LEASE_LOST``: a lease that is not live is lost first) and renews nothing: the lease
  expires when it would have, and another worker then acquires it and finds the request.
  [``check_renewal_after_cancel_request``]
- A commit whose revision is not the stored one plus one is refused with
  ``RUN_CONFLICT``; a refused commit writes nothing. [``check_revision_compare_and_set``]
- A commit that changes a run field outside ``RUN_FIELDS_A_COMMIT_CHANGES`` or carries an
  event of another run is ``INVALID_ARGUMENT``, checked before the run, the lease and the
  revision (also at a stale revision, under a lost lease, for an unknown run); so is a
  creation with an event of another run. Nothing is written.
  [``check_refused_arguments``]
- Events continue the run's sequence one by one and have ids no event has: a gap, a
  repeat, a step out of order, a creation not starting at 1, an id of a stored event (of
  any run) or one id twice in a step is ``RUN_CONFLICT``, and nothing is written.
  [``check_event_sequence``]
- ``commit_execution``, ``request_cancel``, ``renew_lease`` and ``acquire_lease`` of an
  unknown run are ``RUN_NOT_FOUND``, ``save_session`` of an unknown session is
  ``SESSION_NOT_FOUND``, and an unknown run has no events. [``check_unknown_records``]
- Commits survive closing and reopening the store; a replayed commit is refused without
  duplicating events. [``check_commit_survives_reopen``]
- One run holds a session at a time, and creation checks the revision of the session
  snapshot it was given (``RUN_CONFLICT``) [``check_session_reservation``], also among 100
  concurrent creations [``check_concurrent_creates_have_one_winner``] and 100 concurrent
  app runs, whose losers fail before calling the model
  [``check_concurrent_app_runs_have_one_winner``].
- ``save_session`` refuses a stale expected revision (``SESSION_CONFLICT``) and a held
  session (``RUN_CONFLICT``), and returns the next revision. [``check_session_compaction``]
- ``list_events`` pages by ``after``, ``limit`` and ``order``; a cursor that is unknown or
  belongs to another run raises ``INVALID_CURSOR``. [``check_event_paging``]
- ``list_events`` takes a positive integer or ``None`` as ``limit`` (not 0, a negative
  number, a bool, a string or a float), ``"asc"`` or ``"desc"`` as ``order`` and a string
  or ``None`` as ``after``, else ``INVALID_ARGUMENT``, checked before the cursor;
  ``expired_run_ids`` takes a whole number, 0 or more. [``check_list_arguments``]
- ``list_runs`` lists the runs that hold every filter given (``status``, ``kind``,
  ``name``, ``session_id``, ``parent_run_id``), newest first (``created_at``, then ``id``,
  descending, compared as text), at most ``limit`` (50 when not given); ``after`` (a run
  id) continues below that run, so that pages have neither gaps nor repeats, runs created
  meanwhile never shift a later page, and a cursor whose run stopped matching the filters
  still marks its place. A cursor that names no run is ``INVALID_CURSOR``.
  [``check_run_listing``]
- ``list_runs`` takes a run status or ``None`` as ``status``, non-empty strings or
  ``None`` as the other filters, an integer from 1 to 1000 as ``limit`` and a string or
  ``None`` as ``after``, else ``INVALID_ARGUMENT``, checked before the cursor.
  [``check_run_listing_arguments``]
- ``claim_expired_run`` gives each expired running run to one claimer only, and never a
  live, paused or finished run. [``check_expired_run_claims``]
- ``claim_expired_run(names=...)`` claims only runs whose ``name`` is among
  ``names`` (an empty collection: none); a single string, or a name that is not a string,
  is ``INVALID_ARGUMENT`` and claims nothing. [``check_claims_by_name``]
- ``expired_run_ids`` lists the running runs whose lease expired (also one released while
  running), oldest expiry first in a stable order, at most ``limit``, and never a live,
  paused or finished run; listing takes nothing: each listed run is then acquired with the
  next generation. [``check_expired_run_ids``]
- A paused commit that releases its lease lets a resumer acquire it at once with the next
  generation; the session stays reserved. [``check_paused_lease_release``]
- ``take_over_run`` (a :class:`~fevex.runtime.run_store.TakeoverRunStore`'s own, or the
  contract's ``acquire_lease`` and reads composed by
  :func:`~fevex.runtime.run_store.take_over_run`) takes a paused or lapsed run with the next
  generation and reads, under that lease, the run as ``get_run`` reads it, its checkpoint
  and its last event's sequence; the lease it replaced is fenced out. It is refused as
  ``acquire_lease`` is (``RUN_CONFLICT`` for a live lease or another status,
  ``RUN_NOT_FOUND``), taking nothing, and of 100 concurrent takers exactly one wins.
  [``check_run_takeover``]
- A commit's ``wake_at`` (a finite number or ``None``, else ``INVALID_ARGUMENT``) reads
  back as given. ``claim_due_run`` gives each paused run whose ``wake_at`` has come and
  whose lease is not live to one claimer only, earliest first, with the next generation,
  moving its ``wake_at`` to the lease's expiry (due again if the claimer dies) and
  leaving it paused; never a run due later, one without ``wake_at``, a running run or one
  whose lease is live; ``names`` as for claims of expired runs. [``check_due_wake_ups``]
- A commit that ends a child run sets its parent's ``wake_at`` to the store's now, also
  while the parent is still running (it is then due once it pauses), never for a parent
  that has ended; a commit that does not end the child wakes nothing.
  [``check_children_wake_parents``]
- A store that offers ``wait_for_events`` (``NotifyingRunStore``) ends a wait at once when
  the run has events after the cursor, has ended or the cursor is unknown, ends it when a
  commit lands meanwhile, and lets it time out on an idle run.
  [``check_followers_are_told``]
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Protocol

from fevex._ground.clock import new_id
from fevex.messages import Message
from fevex.runtime.run_store import (
    EventOrder,
    RunLease,
)
from fevex.testing._run_store_cancel_requests import (
    check_cancel_requests,
    check_renewal_after_cancel_request,
)
from fevex.testing._run_store_listing import check_run_listing, check_run_listing_arguments
from fevex.testing._run_store_records import check_create_and_read_back
from fevex.testing._run_store_refusals import (
    check_claims_by_name,
    check_event_sequence,
    check_list_arguments,
    check_refused_arguments,
    check_unknown_records,
)
from fevex.testing._run_store_sessions import (
    check_concurrent_app_runs_have_one_winner,
    check_concurrent_creates_have_one_winner,
    check_session_compaction,
    check_session_reservation,
)
from fevex.testing._run_store_steps import (
    _ALL_EXPIRED,
    _ORDERS,
    CHECK_TIMEOUT,
    LONG,
    SHORT_LEASE,
    ManualClock,
    RunStoreFactory,
    _commit,
    _create,
    _creation,
    _ensure,
    _finish,
    _found,
    _history,
    _holds,
    _let_short_leases_expire,
    _new_run,
    _opened,
    _refused,
    _session,
)
from fevex.testing._run_store_takeovers import check_run_takeover
from fevex.testing._run_store_wakeups import (
    check_children_wake_parents,
    check_due_wake_ups,
    check_followers_are_told,
)

__all__ = [
    "RUN_STORE_CHECKS",
    "ManualClock",
    "RunStoreCheck",
    "RunStoreContractError",
    "RunStoreFactory",
    "RunStoreReport",
    "check_run_store",
]


class RunStoreCheck(Protocol):
    """One check of the suite: raises ``AssertionError`` saying what the store got wrong."""

    __name__: str

    def __call__(
        self, factory: RunStoreFactory, clock: ManualClock | None = None
    ) -> Awaitable[None]: ...


@dataclass(frozen=True, slots=True)
class RunStoreReport:
    """The names of the checks a store passed, in the order they ran."""

    passed: tuple[str, ...]


class RunStoreContractError(AssertionError):
    """The store broke the contract; ``failures`` maps each failed check to its error."""

    def __init__(self, failures: Mapping[str, BaseException], passed: tuple[str, ...]) -> None:
        lines = "".join(f"\n- {name}: {_describe(error)}" for name, error in failures.items())
        total = len(failures) + len(passed)
        super().__init__(f"The run store failed {len(failures)} of {total} checks:{lines}")
        self.failures = dict(failures)
        self.passed = passed


async def check_run_store(
    factory: RunStoreFactory, *, clock: ManualClock | None = None
) -> RunStoreReport:
    """Run every check of :data:`RUN_STORE_CHECKS` on the storage ``factory`` opens.

    All checks run; then :class:`RunStoreContractError` (an ``AssertionError``) names
    each one that failed. Returns the report when all passed.
    """
    passed: list[str] = []
    failures: dict[str, BaseException] = {}
    for check in RUN_STORE_CHECKS:
        timer = asyncio.timeout(CHECK_TIMEOUT)
        try:
            async with timer:
                await check(factory, clock)
        except Exception as error:
            timed_out = AssertionError(f"did not finish within {CHECK_TIMEOUT:.0f} s")
            failures[check.__name__] = timed_out if timer.expired() else error
        else:
            passed.append(check.__name__)
    if failures:
        raise RunStoreContractError(failures, tuple(passed)) from next(iter(failures.values()))
    return RunStoreReport(tuple(passed))


def _describe(error: BaseException) -> str:
    return str(error) if isinstance(error, AssertionError) else f"{type(error).__name__}: {error}"


async def check_lease_fencing(factory: RunStoreFactory, clock: ManualClock | None = None) -> None:
    async with _opened(factory) as store:
        a = await _create(store, owner="worker-a", seconds=SHORT_LEASE)
        await _let_short_leases_expire(clock)
        b_lease = await store.acquire_lease(a.id, "worker-b", LONG)
        _ensure(
            b_lease.owner == "worker-b" and b_lease.generation > a.lease.generation,
            f"acquire_lease after {a.lease} expired returned {b_lease}",
        )
        b = a.taken_over(b_lease)
        await _commit(store, b, checkpoint={"writer": "b"})
        # A still thinks it holds the run. Even with the revision the store expects next, its
        # write must be refused: only the lease tells the two workers apart.
        a_write = b.next_commit(lease=a.lease, checkpoint={"writer": "a"})
        await _refused("LEASE_LOST", store.commit_execution(a_write), "commit, lost lease")
        await _refused(
            "LEASE_LOST",
            store.commit_execution(a.next_commit(checkpoint={"writer": "a"})),
            "commit under a lost lease at a stale revision (the lease is checked first)",
        )
        await _refused("LEASE_LOST", store.renew_lease(a.id, a.lease, LONG), "renew, lost lease")
        after = await _holds(store, b, "after a lost lease tried to write")
        _ensure(after["checkpoint"] == {"writer": "b"}, f"checkpoint is {after['checkpoint']}")

        # Release expires B's lease and keeps the counter: C, reusing A's owner id, gets a
        # newer generation, which neither A's nor B's old lease matches.
        await _commit(store, b, release_lease=True)
        c_lease = await store.acquire_lease(a.id, "worker-a", LONG)
        _ensure(
            c_lease.generation > b_lease.generation,
            f"acquire_lease after {b_lease} was released returned {c_lease}; release must "
            "keep the generation counter",
        )
        c = b.taken_over(c_lease)
        for stale, whose in ((a.lease, "A's (same owner id as C)"), (b_lease, "B's released")):
            what = f"{whose} lease after C acquired the run"
            await _refused("LEASE_LOST", store.commit_execution(c.next_commit(lease=stale)), what)
            await _refused("LEASE_LOST", store.renew_lease(a.id, stale, LONG), f"renew {what}")
        await _holds(store, c, "after stale leases tried to write")
        await _finish(store, c)


async def check_lease_renewal(factory: RunStoreFactory, clock: ManualClock | None = None) -> None:
    async with _opened(factory) as store:
        run = await _create(store)
        renewed = await store.renew_lease(run.id, run.lease, LONG * 2)
        _ensure(
            (renewed.owner, renewed.generation) == (run.lease.owner, run.lease.generation)
            and renewed.expires_at > run.lease.expires_at,
            f"renewing {run.lease} returned {renewed}; renewal keeps the owner and generation "
            "and moves the expiry forward",
        )
        run.lease = renewed
        await _commit(store, run)
        acquire = store.acquire_lease(run.id, "worker-b", LONG)
        await _refused("RUN_CONFLICT", acquire, "acquire_lease while a lease is live")
        await _commit(store, run, release_lease=True)
        acquire = store.acquire_lease(run.id, "worker-b", LONG, status="paused")
        await _refused("RUN_CONFLICT", acquire, "acquire_lease(status='paused') of a running run")
        run.lease = await store.acquire_lease(run.id, "worker-b", LONG)
        await _finish(store, run)
        acquire = store.acquire_lease(run.id, "worker-c", LONG)
        await _refused("RUN_CONFLICT", acquire, "acquire_lease of a completed run")
        acquire = store.acquire_lease(new_id("run"), "worker-c", LONG)
        await _refused("RUN_NOT_FOUND", acquire, "acquire_lease of an unknown run")

        expired = await _create(store, seconds=SHORT_LEASE)
        await _let_short_leases_expire(clock)
        renewal = store.renew_lease(expired.id, expired.lease, LONG)
        await _refused("LEASE_LOST", renewal, "renewing an expired lease")
        commit = store.commit_execution(expired.next_commit())
        await _refused("LEASE_LOST", commit, "commit under an expired lease")
        # The refused renewal did not revive the lease: another worker takes it.
        expired.lease = await store.acquire_lease(expired.id, "worker-b", LONG)
        await _finish(store, expired)


async def check_revision_compare_and_set(
    factory: RunStoreFactory, clock: ManualClock | None = None
) -> None:
    async with _opened(factory) as store:
        run = await _create(store, checkpoint={"step": 1})
        await _commit(store, run, checkpoint={"step": 2})
        before = await _holds(store, run, "after a commit")
        for revision, how in ((run.revision + 2, "skips"), (run.revision, "repeats")):
            commit = run.next_commit(
                changes={"status": "completed", "output": "must not be written"},
                checkpoint={"step": 99},
                history=_history("lost", "lost"),
                release_session=True,
                release_lease=True,
            )
            attempt = store.commit_execution(dataclasses.replace(commit, revision=revision))
            await _refused("RUN_CONFLICT", attempt, f"a commit that {how} a revision")
        after = await _holds(store, run, "after commits at wrong revisions")
        _ensure(after == before, f"a refused commit wrote: the store held {before}, now {after}")
        # Nor did they release the lease.
        await _finish(store, run)


async def check_commit_survives_reopen(
    factory: RunStoreFactory, clock: ManualClock | None = None
) -> None:
    async with _opened(factory) as store:
        run = await _create(store, checkpoint={"step": 1})
        usage = {"input_tokens": 2, "output_tokens": 1, "total_tokens": 3}
        checkpoint = {"step": 2, "messages": [Message.user("still there?").to_json()]}
        commit = await _commit(
            store, run, events=2, changes={"usage": usage}, checkpoint=checkpoint
        )
        before = await _holds(store, run, "before closing the store")
    async with _opened(factory) as reopened:
        after = await _holds(reopened, run, "after reopening the store")
        _ensure(after == before, f"before closing the store held {before}, after reopening {after}")
        replay = reopened.commit_execution(commit)
        await _refused("RUN_CONFLICT", replay, "replaying an accepted commit after reopening")
        replayed = await _holds(reopened, run, "after replaying a commit")
        _ensure(replayed == before, f"a replayed commit changed the store: {replayed}")
        # The lease is durable too: its holder carries on.
        await _finish(reopened, run)


async def check_event_paging(factory: RunStoreFactory, clock: ManualClock | None = None) -> None:
    async with _opened(factory) as store:
        run = await _create(store)
        for batch in (9, 10, 5):
            await _commit(store, run, events=batch)
        ids = run.event_ids  # 25 events

        async def page(after: str | None, limit: int | None, order: EventOrder) -> list[str]:
            events = await store.list_events(run.id, after=after, limit=limit, order=order)
            return [event.id for event in events]

        cases: list[tuple[str | None, int | None, EventOrder, list[str]]] = [
            (None, None, "asc", ids),
            (None, None, "desc", ids[::-1]),
            (None, 1, "desc", ids[-1:]),
            (ids[9], 5, "asc", ids[10:15]),
            (ids[19], None, "desc", ids[:19:-1]),
            (ids[4], 3, "desc", ids[:-4:-1]),
            (ids[20], 100, "asc", ids[21:]),
            (ids[-1], None, "asc", []),
            (ids[-1], 5, "desc", []),
        ]
        for after, limit, order, expected in cases:
            got = await page(after, limit, order)
            position = "none" if after is None else f"event {ids.index(after) + 1}"
            _ensure(
                got == expected,
                f"list_events(after={position}, limit={limit}, order={order!r}) of 25 events "
                f"returned {got}, want {expected}",
            )
        walked: list[str] = []
        cursor: str | None = None
        while chunk := await page(cursor, 7, "asc"):
            _ensure(len(walked) < len(ids), "paging with a cursor never ends")
            walked += chunk
            cursor = chunk[-1]
        _ensure(walked == ids, f"paging 7 at a time read {walked}, want {ids}")

        other = await _create(store)
        for cursor, whose in ((new_id("evt"), "an unknown"), (other.event_ids[0], "another run's")):
            for order in _ORDERS:
                what = f"list_events after {whose} event ({order})"
                await _refused("INVALID_CURSOR", page(cursor, None, order), what)
        await _finish(store, run)
        await _finish(store, other)


async def check_expired_run_claims(
    factory: RunStoreFactory, clock: ManualClock | None = None
) -> None:
    async with _opened(factory) as store:
        expired = [await _create(store, seconds=SHORT_LEASE) for _ in range(2)]
        live = await _create(store)
        paused = await _create(store)
        await _commit(store, paused, changes={"status": "paused"}, release_lease=True)
        finished = await _create(store)
        await _finish(store, finished)
        await _let_short_leases_expire(clock)

        claims: list[tuple[str, str, RunLease]] = []

        async def claimer(owner: str) -> None:
            # A shared store may hold other expired runs: claim until none is left, within a
            # bound, in case a broken store hands out the same run forever.
            for _ in range(1000):
                claimed = await store.claim_expired_run(owner, LONG)
                if claimed is None:
                    return
                claims.append((claimed[0], owner, claimed[1]))

        await asyncio.gather(*(claimer(f"claimer-{i}") for i in range(8)))
        claimed_ids = [run_id for run_id, _, _ in claims]
        twice = sorted({run_id for run_id in claimed_ids if claimed_ids.count(run_id) > 1})
        _ensure(not twice, f"concurrent claimers claimed these runs more than once: {twice}")
        for run, what in ((live, "live-leased"), (paused, "paused"), (finished, "completed")):
            _ensure(run.id not in claimed_ids, f"claim_expired_run claimed a {what} run")
        by_run = {run_id: (owner, lease) for run_id, owner, lease in claims}
        for run in expired:
            owner, lease = _found(by_run.get(run.id), f"no claimer claimed expired run {run.id}")
            _ensure(
                lease.owner == owner and lease.generation > run.lease.generation,
                f"{owner} claimed the run of {run.lease} and got {lease}",
            )
            run.lease = lease
            await _finish(store, run, status="failed")
        # The live lease is untouched: its holder still writes.
        await _finish(store, live)


async def check_expired_run_ids(factory: RunStoreFactory, clock: ManualClock | None = None) -> None:
    async with _opened(factory) as store:
        lapsed = await _create(store, seconds=SHORT_LEASE)
        # Created after ``lapsed`` but expired before it: released while still running
        # (its worker gave it up), so the order below is by expiry, not by creation.
        released = await _create(store)
        await _commit(store, released, release_lease=True)
        live = await _create(store)
        paused = await _create(store)
        await _commit(store, paused, changes={"status": "paused"}, release_lease=True)
        finished = await _create(store)
        await _finish(store, finished)
        await _let_short_leases_expire(clock)

        # A shared storage may list other expired runs too: look at these runs only.
        listed = list(await store.expired_run_ids(limit=_ALL_EXPIRED))
        _ensure(
            all(type(run_id) is str for run_id in listed) and len(set(listed)) == len(listed),
            f"expired_run_ids must list each run id once, as a str: {listed!r}",
        )
        for run, what in ((lapsed, "whose lease expired"), (released, "whose lease was released")):
            _ensure(run.id in listed, f"expired_run_ids left out a running run {what}")
        for run, what in ((live, "live-leased"), (paused, "paused"), (finished, "completed")):
            _ensure(run.id not in listed, f"expired_run_ids listed a {what} run")
        _ensure(
            listed.index(released.id) < listed.index(lapsed.id),
            "expired_run_ids must list the oldest expiry first: the run released while running "
            "expired before the one whose lease lapsed, but was listed after it",
        )
        for limit in (0, 1, 2):
            head = list(await store.expired_run_ids(limit=limit))
            _ensure(
                head == listed[:limit],
                f"expired_run_ids(limit={limit}) returned {head}, want the first {limit} of "
                f"{listed[: limit + 2]}...",
            )
        default = await store.expired_run_ids()
        _ensure(len(default) <= 100, f"expired_run_ids() listed {len(default)} runs, over 100")

        # Listing took nothing: each run is acquired with the next generation, and is no
        # longer listed once its lease is live.
        for run in (lapsed, released):
            taken = await store.acquire_lease(run.id, "worker-b", LONG)
            _ensure(
                taken.generation == run.lease.generation + 1,
                f"after expired_run_ids, acquiring {run.lease} gave {taken}: listing must not "
                "take or change the lease",
            )
            run.lease = taken
        relisted = await store.expired_run_ids(limit=_ALL_EXPIRED)
        for run in (lapsed, released):
            _ensure(run.id not in relisted, "expired_run_ids listed a run just acquired")
            await _finish(store, run)
        await _finish(store, live)
        paused.lease = await store.acquire_lease(paused.id, "worker-b", LONG, status="paused")
        await _finish(store, paused, status="cancelled")


async def check_paused_lease_release(
    factory: RunStoreFactory, clock: ManualClock | None = None
) -> None:
    async with _opened(factory) as store:
        run = await _create(store)
        pause = {"approvals": [{"id": "approval-1", "tool_name": "refund", "input": {"n": 1}}]}
        changes = {"status": "paused", "pause": pause}
        await _commit(store, run, changes=changes, checkpoint={"wait": 1}, release_lease=True)
        stored = await store.get_run(run.id)
        _ensure(
            stored is not None and (stored.status, stored.pause) == ("paused", pause),
            f"a paused commit read back as {stored}",
        )
        first = run.lease
        resumed = await store.acquire_lease(run.id, "resumer", LONG, status="paused")
        _ensure(
            resumed.owner == "resumer" and resumed.generation > first.generation,
            f"acquire_lease(status='paused') after the pause released {first} returned {resumed}",
        )
        session = await _session(store, run.run.session_id)
        _ensure(session.active_run_id == run.id, f"a paused run lost its session: {session}")
        late = store.create_execution(_creation(_new_run(session.id), session.revision))
        await _refused("RUN_CONFLICT", late, "create_execution on a paused run's session")
        old = store.commit_execution(run.next_commit(changes={"status": "running"}))
        await _refused("LEASE_LOST", old, "commit under the lease the pause released")
        run.lease = resumed
        await _commit(store, run, changes={"status": "running", "pause": None})
        await _finish(store, run)


RUN_STORE_CHECKS: tuple[RunStoreCheck, ...] = (
    check_create_and_read_back,
    check_lease_fencing,
    check_lease_renewal,
    check_cancel_requests,
    check_renewal_after_cancel_request,
    check_revision_compare_and_set,
    check_refused_arguments,
    check_event_sequence,
    check_unknown_records,
    check_commit_survives_reopen,
    check_session_reservation,
    check_concurrent_creates_have_one_winner,
    check_concurrent_app_runs_have_one_winner,
    check_session_compaction,
    check_event_paging,
    check_list_arguments,
    check_run_listing,
    check_run_listing_arguments,
    check_expired_run_claims,
    check_claims_by_name,
    check_expired_run_ids,
    check_paused_lease_release,
    check_run_takeover,
    check_due_wake_ups,
    check_children_wake_parents,
    check_followers_are_told,
)
"""Every check in the order :func:`check_run_store` runs them: async functions of
``(factory, clock=None)`` that raise ``AssertionError`` on a violation."""
