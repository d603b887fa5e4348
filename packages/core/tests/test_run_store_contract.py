"""The run-store conformance suite: the in-memory store passes it, broken stores fail it."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import math
import time
from collections.abc import Collection, Sequence
from decimal import Decimal
from typing import Any

import pytest

from fevex import FevexRunError
from fevex.events import RunEvent
from fevex.runtime import (
    AgentRun,
    EventOrder,
    ExecutionCommit,
    ExecutionCreate,
    InMemoryRunStore,
    RunLease,
    RunStore,
    Session,
    run_conflict,
)
from fevex.runtime.run_store import (
    RunTakeover,
    TakeoverRunStore,
    missing_store_methods,
)
from fevex.runtime.store_rules import check_lease, check_revision, claimable_names, lease_is_live
from fevex.testing import (
    RUN_STORE_CHECKS,
    ManualClock,
    RunStoreCheck,
    RunStoreContractError,
    RunStoreFactory,
    check_run_store,
)

pytestmark = pytest.mark.anyio

CHECKS_BY_NAME = {check.__name__: check for check in RUN_STORE_CHECKS}


@pytest.mark.parametrize("clocked", [False, True], ids=["wall-clock", "manual-clock"])
@pytest.mark.parametrize("check", RUN_STORE_CHECKS, ids=lambda check: check.__name__)
async def test_the_in_memory_store_passes(check: RunStoreCheck, clocked: bool) -> None:
    clock = ManualClock() if clocked else None
    store = InMemoryRunStore(clock=clock or time.time)
    await check(lambda: store, clock)


@pytest.mark.parametrize("opening", ["sync", "async"])
async def test_the_suite_runs_every_check_and_reports_them(opening: str) -> None:
    clock = ManualClock()
    store = InMemoryRunStore(clock=clock)

    async def open_store() -> RunStore:
        return store

    factory: RunStoreFactory = (lambda: store) if opening == "sync" else open_store
    report = await check_run_store(factory, clock=clock)
    assert report.passed == tuple(CHECKS_BY_NAME)


# -- stores that break one guarantee each --------------------------------------------


class NoLeaseFence(InMemoryRunStore):
    """Checks the revision only: a worker that lost its lease still writes."""

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        if commit.run_id in self._leases:
            self._leases[commit.run_id] = dataclasses.replace(commit.lease, expires_at=math.inf)
        await super().commit_execution(commit)


class LastWriterWins(InMemoryRunStore):
    """Accepts any revision."""

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        stored = self._runs.get(commit.run_id)
        if stored is not None:
            stored["revision"] = commit.revision - 1
        await super().commit_execution(commit)


class ForgetsGenerationOnRelease(InMemoryRunStore):
    """Resets a released lease, so the next acquisition counts generations from zero."""

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        await super().commit_execution(commit)
        if commit.release_lease:
            self._leases[commit.run_id] = RunLease(commit.lease.owner, 0, 0.0)


class DecimalNumbers(InMemoryRunStore):
    """Reads checkpoint numbers back as Decimal, like a NUMERIC column: equal, not JSON."""

    async def get_checkpoint(self, run_id: str) -> dict[str, Any] | None:
        checkpoint = await super().get_checkpoint(run_id)
        if checkpoint is None:
            return None
        parsed: dict[str, Any] = json.loads(json.dumps(checkpoint), parse_float=Decimal)
        return parsed


class SharedSessions(InMemoryRunStore):
    """Lets a new run take a session that another run holds."""

    async def create_execution(self, create: ExecutionCreate) -> RunLease:
        session = self._sessions.get(create.run.session_id)
        if session is not None:
            self._sessions[session.id] = Session.from_json(
                {**session.to_json(), "active_run_id": None}
            )
        return await super().create_execution(create)


class ForgivingCursors(InMemoryRunStore):
    """Reads from the start when it does not know the cursor."""

    async def list_events(
        self,
        run_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: EventOrder = "asc",
    ) -> Sequence[RunEvent]:
        try:
            return await super().list_events(run_id, after=after, limit=limit, order=order)
        except FevexRunError:
            return await super().list_events(run_id, limit=limit, order=order)


class RacyClaims(InMemoryRunStore):
    """Picks an expired run, lets other tasks run, then takes it without looking again."""

    async def claim_expired_run(
        self, owner: str, seconds: float, *, names: Collection[str] | None = None
    ) -> tuple[str, RunLease] | None:
        now = self.clock()
        for run_id, stored in list(self._runs.items()):
            lease = self._leases.get(run_id)
            if stored["status"] == "running" and lease is not None and lease.expires_at <= now:
                await asyncio.sleep(0)
                taken = RunLease(owner, lease.generation + 1, self.clock() + seconds)
                self._leases[run_id] = taken
                return run_id, taken
        return None


class ForgetsOnClose(InMemoryRunStore):
    """Loses everything when closed, like a store that never flushes its writes."""

    async def close(self) -> None:
        tables: list[dict[str, Any]] = [
            self._runs,
            self._checkpoints,
            self._leases,
            self._sessions,
            self._events,
            self._cursors,
        ]
        for table in tables:
            table.clear()


class ListsLiveRuns(InMemoryRunStore):
    """Reports every running run as expired, live leases included."""

    async def expired_run_ids(self, *, limit: int = 100) -> Sequence[str]:
        return [run_id for run_id, run in self._runs.items() if run["status"] == "running"]


class ChecksRevisionFirst(InMemoryRunStore):
    """Checks the revision before the arguments and the lease: one commit with several
    faults gets another code than in other stores."""

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        stored = self._runs.get(commit.run_id)
        if stored is not None:
            check_revision(commit.run_id, stored["revision"], commit.revision)
        await super().commit_execution(commit)


class ForeignEventsConflict(InMemoryRunStore):
    """Refuses an event of another run as a conflict, not as a bad argument."""

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        if any(event.run_id != commit.run_id for event in commit.events):
            raise run_conflict("Out of order.", run_id=commit.run_id)
        await super().commit_execution(commit)


class AdoptsForeignEvents(InMemoryRunStore):
    """Stores an event of another run as one of the committed run."""

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        events = tuple(dataclasses.replace(e, run_id=commit.run_id) for e in commit.events)
        await super().commit_execution(dataclasses.replace(commit, events=events))


class WritesAnyField(InMemoryRunStore):
    """Lets a commit change any run field, its session or agent included."""

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        changes = dict(commit.changes or {})
        await super().commit_execution(dataclasses.replace(commit, changes=None))
        self._runs[commit.run_id].update(changes)


class NumbersEventsItself(InMemoryRunStore):
    """Renumbers a step's events to follow the stored ones, hiding gaps and repeats."""

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        stored = len(self._events.get(commit.run_id, []))
        events = tuple(
            dataclasses.replace(e, sequence=stored + n) for n, e in enumerate(commit.events, 1)
        )
        await super().commit_execution(dataclasses.replace(commit, events=events))


