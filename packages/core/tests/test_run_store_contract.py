"""The run-store conformance suite: the in-memory store passes it, broken stores fail it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pytest

from fevex import FevexRunError
from fevex.events import RunEvent
from fevex.runtime import (
    EventOrder,
    ExecutionCommit,
    ExecutionCreate,
    InMemoryRunStore,
    RunLease,
    RunStore,
    Session,
)
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

    def _check_lease(self, run_id: str, lease: RunLease) -> None:
        return None


class LastWriterWins(InMemoryRunStore):
    """Accepts any revision."""

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        stored = self._runs.get(commit.run_id)
        if stored is not None:
            stored["revision"] = commit.revision - 1
        await super().commit_execution(commit)


class ForgetsGenerationOnRelease(InMemoryRunStore):
    """Deletes a released lease, so the next acquisition counts generations from zero."""

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        await super().commit_execution(commit)
        if commit.release_lease:
            del self._leases[commit.run_id]


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

    async def claim_expired_run(self, owner: str, seconds: float) -> tuple[str, RunLease] | None:
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


@pytest.mark.parametrize(
    ("broken", "failing_check"),
    [
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
