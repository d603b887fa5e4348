"""Checks of the run-store conformance suite that hold every store to one code per fault
(the rules of :mod:`fevex.runtime.store_rules`, in their order). Part of
:mod:`fevex.testing.run_store_contract`, which documents and runs them."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Any

from fevex._ground.clock import new_id, utc_now
from fevex.events import RunEvent
from fevex.runtime.records import Session
from fevex.runtime.run_store import ExecutionCommit, ExecutionCreate, RunLease, RunStore
from fevex.testing._run_store_steps import (
    _ALL_EXPIRED,
    LONG,
    SHORT_LEASE,
    ManualClock,
    RunStoreFactory,
    _commit,
    _create,
    _creation,
    _ensure,
    _event,
    _finish,
    _found,
    _holds,
    _let_short_leases_expire,
    _new_run,
    _opened,
    _refused,
    _Run,
)

# Run fields no commit changes (creation sets them; request_cancel the cancel request): a
# commit changing any of them is refused.
_FIELDS_NO_COMMIT_CHANGES = (
    "id",
    "session_id",
    "agent_name",
    "kind",
    "input",
    "revision",
    "created_at",
    "updated_at",
    "name",
    "version",
    "parent_run_id",
    "root_run_id",
    "context",
    "cancel_requested",
)
# Neither a positive integer nor None; ``True`` is an int to Python, never a count here.
_BAD_EVENT_LIMITS: tuple[Any, ...] = (0, -1, True, False, "3", 1.5)
_BAD_EXPIRED_LIMITS: tuple[Any, ...] = (-1, True, "3", 1.5, None)
_BAD_ORDERS: tuple[Any, ...] = ("up", "ASC", "", None)


def _with_events(commit: ExecutionCommit, *events: RunEvent) -> ExecutionCommit:
    return dataclasses.replace(commit, events=events)


async def _creation_refused(store: RunStore, create: ExecutionCreate, code: str, what: str) -> None:
    """A refused creation stores neither the run nor a reservation of its session."""
    await _refused(code, store.create_execution(create), what)
    stored = await store.get_run(create.run.id)
    _ensure(stored is None, f"{what}: the refused create stored its run: {stored}")
    session = await store.get_session(create.run.session_id)
    _ensure(
        session is None or session.active_run_id is None,
        f"{what}: the refused create reserved its session: {session}",
    )


async def check_refused_arguments(
    factory: RunStoreFactory, clock: ManualClock | None = None
) -> None:
    async with _opened(factory) as store:
        run = await _create(store, checkpoint={"step": 1})
        other = await _create(store)
        before = await _holds(store, run, "before refused commits")
        others = await _holds(store, other, "before refused commits")
        foreign = _event(other.id, 2)
        lost = dataclasses.replace(run.lease, generation=run.lease.generation + 1)
        cases: dict[str, ExecutionCommit] = {
            f"a commit that changes {field}": run.next_commit(
                changes={"status": "completed", field: "changed"}
            )
            for field in _FIELDS_NO_COMMIT_CHANGES
        }
        bad_field = run.next_commit(changes={"agent_name": "changed"}, checkpoint={"step": 9})
        cases |= {
            "a commit with an event of another run": _with_events(run.next_commit(), foreign),
            "a commit whose second event is another run's": _with_events(
                run.next_commit(), _event(run.id, 2), _event(other.id, 3)
            ),
            # Arguments are checked first: neither the revision nor the lease decides.
            "a field change at a stale revision": dataclasses.replace(bad_field, revision=1),
            "a field change at a skipped revision": dataclasses.replace(bad_field, revision=9),
            "an event of another run at a stale revision": dataclasses.replace(
                _with_events(run.next_commit(), foreign), revision=1
            ),
            "a field change under a lost lease": dataclasses.replace(bad_field, lease=lost),
            "a field change of a new run id": dataclasses.replace(bad_field, run_id=new_id("run")),
        }
        for what, commit in cases.items():
            await _refused("INVALID_ARGUMENT", store.commit_execution(commit), what)
        after = await _holds(store, run, "after refused commits")
        _ensure(after == before, f"a refused commit wrote: the store held {before}, now {after}")
        untouched = await _holds(store, other, "after commits carried its events")
        _ensure(untouched == others, f"a refused commit changed another run: {untouched}")

        creation = _creation(_new_run(), None)
        await _creation_refused(
            store,
            dataclasses.replace(creation, events=(_event(other.id, 1),)),
            "INVALID_ARGUMENT",
            "create_execution with an event of another run",
        )
        # Before the run id is looked at: an existing id with a foreign event is the argument.
        clash = _creation(dataclasses.replace(run.run, session_id=new_id("ses")), None)
        await _refused(
            "INVALID_ARGUMENT",
            store.create_execution(dataclasses.replace(clash, events=(_event(other.id, 1),))),
            "create_execution of an existing run id with an event of another run",
        )
        await _finish(store, run)
        await _finish(store, other)


async def check_event_sequence(factory: RunStoreFactory, clock: ManualClock | None = None) -> None:
    async with _opened(factory) as store:
        run = await _create(store)
        other = await _create(store)
        before = await _holds(store, run, "before refused events")
        others = await _holds(store, other, "before refused events")
        step = run.next_commit()
        twin = _event(run.id, 2)
        cases = {
            "a gap (3 after 1)": _with_events(step, _event(run.id, 3)),
            "a repeat (1 after 1)": _with_events(step, _event(run.id, 1)),
            "sequence 0": _with_events(step, _event(run.id, 0)),
            "a gap in the step (2, 4)": _with_events(step, _event(run.id, 2), _event(run.id, 4)),
            "a step out of order (3, 2)": _with_events(step, _event(run.id, 3), _event(run.id, 2)),
            "an event id of this run, reused": _with_events(
                step, dataclasses.replace(_event(run.id, 2), id=run.event_ids[0])
            ),
            "an event id of another run, reused": _with_events(
                step, dataclasses.replace(_event(run.id, 2), id=other.event_ids[0])
            ),
            "one event id twice in the step": _with_events(
                step, twin, dataclasses.replace(_event(run.id, 3), id=twin.id)
            ),
        }
        for what, commit in cases.items():
            await _refused("RUN_CONFLICT", store.commit_execution(commit), f"a commit with {what}")
        after = await _holds(store, run, "after refused events")
        _ensure(after == before, f"a refused commit wrote: the store held {before}, now {after}")
        untouched = await _holds(store, other, "after another run reused its event id")
        _ensure(untouched == others, f"a refused commit changed another run: {untouched}")
        # The reused id is still the other run's cursor, not this run's.
        cursor = other.event_ids[0]
        follows = await store.list_events(other.id, after=cursor)
        _ensure(list(follows) == [], f"after its only event, {other.id} listed {follows}")
        await _refused(
            "INVALID_CURSOR",
            store.list_events(run.id, after=cursor),
            "list_events after an event id another run tried to reuse",
        )

        late = _creation(_new_run(), None)
        late = dataclasses.replace(late, events=(_event(late.run.id, 2),))
        await _creation_refused(store, late, "RUN_CONFLICT", "create_execution starting at 2")
        reuse = _creation(_new_run(), None)
        reuse = dataclasses.replace(
            reuse, events=(dataclasses.replace(reuse.events[0], id=other.event_ids[0]),)
        )
        what = "create_execution reusing an event id of another run"
        await _creation_refused(store, reuse, "RUN_CONFLICT", what)
        await _commit(store, run, events=2)
        await _finish(store, run)
        await _finish(store, other)


async def check_unknown_records(factory: RunStoreFactory, clock: ManualClock | None = None) -> None:
    async with _opened(factory) as store:
        known = await _create(store)
        unknown = _Run(_new_run(), known.lease, 1, [new_id("evt")])
        await _refused(
            "RUN_NOT_FOUND", store.commit_execution(unknown.next_commit()), "commit, unknown run"
        )
        await _refused(
            "RUN_NOT_FOUND", store.request_cancel(unknown.id), "request_cancel of an unknown run"
        )
        await _refused(
            "RUN_NOT_FOUND",
            store.renew_lease(unknown.id, known.lease, LONG),
            "renew_lease of an unknown run",
        )
        await _refused(
            "RUN_NOT_FOUND",
            store.acquire_lease(unknown.id, "worker-b", LONG),
            "acquire_lease of an unknown run",
        )
        _ensure(await store.get_run(unknown.id) is None, "a refused call created a run")
        listed = await store.list_events(unknown.id)
        _ensure(list(listed) == [], f"list_events of an unknown run returned {listed}")

        now = utc_now()
        missing = Session(new_id("ses"), now, now, summary="never stored")
        await _refused(
            "SESSION_NOT_FOUND",
            store.save_session(missing, expected_revision=0),
            "save_session of an unknown session",
        )
        found = await store.get_session(missing.id)
        _ensure(found is None, f"a refused save_session stored the session: {found}")
        await _finish(store, known)


async def check_list_arguments(factory: RunStoreFactory, clock: ManualClock | None = None) -> None:
    async with _opened(factory) as store:
        run = await _create(store)
        await _commit(store, run, events=2)
        other = await _create(store)
        bad: Any
        for bad in _BAD_EVENT_LIMITS:
            attempt = store.list_events(run.id, limit=bad)
            await _refused("INVALID_ARGUMENT", attempt, f"list_events(limit={bad!r})")
        for bad in _BAD_ORDERS:
            attempt = store.list_events(run.id, order=bad)
            await _refused("INVALID_ARGUMENT", attempt, f"list_events(order={bad!r})")
        for bad in (3, [run.event_ids[0]]):
            attempt = store.list_events(run.id, after=bad)
            await _refused("INVALID_ARGUMENT", attempt, f"list_events(after={bad!r})")
        # Arguments before the cursor: a bad limit or order with a foreign or unknown cursor.
        for cursor in (other.event_ids[0], new_id("evt")):
            attempt = store.list_events(run.id, after=cursor, limit=0)
            await _refused("INVALID_ARGUMENT", attempt, "list_events(limit=0) after a bad cursor")
            bad = "up"
            attempt = store.list_events(run.id, after=cursor, order=bad)
            await _refused("INVALID_ARGUMENT", attempt, "list_events(order='up'), a bad cursor")
        for limit, expected in ((1, run.event_ids[:1]), (len(run.event_ids) + 5, run.event_ids)):
            page = [event.id for event in await store.list_events(run.id, limit=limit)]
            _ensure(page == expected, f"list_events(limit={limit}) returned {page}")

        for bad in _BAD_EXPIRED_LIMITS:
            listing = store.expired_run_ids(limit=bad)
            await _refused("INVALID_ARGUMENT", listing, f"expired_run_ids(limit={bad!r})")
        await _finish(store, run)
        await _finish(store, other)


async def check_claims_by_name(factory: RunStoreFactory, clock: ManualClock | None = None) -> None:
    async with _opened(factory) as store:
        # Names of this check only: a shared storage may hold other expired runs.
        tag = new_id("agent")
        name_a, name_b = f"{tag}-a", f"{tag}-b"
        runs_a = [await _create(store, agent_name=name_a, seconds=SHORT_LEASE) for _ in range(2)]
        # A run of another kind is claimed by its name, whatever its agent_name holds.
        workflow = dataclasses.replace(_new_run(agent_name=""), kind="workflow", name=name_a)
        create = _creation(workflow, None, seconds=SHORT_LEASE)
        runs_a.append(
            _Run(workflow, await store.create_execution(create), 1, [create.events[0].id])
        )
        run_b = await _create(store, agent_name=name_b, seconds=SHORT_LEASE)
        live_a = await _create(store, agent_name=name_a)
        paused_a = await _create(store, agent_name=name_a)
        await _commit(store, paused_a, changes={"status": "paused"}, release_lease=True)
        await _let_short_leases_expire(clock)

        first = runs_a[0].lease.generation
        claimed: dict[str, RunLease] = {}
        for _ in range(_ALL_EXPIRED):
            claim = await store.claim_expired_run("claimer-a", LONG, names={name_a, f"{tag}-c"})
            if claim is None:
                break
            claimed[claim[0]] = claim[1]
        wanted = {run.id for run in runs_a}
        _ensure(
            set(claimed) == wanted,
            f"claim_expired_run(names={{{name_a!r}, ...}}) claimed {sorted(claimed)}; want only "
            f"the expired running runs of that name, {sorted(wanted)} (a workflow's included), "
            "and never a run of another name, a live or a paused one",
        )
        for run in runs_a:
            run.lease = claimed[run.id]
            _ensure(
                run.lease.owner == "claimer-a" and run.lease.generation > first,
                f"claiming {run.id} gave {run.lease}; want claimer-a's, with the next generation",
            )
        nothing_left: tuple[Collection[str], ...] = ([name_a], (), frozenset())
        for names in nothing_left:
            claim = await store.claim_expired_run("claimer-b", LONG, names=names)
            _ensure(claim is None, f"claim_expired_run(names={names!r}) claimed {claim}")
        bad: Any
        for bad in (name_b, [name_b, 7]):
            attempt = store.claim_expired_run("claimer-b", LONG, names=bad)
            await _refused("INVALID_ARGUMENT", attempt, f"claim_expired_run(names={bad!r})")
        claim_b = _found(
            await store.claim_expired_run("claimer-b", LONG, names=(name_b,)),
            f"claim_expired_run(names=({name_b!r},)) claimed nothing, want {run_b.id}: a "
            "refused claim must not take the run",
        )
        _ensure(claim_b[0] == run_b.id, f"names=({name_b!r},) claimed {claim_b}, not {run_b.id}")
        run_b.lease = claim_b[1]
        for run in (*runs_a, run_b, live_a):
            await _finish(store, run)
        paused_a.lease = await store.acquire_lease(paused_a.id, "worker-b", LONG, status="paused")
        await _finish(store, paused_a, status="cancelled")