class ReusesEventIds(InMemoryRunStore):
    """Accepts an event id that is stored already; the old cursor now points here."""

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        for event in commit.events:
            self._cursors.pop(event.id, None)
        await super().commit_execution(commit)


class CreatesUnknownSessions(InMemoryRunStore):
    """Saves a session it does not know instead of refusing it."""

    async def save_session(self, session: Session, *, expected_revision: int) -> Session:
        if session.id not in self._sessions:
            self._sessions[session.id] = dataclasses.replace(session, revision=expected_revision)
        return await super().save_session(session, expected_revision=expected_revision)


class SlicesAnyLimit(InMemoryRunStore):
    """Slices events by whatever limit it gets, as the in-memory store once did:
    ``limit=-1`` drops the last event, ``limit=0`` returns none."""

    async def list_events(
        self,
        run_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: EventOrder = "asc",
    ) -> Sequence[RunEvent]:
        events = list(await super().list_events(run_id, after=after, order=order))
        return events if limit is None else events[:limit]


class AnyOrderIsAscending(InMemoryRunStore):
    """Reads every order but ``"desc"`` as ascending."""

    async def list_events(
        self,
        run_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: EventOrder = "asc",
    ) -> Sequence[RunEvent]:
        order = "desc" if order == "desc" else "asc"
        return await super().list_events(run_id, after=after, limit=limit, order=order)


