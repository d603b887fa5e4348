"""The one path every run event takes: numbered, committed to the store, then observed.

Events reach the store first, then the stream consumer, then the observers. Observers are
best-effort: their exceptions and failed coroutines are logged and never reach the run.
The app's tracer, when it has one, sees each event first, with the run's snapshot; it only
queues it (see :mod:`fevex._internal.tracing.trace_pipeline`).

When nobody streams the run (``run_agent``, ``resume_run``, recovery), the sink batches:
events wait in memory and are committed together at the next durable point, so a tool-call
run costs four commits instead of one per event. The durable points are exactly the ones
recovery relies on: before a tool's effect starts, after it ends, and at pause and
termination; whatever else is lost in a crash is a model step, which recovery repeats.
A takeover's opening event waits too, for the run's first durable point or, sooner, its
first guarded await (:meth:`flush`): what the takeover settled is stored before any effect.

Commits are one at a time (a workflow's parallel branches emit concurrently), each with the
run's next revision.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fevex._ground.clock import new_sequential_id, utc_now
from fevex.errors import FevexError
from fevex.events import RunEvent
from fevex.runtime.records import AgentRun
from fevex.runtime.run_store import (
    ExecutionCommit,
    ExecutionCreate,
    RunLease,
    RunStore,
    RunTakeover,
)

logger = logging.getLogger("fevex")

EventObserver = Callable[[RunEvent], Any]


class RunTracer(Protocol):
    def record(self, run: AgentRun, event: RunEvent) -> None:
        """Take one committed event of ``run``, without waiting for anything."""
        ...


@dataclass(frozen=True, slots=True)
class Observers:
    """Who sees a run's committed events: the app's ``on_event`` callbacks and its tracer."""

    callbacks: Sequence[EventObserver] = ()
    tracer: RunTracer | None = None


class EventSink:
    __slots__ = (
        "_background",
        "_committing",
        "_pending",
        "_pending_changes",
        "_pending_checkpoint",
        "batching",
        "committed",
        "lease",
        "lost",
        "observers",
        "revision",
        "run",
        "sequence",
        "store",
        "tracer",
    )

    def __init__(
        self,
        store: RunStore,
        run: AgentRun,
        observers: Observers,
        sequence: int = 0,
    ) -> None:
        self.store = store
        self.run = run
        self.lease: RunLease | None = None
        # Set when the lease is lost: from then on this process writes nothing for the run.
        self.lost: FevexError | None = None
        self.revision = run.revision
        self.observers = observers.callbacks
        self.tracer = observers.tracer
        self.sequence = sequence
        # The sequence of the last event the store holds.
        self.committed = sequence
        self.batching = False
        self._pending: list[RunEvent] = []
        self._pending_changes: dict[str, Any] = {}
        self._pending_checkpoint: Callable[[], dict[str, Any]] | None = None
        self._background: set[asyncio.Future[Any]] = set()
        self._committing = asyncio.Lock()

    @classmethod
    async def create(
        cls,
        store: RunStore,
        run: AgentRun,
        *,
        session_revision: int | None,
        opening: dict[str, Any],
        checkpoint: dict[str, Any],
        owner: str,
        lease_seconds: float,
        observers: Observers,
        batching: bool,
    ) -> tuple[EventSink, RunEvent]:
        """Create the run with its ``run.started`` event, its checkpoint, its session
        reservation and its first lease, atomically; the sink writes it from then on."""
        sink = cls(store, run, observers)
        started = sink.event("run.started", opening, run.created_at)
        sink.lease = await store.create_execution(
            ExecutionCreate(run, session_revision, (started,), checkpoint, owner, lease_seconds)
        )
        sink.committed = started.sequence
        sink.batching = batching
        if batching:
            # Committed already: observers see it now, as they see every batch once committed.
            sink.observe(started)
        return sink, started

    @classmethod
    async def resume(
        cls, store: RunStore, run: AgentRun, lease: RunLease, observers: Observers
    ) -> EventSink:
        """A sink continuing a stored run's event sequence under a lease just taken."""
        last = await store.list_events(run.id, order="desc", limit=1)
        sink = cls(store, run, observers, last[0].sequence if last else 0)
        sink.lease = lease
        return sink

    @classmethod
    def taken_over(cls, store: RunStore, taken: RunTakeover, observers: Observers) -> EventSink:
        """A sink continuing a stored run's event sequence under the lease a takeover took,
        from what it read with the lease."""
        sink = cls(store, taken.run, observers, taken.last_sequence)
        sink.lease = taken.lease
        return sink

    def event(self, type: str, payload: dict[str, Any], occurred_at: str | None = None) -> RunEvent:
        self.sequence += 1
        return RunEvent(
            new_sequential_id("evt"),
            self.run.id,
            self.sequence,
            type,
            occurred_at or utc_now(),
            payload,
        )

    async def emit(
        self,
        type: str,
        payload: dict[str, Any],
        *,
        durable: bool = False,
        checkpoint: Callable[[], dict[str, Any]] | None = None,
        history: tuple[dict[str, Any], ...] | None = None,
        release_session: bool = False,
        release_lease: bool = False,
        **run_changes: Any,
    ) -> RunEvent:
        """Commit one event under the run's lease with the run's next revision, with any
        run field changes and a new checkpoint; while batching, only ``durable`` events
        and the last ones (which release the lease) commit, taking the waiting ones along.

        ``checkpoint`` makes the run's checkpoint; it is called only when the sink commits,
        when the run's state is that of the last event committed."""
        assert self.lease is not None, "a run is written only under its lease"
        if self.batching and not (durable or release_lease or self._committing.locked()):
            # Joins the batch without awaiting anything: no commit can start meanwhile.
            return self._batched(type, payload, run_changes, checkpoint)
        async with self._committing:
            if self.batching and not (durable or release_lease):
                return self._batched(type, payload, run_changes, checkpoint)
            if self.lost is not None:
                raise self.lost
            now = utc_now()
            event = self.event(type, payload, now)
            try:
                await self._commit(
                    event, now, run_changes, checkpoint, history, release_session, release_lease
                )
            except BaseException:
                self.sequence -= 1
                raise
            return event

    def _batched(
        self,
        type: str,
        payload: dict[str, Any],
        run_changes: dict[str, Any],
        checkpoint: Callable[[], dict[str, Any]] | None,
    ) -> RunEvent:
        if self.lost is not None:
            raise self.lost
        event = self.event(type, payload)
        self._pending.append(event)
        self._pending_changes.update(run_changes)
        if checkpoint is not None:
            self._pending_checkpoint = checkpoint
        return event

    def withdraw(self, field: str) -> None:
        """Leave the run field ``field`` out of the changes waiting in the batch, so that the
        next commit keeps what is stored there."""
        self._pending_changes.pop(field, None)

    async def flush(self) -> None:
        """Commit the events waiting in the batch now, with their run changes and
        checkpoint; nothing when none waits."""
        assert self.lease is not None, "a run is written only under its lease"
        async with self._committing:
            if self.lost is not None:
                raise self.lost
            if self._pending:
                await self._commit(None, utc_now(), {}, None, None, False, False)

    async def _commit(
        self,
        event: RunEvent | None,
        now: str,
        run_changes: dict[str, Any],
        checkpoint: Callable[[], dict[str, Any]] | None,
        history: tuple[dict[str, Any], ...] | None,
        release_session: bool,
        release_lease: bool,
    ) -> None:
        """Commit the waiting events, then ``event``, with the next revision."""
        assert self.lease is not None
        events = tuple(self._pending) if event is None else (*self._pending, event)
        revision = self.revision + 1
        try:
            await self.store.commit_execution(
                ExecutionCommit(
                    self.run.id,
                    revision,
                    now,
                    self.lease,
                    events,
                    {**self._pending_changes, **run_changes} or None,
                    checkpoint() if checkpoint is not None else self._checkpoint_of_pending(),
                    history,
                    release_session,
                    release_lease,
                )
            )
        except FevexError as error:
            if error.code == "LEASE_LOST":
                self.lost = error
            raise
        self.revision = revision
        self.committed = events[-1].sequence
        if self.batching:
            self._pending.clear()
            self._pending_changes.clear()
            self._pending_checkpoint = None
            for committed in events:
                self.observe(committed)

    async def release(self, **run_changes: Any) -> None:
        """Give the lease back, committing only ``run_changes``: a paused run a wake-up
        found not due yet pauses again, with no event."""
        assert self.lease is not None, "a run is written only under its lease"
        async with self._committing:
            revision = self.revision + 1
            await self.store.commit_execution(
                ExecutionCommit(
                    self.run.id,
                    revision,
                    utc_now(),
                    self.lease,
                    changes=run_changes or None,
                    release_lease=True,
                )
            )
            self.revision = revision

    async def emit_cancelled(self, reason: str) -> RunEvent:
        """End the run ``cancelled``, freeing its session and lease (a paused run too)."""
        return await self.emit(
            "run.cancelled",
            {"reason": reason},
            status="cancelled",
            pause=None,
            release_session=True,
            release_lease=True,
        )

    async def emit_failed(self, error: FevexError) -> RunEvent:
        """End the run ``failed`` with ``error``, freeing its session and lease."""
        return await self.emit(
            "run.failed",
            {"error": error.to_json()},
            status="failed",
            error=error.to_json(),
            pause=None,
            release_session=True,
            release_lease=True,
        )

    def discard_pending(self) -> None:
        """Drop the batched events a failed commit carried, so that the run's terminal
        event does not carry again whatever the store refused."""
        self.sequence -= len(self._pending)
        self._pending.clear()
        self._pending_changes.clear()
        self._pending_checkpoint = None

    def _checkpoint_of_pending(self) -> dict[str, Any] | None:
        pending = self._pending_checkpoint
        return None if pending is None else pending()

    def delivered(self, event: RunEvent) -> None:
        """The consumer has the event; observers see it now, unless the sink batches (it
        then shows observers each event once it is committed). A child run's events
        relayed in its parent's stream were shown by the child's own sink."""
        if not self.batching and event.run_id == self.run.id:
            self.observe(event)

    def observe(self, event: RunEvent) -> None:
        if self.tracer is not None:
            try:
                self.tracer.record(self.run, event)
            except Exception:
                logger.warning("the tracer could not take event %s", event.id, exc_info=True)
        for observer in self.observers:
            try:
                result = observer(event)
            except Exception:
                logger.warning("on_event observer %r failed", observer, exc_info=True)
                continue
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                self._background.add(task)
                task.add_done_callback(self._settled)

    def _settled(self, task: asyncio.Future[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("on_event observer failed", exc_info=task.exception())
