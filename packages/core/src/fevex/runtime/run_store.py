"""The run-store contract: what the runtime needs from persistence.

Stores keep and return plain JSON only. Three guarantees make runs durable:

- Session reservation is atomic with run creation: two runs never hold one session.
- Every commit is fenced twice, in the same transaction that writes it: by the run's
  ``revision`` (the stored one must be one below the commit's) and by the run's lease (the
  owner and generation must match the stored lease, which must not have expired by the
  store's clock). A worker that lost its lease can never write again.
- Acquiring a lease advances the generation, also when an owner id is reused; releasing
  expires the lease but keeps the counter.

Every store checks its calls with the rules of :mod:`fevex.runtime.store_rules` (exported by
:mod:`fevex.runtime`, with the errors they raise), in the order written there (the
arguments, then the run, the lease, the revision, the events), so that one fault has one
code in every store.

A store may also offer optional capabilities, which the runtime uses when present and does
without otherwise; they are not part of :class:`RunStore` nor of
:func:`missing_store_methods`:

- :class:`NotifyingRunStore` (``wait_for_events``): followers of a run wait to be told it
  moved on instead of reading it again every ``poll_interval`` (PostgreSQL through
  LISTEN/NOTIFY; the in-memory and SQLite stores poll).
- :class:`TakeoverRunStore` (``take_over_run``): a resume, an event delivery or a
  cancellation takes a stored run's lease and reads what it continues from in one
  operation; :func:`take_over_run` calls it, and composes ``acquire_lease`` and three reads
  for a store without it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from fevex.events import RunEvent
from fevex.runtime.executions import (
    RUN_FIELDS_A_COMMIT_CHANGES,
    EventOrder,
    ExecutionCommit,
    ExecutionCreate,
    RunLease,
    RunTakeover,
)
from fevex.runtime.records import AgentRun, Session
from fevex.runtime.store_rules import run_not_found

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from fevex.runtime.store_rules import RunListing

# The contract's values are defined beside it (fevex.runtime.executions) and named here too:
# they are what its methods take and return.
__all__ = [
    "RUN_FIELDS_A_COMMIT_CHANGES",
    "EventOrder",
    "ExecutionCommit",
    "ExecutionCreate",
    "NotifyingRunStore",
    "RunLease",
    "RunStore",
    "RunTakeover",
    "TakeoverRunStore",
    "missing_store_methods",
    "read_takeover",
    "take_over_run",
]


@runtime_checkable
class RunStore(Protocol):
    """Persistence for runs, their events, checkpoints, leases and sessions."""

    async def create_execution(self, create: ExecutionCreate) -> RunLease:
        """Create the run, its first events and checkpoint, reserve its session and grant
        the first lease, atomically. Every field of the run is kept and read back as given,
        its ``kind``, ``name``, ``version``, run tree and ``context`` (plain JSON) included;
        no commit changes those. ``INVALID_ARGUMENT`` when an event belongs to another
        run; ``RUN_CONFLICT`` when the run id exists, the session is held by another run or
        changed since ``session_revision`` was read, the events are not numbered from 1,
        or an event id is stored already. Nothing is written in any of these cases."""
        ...

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        """Store the step atomically, or refuse it and write nothing, checking in this
        order: ``INVALID_ARGUMENT`` when it changes a run field outside
        :data:`RUN_FIELDS_A_COMMIT_CHANGES` or carries an event of another run;
        ``RUN_NOT_FOUND`` for an unknown run; ``LEASE_LOST`` when the lease is not the live
        one; ``RUN_CONFLICT`` when the revision is stale, the events do not continue the
        run's sequence, or an event id is stored already."""
        ...

    async def request_cancel(self, run_id: str) -> AgentRun:
        """Record a cancel request on a ``running`` run (``cancel_requested``) and return
        the run as it stands after it; idempotent. The revision, the lease, the events and
        the session stay as they are, so the owner's commits go on, the cancellation
        included. A run in another status is returned unchanged (a paused run is cancelled
        by taking it, a finished one has nothing to cancel); ``RUN_NOT_FOUND`` for an
        unknown run. The request is never cleared."""
        ...

    async def renew_lease(self, run_id: str, lease: RunLease, seconds: float) -> RunLease:
        """Extend a live lease; ``RUN_NOT_FOUND`` for an unknown run, ``LEASE_LOST`` when
        the lease expired or was taken over, then ``RUN_CANCEL_REQUESTED`` when the run has
        a cancel request: the lease is then not renewed, and what is left of it is the time
        its owner has to commit the cancellation."""
        ...

    async def acquire_lease(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunLease:
        """Take the lease of a run in ``status`` whose lease has expired or was released,
        with the next generation. ``RUN_CONFLICT`` while another lease is live or the run
        is in another status, ``RUN_NOT_FOUND`` for an unknown run."""
        ...

    async def claim_expired_run(
        self, owner: str, seconds: float, *, names: Collection[str] | None = None
    ) -> tuple[str, RunLease] | None:
        """Acquire the lease of one ``running`` run whose lease expired, or ``None``.
        Concurrent callers never claim the same run. With ``names``, only a run whose
        ``name`` (an agent run's is its ``agent_name``) is among them is claimed: a worker
        claims only the runs it can continue (``None``: any run; an empty collection:
        none). ``INVALID_ARGUMENT`` when ``names`` is not a collection of strings (a single
        string is refused)."""
        ...

    async def expired_run_ids(
        self, *, limit: int = 100, names: Collection[str] | None = None
    ) -> Sequence[str]:
        """Ids of ``running`` runs whose lease has expired by the store's clock, oldest
        expiry first, read without taking or waiting for any lock: what a recovery sweep
        reports when ``claim_expired_run`` could not take them (a frozen worker still
        holds a row, or another claimer is taking them). ``names`` limits them to those
        agents, as for claims. ``INVALID_ARGUMENT`` unless ``limit`` is a whole number, 0
        or more, and ``names`` is ``None`` or a collection of strings."""
        ...

    async def claim_due_run(
        self, owner: str, seconds: float, *, names: Collection[str] | None = None
    ) -> tuple[str, RunLease] | None:
        """Acquire the lease of one ``paused`` run whose ``wake_at`` has come by the store's
        clock and whose lease is not live, earliest ``wake_at`` first, and move its
        ``wake_at`` to the new lease's expiry in the same step, so that the run is due again
        if its claimer dies; ``None`` when no run is due. Concurrent callers never
        claim the same run (a SQL store skips rows another claim locked). ``names`` as for
        :meth:`claim_expired_run`. The claimer decides what the wake-up means (a timer, a
        child that ended) and pauses the run again when it was early."""
        ...

    async def get_run(self, run_id: str) -> AgentRun | None: ...

    async def list_runs(self, **listing: Unpack[RunListing]) -> Sequence[AgentRun]:
        """At most ``limit`` runs that hold every filter given, newest first
        (``created_at`` descending, then ``id`` descending, both compared as text);
        ``after`` is the id of the last run of the previous page, and the page continues
        below it. Runs created after a page was read never shift a later page, and a
        cursor whose run no longer matches the filters (its status changed) still marks
        where its page ended. ``INVALID_ARGUMENT`` unless ``status`` is a run status or
        ``None``, the other filters are non-empty strings or ``None``, ``limit`` is an
        integer from 1 to 1000 and ``after`` a string or ``None``; then ``INVALID_CURSOR``
        when ``after`` names no stored run.

        The arguments are one :class:`~fevex.runtime.RunListing`, given as keywords (every
        one may be left out), which the store checks once, first, with
        :func:`~fevex.runtime.check_run_page`: the :class:`~fevex.runtime.RunQuery` it
        returns is what the store reads."""
        ...

    async def get_checkpoint(self, run_id: str) -> dict[str, Any] | None: ...

    async def get_session(self, session_id: str) -> Session | None: ...

    async def save_session(self, session: Session, *, expected_revision: int) -> Session:
        """Replace a session that is not held by a run and return it with the next
        revision; ``SESSION_NOT_FOUND`` for an unknown session, ``RUN_CONFLICT`` while a
        run holds it, ``SESSION_CONFLICT`` when its stored revision is not
        ``expected_revision``."""
        ...

    async def list_events(
        self,
        run_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: EventOrder = "asc",
    ) -> Sequence[RunEvent]:
        """Events of a run by sequence, at most ``limit`` (a positive integer, or
        ``None``: all) in ``order``; ``after`` is an event id of the same run and selects
        the events after it in sequence order. ``INVALID_ARGUMENT`` for another ``limit``,
        ``order`` or a cursor that is not a string, then ``INVALID_CURSOR`` when ``after``
        is unknown or an event of another run. An unknown run has no events."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class NotifyingRunStore(Protocol):
    """An optional capability of a :class:`RunStore`: telling a follower that a run moved on,
    so that :meth:`fevex.Fevex.follow_events` waits instead of polling an idle run."""

    async def wait_for_events(self, run_id: str, *, after: str | None, timeout: float) -> bool:
        """Return ``True`` once run ``run_id`` has an event after the event ``after`` (any
        event when ``None``) or has ended (completed, failed or cancelled), at once when it
        already has; ``False`` when ``timeout`` seconds passed first. Any other outcome is
        the caller's to discover by reading the run: ``True`` may come early (the store
        could not tell, or its channel was interrupted) and is never a promise of events.

        What must hold is that nothing is missed: a commit that lands between the caller's
        last read and this call, or during it, ends the wait. ``after`` is an event id
        of the run, as for :meth:`RunStore.list_events`; one the store does not know ends
        the wait, for the caller's next read to report. Store failures raise as in any
        other method."""
        ...


@runtime_checkable
class TakeoverRunStore(Protocol):
    """An optional capability of a :class:`RunStore`: taking a stored run over in one
    operation (one transaction, one round trip where the store can), instead of
    ``acquire_lease`` followed by ``get_run``, ``get_checkpoint`` and ``list_events``."""

    async def take_over_run(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunTakeover:
        """Acquire the lease of the run exactly as :meth:`RunStore.acquire_lease` does
        (the same refusals, in the same order, writing nothing then) and return it with
        the run, its checkpoint and its last event's sequence as they stand under the new
        lease, read in the same transaction."""
        ...


async def take_over_run(
    store: RunStore, run_id: str, owner: str, seconds: float, *, status: str = "running"
) -> RunTakeover:
    """Take run ``run_id`` over for ``owner``: the store's own
    :meth:`TakeoverRunStore.take_over_run` when it offers one, else ``acquire_lease``
    followed by :func:`read_takeover`, which any store can serve."""
    if isinstance(store, TakeoverRunStore):
        return await store.take_over_run(run_id, owner, seconds, status=status)
    lease = await store.acquire_lease(run_id, owner, seconds, status=status)
    return await read_takeover(store, run_id, lease)


async def read_takeover(store: RunStore, run_id: str, lease: RunLease) -> RunTakeover:
    """What the holder of ``lease`` (just acquired, or taken by a claim) continues run
    ``run_id`` from, read with the contract's own reads, after the lease was taken."""
    run = await store.get_run(run_id)
    if run is None:
        raise run_not_found(run_id)  # deleted under the lease
    try:
        checkpoint = await store.get_checkpoint(run_id)
    except ValueError:
        checkpoint = None  # stored text that is not JSON: the taker fails the run
    last = await store.list_events(run_id, order="desc", limit=1)
    return RunTakeover(lease, run, checkpoint, last[0].sequence if last else 0)


# Every method of the contract; a store lacking one fails when it is opened, not mid-run.
_RUN_STORE_METHODS = (
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
)


def missing_store_methods(store: object) -> list[str]:
    """The :class:`RunStore` methods ``store`` lacks (or holds as something that cannot be
    called), in the contract's order; empty for a complete store. An app checks its store
    with this when it is created, so that a store missing a method is refused then, by
    name, and never fails in the middle of a run."""
    return [name for name in _RUN_STORE_METHODS if not callable(getattr(store, name, None))]