class SlicesAnyExpiredLimit(InMemoryRunStore):
    """Slices expired run ids by whatever limit it gets: ``limit=-1`` drops the last."""

    async def expired_run_ids(self, *, limit: int = 100) -> Sequence[str]:
        return list(await super().expired_run_ids(limit=1_000_000))[:limit]


class CursorOfAnyRun(InMemoryRunStore):
    """Pages after an event of another run by that event's sequence."""

    async def list_events(
        self,
        run_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: EventOrder = "asc",
    ) -> Sequence[RunEvent]:
        found = self._cursors.get(after) if after is not None else None
        if found is not None and found[0] != run_id:
            events = self._events.get(run_id, [])[found[1] :]
            events = events[::-1] if order == "desc" else events
            return events if limit is None else events[:limit]
        return await super().list_events(run_id, after=after, limit=limit, order=order)


class ClaimsAnyAgent(InMemoryRunStore):
    """Ignores ``names``: a worker claims runs of agents it does not have."""

    async def claim_expired_run(
        self, owner: str, seconds: float, *, names: Collection[str] | None = None
    ) -> tuple[str, RunLease] | None:
        return await super().claim_expired_run(owner, seconds)


class ListsOldestFirst(InMemoryRunStore):
    """Lists runs oldest first, and pages on from the cursor in that order."""

    async def list_runs(self, **arguments: Any) -> Sequence[AgentRun]:
        limit = arguments.pop("limit", 50)
        after = arguments.pop("after", None)
        runs = list(await super().list_runs(**arguments, limit=1000))[::-1]
        if after is not None:
            ids = [run.id for run in runs]
            runs = runs[ids.index(after) + 1 :] if after in ids else []
        return runs[:limit]


class OrdersByInsertion(InMemoryRunStore):
    """Lists the newest inserted run first, as ``ORDER BY rowid DESC`` would, whatever the
    runs' creation times say."""

    async def list_runs(self, **arguments: Any) -> Sequence[AgentRun]:
        listed = {run.id for run in await super().list_runs(**{**arguments, "limit": 1000})}
        limit = arguments.get("limit", 50)
        after = arguments.get("after")
        order = [run_id for run_id in reversed(self._runs) if run_id in listed]
        if after is not None:
            everything = list(reversed(self._runs))
            start = everything.index(after) + 1
            order = [run_id for run_id in everything[start:] if run_id in listed]
        return [AgentRun.from_json(self._runs[run_id]) for run_id in order[:limit]]


class SkipsTiedRuns(InMemoryRunStore):
    """Pages below the cursor's creation time alone: runs created at the same instant as the
    last run of a page are never listed."""

    async def list_runs(self, **arguments: Any) -> Sequence[AgentRun]:
        after = arguments.pop("after", None)
        limit = arguments.pop("limit", 50)
        runs = list(await super().list_runs(**arguments, limit=1000))
        if after is not None and after in self._runs:
            below = self._runs[after]["created_at"]
            runs = [run for run in runs if run.created_at < below]
        return runs[:limit]


class CursorMustMatchFilters(InMemoryRunStore):
    """Refuses a cursor whose run no longer matches the filters (its status changed)."""

    async def list_runs(self, **arguments: Any) -> Sequence[AgentRun]:
        after = arguments.get("after")
        stored = self._runs.get(after) if isinstance(after, str) else None
        status = arguments.get("status")
        if stored is not None and status is not None and stored["status"] != status:
            raise FevexRunError("INVALID_CURSOR", "The cursor is not a run of this listing.")
        return await super().list_runs(**arguments)


class ForgivingRunCursors(InMemoryRunStore):
    """Lists from the newest run when it does not know the cursor."""

    async def list_runs(self, **arguments: Any) -> Sequence[AgentRun]:
        try:
            return await super().list_runs(**arguments)
        except FevexRunError:
            return await super().list_runs(**{**arguments, "after": None})


class IgnoresParentFilter(InMemoryRunStore):
    """Lists the runs of every parent when asked for one parent's."""

    async def list_runs(self, **arguments: Any) -> Sequence[AgentRun]:
        return await super().list_runs(**{**arguments, "parent_run_id": None})


class ListsEveryRunByDefault(InMemoryRunStore):
    """Returns up to 1000 runs when no limit is given."""

    async def list_runs(self, **arguments: Any) -> Sequence[AgentRun]:
        return await super().list_runs(**{"limit": 1000, **arguments})


class SlicesAnyRunLimit(InMemoryRunStore):
    """Slices runs by whatever limit it gets: 0 lists none, 5000 lists everything."""

    async def list_runs(self, **arguments: Any) -> Sequence[AgentRun]:
        limit = arguments.pop("limit", 50)
        return list(await super().list_runs(**arguments, limit=1000))[:limit]


class ForgetsRunTree(InMemoryRunStore):
    """Stores a run without its version, parent, root and context."""

    async def create_execution(self, create: ExecutionCreate) -> RunLease:
        run = dataclasses.replace(
            create.run, version=None, parent_run_id=None, root_run_id=create.run.id, context=None
        )
        return await super().create_execution(dataclasses.replace(create, run=run))


class IgnoresCancelRequests(InMemoryRunStore):
    """Returns the run without recording the request."""

    async def request_cancel(self, run_id: str) -> AgentRun:
        return AgentRun.from_json(self._stored(run_id))


class CancelRequestsAnyRun(InMemoryRunStore):
    """Records a cancel request whatever the run's status."""

    async def request_cancel(self, run_id: str) -> AgentRun:
        self._stored(run_id)["cancel_requested"] = True
        return AgentRun.from_json(self._stored(run_id))


class CancelRequestsAreCommits(InMemoryRunStore):
    """Advances the run's revision when it records a request: the owner's next commit is
    then refused as a stale writer's."""

    async def request_cancel(self, run_id: str) -> AgentRun:
        self._stored(run_id)["revision"] += 1
        return await super().request_cancel(run_id)


class ForgetsCancelRequestsOnCommit(InMemoryRunStore):
    """Clears the request with the owner's next commit."""

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        await super().commit_execution(commit)
        self._stored(commit.run_id)["cancel_requested"] = False


class RenewsDespiteCancelRequests(InMemoryRunStore):
    """Renews the lease of a run asked to cancel: its owner never learns of the request."""

    async def renew_lease(self, run_id: str, lease: RunLease, seconds: float) -> RunLease:
        stored = self._stored(run_id)
        requested, stored["cancel_requested"] = stored["cancel_requested"], False
        try:
            return await super().renew_lease(run_id, lease, seconds)
        finally:
            stored["cancel_requested"] = requested


class RenewsThenRefuses(InMemoryRunStore):
    """Extends the lease of a run asked to cancel, then answers RUN_CANCEL_REQUESTED."""

    async def renew_lease(self, run_id: str, lease: RunLease, seconds: float) -> RunLease:
        try:
            return await super().renew_lease(run_id, lease, seconds)
        except FevexRunError as error:
            if error.code == "RUN_CANCEL_REQUESTED":
                self._leases[run_id] = dataclasses.replace(lease, expires_at=math.inf)
            raise


class CancelRequestBeforeLease(InMemoryRunStore):
    """Answers RUN_CANCEL_REQUESTED before it looks at the lease."""

    async def renew_lease(self, run_id: str, lease: RunLease, seconds: float) -> RunLease:
        if self._stored(run_id)["cancel_requested"]:
            raise FevexRunError("RUN_CANCEL_REQUESTED", "asked to cancel")
        return await super().renew_lease(run_id, lease, seconds)


class ClaimsByAgentName(InMemoryRunStore):
    """Filters claims on ``agent_name``, so a workflow run is never claimed by its name."""

    async def claim_expired_run(
        self, owner: str, seconds: float, *, names: Collection[str] | None = None
    ) -> tuple[str, RunLease] | None:
        chosen = claimable_names(names)
        for run_id, stored in self._runs.items():
            if (
                stored["status"] == "running"
                and not lease_is_live(self._leases[run_id], self.clock())
                and (chosen is None or stored["agent_name"] in chosen)
            ):
                return run_id, await self.acquire_lease(run_id, owner, seconds)
        return None


class WakesEarly(InMemoryRunStore):
    """Hands out any paused run with a ``wake_at``, due or not."""

    async def claim_due_run(
        self, owner: str, seconds: float, *, names: Collection[str] | None = None
    ) -> tuple[str, RunLease] | None:
        chosen = claimable_names(names)
        for run_id, stored in self._runs.items():
            if (
                stored["status"] == "paused"
                and stored["wake_at"] is not None
                and (chosen is None or stored["name"] in chosen)
                and not lease_is_live(self._leases[run_id], self.clock())
            ):
                lease = await self.acquire_lease(run_id, owner, seconds, status="paused")
                stored["wake_at"] = lease.expires_at
                return run_id, lease
        return None


class KeepsWakeAtOnClaim(InMemoryRunStore):
    """Leaves a claimed run's ``wake_at`` in place: due again at once, while claimed."""

    async def claim_due_run(
        self, owner: str, seconds: float, *, names: Collection[str] | None = None
    ) -> tuple[str, RunLease] | None:
        wake_ats = {run_id: stored["wake_at"] for run_id, stored in self._runs.items()}
        claimed = await super().claim_due_run(owner, seconds, names=names)
        if claimed is not None:
            self._runs[claimed[0]]["wake_at"] = wake_ats[claimed[0]]
        return claimed


class ForgetsParents(InMemoryRunStore):
    """Ends a child run without waking its parent."""

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        wake_ats = {run_id: stored["wake_at"] for run_id, stored in self._runs.items()}
        await super().commit_execution(commit)
        for run_id, stored in self._runs.items():
            if run_id != commit.run_id:
                stored["wake_at"] = wake_ats[run_id]


class WakesEndedParents(InMemoryRunStore):
    """Sets the ``wake_at`` of a parent that has ended too."""

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        await super().commit_execution(commit)
        parent = self._runs[commit.run_id]["parent_run_id"]
        if parent in self._runs and (commit.changes or {}).get("status") == "cancelled":
            self._runs[parent]["wake_at"] = self.clock()


class WakesOnEveryChildCommit(InMemoryRunStore):
    """Wakes a parent whenever its child commits."""

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        await super().commit_execution(commit)
        parent = self._runs[commit.run_id]["parent_run_id"]
        if parent in self._runs:
            self._runs[parent]["wake_at"] = self.clock()


class TakesLiveRuns(InMemoryRunStore):
    """Takes a run over whatever its lease: two workers continue one run."""

    async def take_over_run(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunTakeover:
        if run_id in self._leases:
            self._leases[run_id] = dataclasses.replace(self._leases[run_id], expires_at=0.0)
        return await super().take_over_run(run_id, owner, seconds, status=status)


class TakesOverWithoutTheCheckpoint(InMemoryRunStore):
    """Leaves the checkpoint out of a takeover: the taker starts the run over."""

    async def take_over_run(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunTakeover:
        taken = await super().take_over_run(run_id, owner, seconds, status=status)
        return dataclasses.replace(taken, checkpoint=None)


class TakesOverWithoutTheEvents(InMemoryRunStore):
    """Counts no events in a takeover: the taker numbers its events from 1 again."""

    async def take_over_run(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunTakeover:
        taken = await super().take_over_run(run_id, owner, seconds, status=status)
        return dataclasses.replace(taken, last_sequence=0)


class TakesOverTheRunAsItWas(InMemoryRunStore):
    """Reads the run before taking its lease, as it was when it was created."""

    async def take_over_run(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunTakeover:
        taken = await super().take_over_run(run_id, owner, seconds, status=status)
        return dataclasses.replace(taken, run=dataclasses.replace(taken.run, revision=1))


class WithoutTakeovers(InMemoryRunStore):
    """A store written before ``take_over_run``: takeovers compose the contract."""

    take_over_run = None  # type: ignore[assignment]


class NeverTells(InMemoryRunStore):
    """Offers wait_for_events, and lets every wait run out."""

    async def wait_for_events(self, run_id: str, *, after: str | None, timeout: float) -> bool:
        await asyncio.sleep(min(timeout, 0.5))
        return False


class AlwaysTells(InMemoryRunStore):
    """Offers wait_for_events, and ends every wait at once: followers of an idle run spin."""

    async def wait_for_events(self, run_id: str, *, after: str | None, timeout: float) -> bool:
        return True


@pytest.mark.parametrize(
    ("broken", "failing_check"),
    [
        (TakesLiveRuns, "check_run_takeover"),
        (TakesOverWithoutTheCheckpoint, "check_run_takeover"),
        (TakesOverWithoutTheEvents, "check_run_takeover"),
        (TakesOverTheRunAsItWas, "check_run_takeover"),
        (NeverTells, "check_followers_are_told"),
        (AlwaysTells, "check_followers_are_told"),
        (ClaimsByAgentName, "check_claims_by_name"),
        (WakesEarly, "check_due_wake_ups"),
        (KeepsWakeAtOnClaim, "check_due_wake_ups"),
        (ForgetsParents, "check_children_wake_parents"),
        (WakesEndedParents, "check_children_wake_parents"),
        (WakesOnEveryChildCommit, "check_children_wake_parents"),
        (NoLeaseFence, "check_lease_fencing"),
        (LastWriterWins, "check_revision_compare_and_set"),
        (ForgetsGenerationOnRelease, "check_lease_fencing"),
        (ForgetsGenerationOnRelease, "check_paused_lease_release"),
        (DecimalNumbers, "check_create_and_read_back"),
        (SharedSessions, "check_session_reservation"),
        (SharedSessions, "check_concurrent_app_runs_have_one_winner"),
        (ForgivingCursors, "check_event_paging"),
        (RacyClaims, "check_expired_run_claims"),
        (ForgetsOnClose, "check_commit_survives_reopen"),
        (ListsLiveRuns, "check_expired_run_ids"),
        (ChecksRevisionFirst, "check_lease_fencing"),
        (ChecksRevisionFirst, "check_refused_arguments"),
        (ForeignEventsConflict, "check_refused_arguments"),
        (AdoptsForeignEvents, "check_refused_arguments"),
        (WritesAnyField, "check_refused_arguments"),
        (NumbersEventsItself, "check_event_sequence"),
        (ReusesEventIds, "check_event_sequence"),
        (CreatesUnknownSessions, "check_unknown_records"),
        (SlicesAnyLimit, "check_list_arguments"),
        (AnyOrderIsAscending, "check_list_arguments"),
        (SlicesAnyExpiredLimit, "check_list_arguments"),
        (CursorOfAnyRun, "check_event_paging"),
        (ClaimsAnyAgent, "check_claims_by_name"),
        (ListsOldestFirst, "check_run_listing"),
        (OrdersByInsertion, "check_run_listing"),
        (SkipsTiedRuns, "check_run_listing"),
        (CursorMustMatchFilters, "check_run_listing"),
        (ForgivingRunCursors, "check_run_listing"),
        (IgnoresParentFilter, "check_run_listing"),
        (ListsEveryRunByDefault, "check_run_listing"),
        (SlicesAnyRunLimit, "check_run_listing_arguments"),
        (ForgetsRunTree, "check_create_and_read_back"),
        (IgnoresCancelRequests, "check_cancel_requests"),
        (CancelRequestsAnyRun, "check_cancel_requests"),
        (CancelRequestsAreCommits, "check_cancel_requests"),
        (ForgetsCancelRequestsOnCommit, "check_cancel_requests"),
        (RenewsDespiteCancelRequests, "check_renewal_after_cancel_request"),
        (RenewsThenRefuses, "check_renewal_after_cancel_request"),
        (CancelRequestBeforeLease, "check_renewal_after_cancel_request"),
    ],
    ids=lambda value: value if isinstance(value, str) else value.__name__,
)
async def test_a_broken_store_fails_the_suite(
    broken: type[InMemoryRunStore], failing_check: str
) -> None:
    clock = ManualClock()
    store = broken(clock=clock)
    with pytest.raises(RunStoreContractError) as caught:
        await check_run_store(lambda: store, clock=clock)
    assert failing_check in caught.value.failures
    assert f"\n- {failing_check}: " in str(caught.value)
    assert set(caught.value.failures) | set(caught.value.passed) == set(CHECKS_BY_NAME)
    # Run alone, the check fails as well, with the reason in its message.
    with pytest.raises(AssertionError, match=r"\S"):
        await CHECKS_BY_NAME[failing_check](lambda: store, clock)


@pytest.mark.parametrize("clocked", [False, True], ids=["wall-clock", "manual-clock"])
async def test_a_store_without_its_own_takeovers_passes_through_the_contract(
    clocked: bool,
) -> None:
    clock = ManualClock() if clocked else None
    store = WithoutTakeovers(clock=clock or time.time)
    assert not isinstance(store, TakeoverRunStore)
    assert isinstance(InMemoryRunStore(), TakeoverRunStore)
    await CHECKS_BY_NAME["check_run_takeover"](lambda: store, clock)


async def test_a_short_lease_that_lapses_before_the_refusal_is_tried_again_longer() -> None:
    # On a loaded machine the store may take longer than the shortest lease to answer; the
    # renewal is then rightly LEASE_LOST, and the check must not blame the store for it.
    class SlowToRequest(InMemoryRunStore):
        slowed = 0

        async def request_cancel(self, run_id: str) -> AgentRun:
            answer = await super().request_cancel(run_id)
            if self.slowed < 2:  # the live run's request, then the short-leased one's
                self.slowed += 1
                await asyncio.sleep(0.3)
            return answer

    store = SlowToRequest()
    await CHECKS_BY_NAME["check_renewal_after_cancel_request"](lambda: store, None)
    assert store.slowed == 2


async def test_a_store_error_is_reported_under_the_check_that_met_it() -> None:
    class LostSessions(InMemoryRunStore):
        async def get_session(self, session_id: str) -> Session | None:
            raise RuntimeError("the session table is gone")

    clock = ManualClock()
    store = LostSessions(clock=clock)
    with pytest.raises(RunStoreContractError) as caught:
        await check_run_store(lambda: store, clock=clock)
    assert "check_create_and_read_back" in caught.value.failures
    assert "RuntimeError: the session table is gone" in str(caught.value)


# -- the methods a store must have ----------------------------------------------------

CONTRACT_METHODS = [
    "create_execution",
    "commit_execution",
    "request_cancel",
    "renew_lease",
    "acquire_lease",
    "claim_expired_run",
    "expired_run_ids",
    "claim_due_run",
    "get_run",
    "list_runs",
    "get_checkpoint",
    "get_session",
    "save_session",
    "list_events",
    "close",
]


def test_every_method_of_the_contract_is_looked_for() -> None:
    declared = {
        name
        for name, value in vars(RunStore).items()
        if inspect.isfunction(value) and not name.startswith("_")
    }
    assert missing_store_methods(object()) == CONTRACT_METHODS
    assert set(CONTRACT_METHODS) == declared


def test_a_complete_store_misses_nothing() -> None:
    assert missing_store_methods(InMemoryRunStore()) == []


def test_a_store_missing_methods_is_told_which() -> None:
    class OlderStore(InMemoryRunStore):
        """Written before claims and listing existed; ``close`` is not a method."""

        claim_expired_run = None  # type: ignore[assignment]
        close = "closed"  # type: ignore[assignment]

        def __getattribute__(self, name: str) -> Any:
            if name == "expired_run_ids":
                raise AttributeError(name)
            return super().__getattribute__(name)

    class ReadOnlyStore:
        async def get_run(self, run_id: str) -> None:
            return None

    assert missing_store_methods(OlderStore()) == [
        "claim_expired_run",
        "expired_run_ids",
        "close",
    ]
    assert missing_store_methods(ReadOnlyStore()) == [
        name for name in CONTRACT_METHODS if name != "get_run"
    ]


# -- the rules, at their boundaries -----------------------------------------------------


@pytest.mark.parametrize(
    ("names", "chosen"),
    [
        (None, None),
        ({"a", "b"}, frozenset({"a", "b"})),
        (["a", "a"], frozenset({"a"})),
        ((), frozenset()),
        ({"a": 1}.keys(), frozenset({"a"})),
    ],
)
def test_claimable_names_accepts_collections_of_names(
    names: Collection[str] | None, chosen: frozenset[str] | None
) -> None:
    assert claimable_names(names) == chosen


@pytest.mark.parametrize("names", ["agent", b"agent", [1], ["a", None], 3, iter(["a"])])
def test_claimable_names_refuses_anything_else(names: Any) -> None:
    with pytest.raises(FevexRunError) as caught:
        claimable_names(names)
    assert caught.value.code == "INVALID_ARGUMENT"


def test_a_lease_is_dead_at_its_expiry() -> None:
    lease = RunLease("worker-a", 3, 100.0)
    assert lease_is_live(lease, 99.999)
    assert not lease_is_live(lease, 100.0)
    with pytest.raises(FevexRunError) as caught:
        check_lease("run-1", lease, lease, 100.0)
    assert caught.value.code == "LEASE_LOST"
    check_lease("run-1", lease, lease, 99.0)


async def test_a_worker_claims_only_the_runs_of_its_agents() -> None:
    clock = ManualClock()
    store = InMemoryRunStore(clock=clock)
    for run_id, agent in (("run-a", "a"), ("run-b", "b")):
        run = AgentRun(run_id, f"ses-{agent}", agent, "running", None, "t", "t", revision=1)
        await store.create_execution(ExecutionCreate(run, None, lease_seconds=1.0))
    clock.advance(2.0)
    assert await store.claim_expired_run("w", 60.0, names=set()) is None
    claimed = await store.claim_expired_run("w", 60.0, names={"b", "c"})
    assert claimed is not None
    assert claimed[0] == "run-b"
    assert await store.claim_expired_run("w", 60.0, names={"b"}) is None
    claimed = await store.claim_expired_run("w", 60.0)
    assert claimed is not None
    assert claimed[0] == "run-a"


# -- the run record -----------------------------------------------------------------------


def test_a_run_without_a_name_or_root_is_its_agents_and_its_own() -> None:
    run = AgentRun("run-1", "ses-1", "support", "running", "hi", "t", "t", revision=1)
    assert (run.kind, run.name, run.root_run_id) == ("agent", "support", "run-1")
    assert (run.version, run.parent_run_id, run.context) == (None, None, None)
    assert AgentRun.from_json(run.to_json()) == run
    assert json.loads(json.dumps(run.to_json())) == run.to_json()


def test_a_child_run_keeps_its_tree_version_and_context() -> None:
    context = {"actor": {"id": "u-1"}, "namespace": "acme", "attributes": {}, "prompt_values": {}}
    child = AgentRun(
        "run-2",
        "ses-2",
        "refunds",
        "running",
        None,
        "t",
        "t",
        kind="workflow",
        name="refunds",
        version="3",
        parent_run_id="run-1",
        root_run_id="run-0",
        context=context,
    )
    data = child.to_json()
    assert {key: data[key] for key in ("kind", "name", "version", "parent_run_id")} == {
        "kind": "workflow",
        "name": "refunds",
        "version": "3",
        "parent_run_id": "run-1",
    }
    assert (data["root_run_id"], data["context"]) == ("run-0", context)
    assert AgentRun.from_json(data) == child


def test_a_run_stored_before_the_run_tree_existed_reads_with_defaults() -> None:
    stored = {
        "id": "run-1",
        "session_id": "ses-1",
        "agent_name": "support",
        "status": "paused",
        "input": "hi",
        "created_at": "t",
        "updated_at": "t",
        "revision": 3,
        "kind": "agent",
    }
    run = AgentRun.from_json(stored)
    assert (run.name, run.root_run_id, run.revision) == ("support", "run-1", 3)
    assert (run.version, run.parent_run_id, run.context) == (None, None, None)
    assert run.cancel_requested is False


def test_a_cancel_request_reads_back_from_json() -> None:
    run = AgentRun("run-1", "ses-1", "support", "running", "hi", "t", "t", revision=2)
    assert run.cancel_requested is False
    assert run.to_json()["cancel_requested"] is False
    requested = dataclasses.replace(run, cancel_requested=True)
    data = json.loads(json.dumps(requested.to_json()))
    assert data["cancel_requested"] is True
    assert AgentRun.from_json(data) == requested
    # As a SQL store reads a boolean column: 0 or 1.
    assert AgentRun.from_json({**data, "cancel_requested": 1}) == requested
    assert AgentRun.from_json({**data, "cancel_requested": 0}) == run
