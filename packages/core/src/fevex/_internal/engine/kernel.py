"""The execution kernel: the life of every run, whatever its kind, in one place.

The kernel creates a run atomically (the run, its session reservation, its opening event,
its checkpoint and its lease: :meth:`Kernel.start`), takes a stored run over (a resume, a
recovery, a wake-up, an event: :meth:`Kernel.take_over`), follows runs executing anywhere
(:meth:`Kernel.follow`), and cancels runs, here or in another process
(:meth:`Kernel.cancel`). Each run it executes is an
:class:`~fevex._internal.engine.execution.Execution` (lease renewal, deadline, cancellation,
pauses and the final commit) advanced by the step driver of the run's *kind*. The kinds
are registered when the kernel is created; each owns its checkpoint format (a
:class:`~fevex._internal.engine.run_kind.RunKind` builds and rebuilds its drivers, decides
approvals and receives events), and the kernel only calls them. ``Fevex`` is a front over
it; nothing else writes a run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
import socket
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Literal

from fevex._ground.clock import new_id
from fevex._ground.names import did_you_mean
from fevex._ground.storable_text import is_storable
from fevex._internal.engine.event_sink import EventSink, Observers
from fevex._internal.engine.execution import Execution, log_run
from fevex._internal.engine.kind_table import KindTable
from fevex._internal.engine.model_calls import ModelCallGate
from fevex._internal.engine.person_inputs import InputDesk
from fevex._internal.engine.run_kind import Driver, RunKind
from fevex._internal.engine.waits import (
    paused_until,
    resolve_wake_up,
    waits_for_event,
)
from fevex.errors import FevexError, FevexRunError, RunCancelledError
from fevex.events import RunEvent
from fevex.runtime.approval import ApprovalDecision
from fevex.runtime.context import ExecutionContext
from fevex.runtime.records import TERMINAL_STATUSES, AgentRun
from fevex.runtime.run_store import (
    EventOrder,
    NotifyingRunStore,
    RunLease,
    RunStore,
    RunTakeover,
    read_takeover,
    take_over_run,
)
from fevex.runtime.store_rules import check_event_page

__all__ = ["Kernel", "KindFactory", "child_run"]

# Changes a takeover makes to the checkpoint before the driver is built from it (an
# approval decision, a received event); it raises to refuse, and nothing is written.
Decide = Callable[[AgentRun, dict[str, Any]], None]
# A run kind as the app registers it: built once, with the kernel that runs it (and the
# children its runs start).
KindFactory = Callable[["Kernel"], RunKind]


class Kernel:
    def __init__(
        self,
        store: RunStore,
        kinds: Mapping[str, KindFactory],
        observers: Observers,
        *,
        lease_seconds: float,
    ) -> None:
        self.store = store
        self.observers = observers
        self.lease_seconds = lease_seconds
        # One owner id per app: a recovered run is taken over under a new generation even
        # when a restarted process happens to reuse the id.
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{new_id('app')}"
        self.active: dict[str, Execution] = {}
        # Root run id -> the model-call gate of its tree, while a group of child runs
        # holds it (see model_calls).
        self.model_gates: dict[str, ModelCallGate] = {}
        # The requests its runs' tool calls wait on a person for (see person_inputs).
        self.inputs = InputDesk()
        # The kinds of run this kernel executes, by the name runs record as their kind:
        # registered once, here, each built when first looked up (see kind_table), and the
        # kernel's for its whole life.
        self.kinds: Mapping[str, RunKind] = KindTable(
            {name: functools.partial(make, self) for name, make in kinds.items()}
        )

    @property
    def names(self) -> frozenset[str]:
        """The names of every run this app can continue: the runs a worker claims."""
        return frozenset(name for kind in self.kinds.values() for name in kind.names)

    # -- new runs -------------------------------------------------------------------

    async def start(
        self,
        run: AgentRun,
        driver: Driver,
        *,
        session_revision: int | None,
        opening: dict[str, Any],
        deadline: float | None,
        batching: bool,
    ) -> Execution:
        """Create ``run`` with its ``run.started`` event, its first checkpoint, its session
        reservation and its lease, in one store operation, and return its execution."""
        sink, started = await EventSink.create(
            self.store,
            run,
            session_revision=session_revision,
            opening=opening,
            checkpoint=driver.checkpoint(),
            owner=self.owner,
            lease_seconds=self.lease_seconds,
            observers=self.observers,
            batching=batching,
        )
        log_run(sink.run, "started")
        return self._execution(sink, driver, deadline, (started,))

    def _execution(
        self,
        sink: EventSink,
        driver: Driver,
        deadline: float | None,
        opening: tuple[RunEvent, ...],
    ) -> Execution:
        execution = Execution(
            sink,
            driver,
            deadline,
            lease_seconds=self.lease_seconds,
            opening=opening,
            active=self.active,
        )
        execution.inputs = self.inputs
        if self.model_gates:
            gate = self.model_gates.get(sink.run.root_run_id)
            if gate is not None:
                gate.adopt(sink.run)
                execution.model_calls = gate
        self.active[sink.run.id] = execution
        return execution

    def forget(self, execution: Execution) -> None:
        """Drop an execution that will never run (its opening could not be committed):
        nothing of its takeover is stored, and its lease lapses by itself."""
        self.active.pop(execution.run_id, None)

    def events(self, execution: Execution) -> AsyncGenerator[RunEvent, None]:
        """The execution's committed events; it leaves :attr:`active` when they end."""
        return execution.events()

    # -- taking stored runs over ----------------------------------------------------

    def kind(self, run: AgentRun) -> RunKind:
        """The kind that continues ``run``; raises when this app cannot."""
        kind = self.kinds.get(run.kind)
        if kind is None:
            raise FevexRunError(
                "RUN_KIND_UNKNOWN",
                f"This app cannot continue runs of kind {run.kind!r}.",
                details={"run_id": run.id, "kind": run.kind},
            )
        kind.check(run)
        return kind

    async def get_run(self, run_id: str) -> AgentRun:
        # An id no store can keep names no run, on every store (none is asked).
        unstorable = isinstance(run_id, str) and not is_storable(run_id)
        run = None if unstorable else await self.store.get_run(run_id)
        if run is None:
            raise FevexRunError("RUN_NOT_FOUND", f"There is no run {run_id!r}.")
        return run

    async def take_over(
        self,
        run_id: str,
        *,
        status: Literal["running", "paused"],
        opening_type: str,
        opening_payload: dict[str, Any],
        decide: Decide | None = None,
        decide_early: bool = True,
        timeout: float | None = None,
        lease: RunLease | None = None,
        run: AgentRun | None = None,
    ) -> Execution:
        """Take over a stored run under a new lease and continue it from its checkpoint.

        ``decide`` is applied to the checkpoint once before the lease is taken (to refuse
        early, writing nothing; skipped when ``decide_early`` is false, for a caller that
        checked the run itself) and again on what is stored once it is. ``run`` is the
        run as the caller just read it, if it did, to check before taking it. The
        takeover is bounded by ``timeout`` too: a store that waits (a row still locked by
        a frozen worker) ends in ``RUN_TIMEOUT`` with nothing written. Its errors carry
        ``run_id``."""
        try:
            return await self._take_over(
                run_id,
                status=status,
                opening_type=opening_type,
                opening_payload=opening_payload,
                decide=decide,
                decide_early=decide_early,
                timeout=timeout,
                lease=lease,
                run=run,
            )
        except FevexError as error:
            error.for_run(run_id)
            raise

    async def _take_over(
        self,
        run_id: str,
        *,
        status: Literal["running", "paused"],
        opening_type: str,
        opening_payload: dict[str, Any],
        decide: Decide | None,
        decide_early: bool,
        timeout: float | None,
        lease: RunLease | None,
        run: AgentRun | None,
    ) -> Execution:
        deadline = deadline_of(timeout)
        store = self.store
        try:
            async with asyncio.timeout_at(deadline):
                if run is None:
                    run = await self.get_run(run_id)
                kind = self.kind(run)
                if decide is not None and decide_early:
                    # Fail closed before taking the run: a wrong decision changes nothing.
                    decide(run, await _read_checkpoint(store, run_id))
                # Read after acquiring: the previous holder may have committed until its
                # lease ended. One store operation where the store can.
                taken = await self._take(run_id, status, lease)
                run, lease = taken.run, taken.lease
                sink = EventSink.taken_over(store, taken, self.observers)
                if run.cancel_requested:
                    # Asked to cancel while its owner could not obey (it died, or the run
                    # paused first): whoever takes it next cancels it, never continues it.
                    sink.observe(await sink.emit_cancelled("aborted"))
                    log_run(sink.run, "cancelled", reason="aborted")
                    raise RunCancelledError(run_id, "aborted")
                try:
                    checkpoint = _checkpoint_object(run_id, taken.checkpoint)
                    if decide is not None:
                        decide(run, checkpoint)
                    session = None
                    if kind.reads_session:
                        session = await store.get_session(run.session_id)
                    driver = kind.driver(run, checkpoint, session)
                except FevexRunError as error:
                    if error.details.get("reason") == "malformed":
                        # No version of fevex can continue it: end it rather than let every
                        # sweep take it again.
                        sink.observe(await sink.emit_failed(error))
                    elif status == "paused":
                        # Refused (another caller decided first): the run stays paused, and
                        # free for the next caller at once.
                        await sink.release()
                    raise
        except TimeoutError:
            raise FevexRunError(
                "RUN_TIMEOUT",
                f"Run {run_id} could not be taken over within {timeout} s; nothing was written.",
                recoverable=True,
                details={"run_id": run_id},
            ) from None
        sink.batching = True
        # Committed with the run's first durable point, or before its first effect
        # (Execution.guard), whichever comes first: a crash before then leaves the run as
        # it was taken, to be taken again.
        opening = await sink.emit(
            opening_type,
            {**opening_payload, "generation": lease.generation},
            status="running",
            pause=None,
            wake_at=None,
            checkpoint=driver.checkpoint,
        )
        reason = opening_payload.get("reason")
        log_run(
            sink.run,
            opening_type.removeprefix("run."),
            reason=reason if isinstance(reason, str) else None,
        )
        return self._execution(sink, driver, deadline, (opening,))

    async def _take(self, run_id: str, status: str, lease: RunLease | None) -> RunTakeover:
        """The run under a new lease (``lease``, when a claim took it already)."""
        if lease is None:
            return await take_over_run(
                self.store, run_id, self.owner, self.lease_seconds, status=status
            )
        return await read_takeover(self.store, run_id, lease)

    async def recover(
        self,
        run_id: str,
        actor: Mapping[str, Any],
        *,
        lease: RunLease | None = None,
        timeout: float | None = None,
    ) -> Execution:
        """Take over a running run whose lease expired (or with the ``lease`` a claim
        already took) and continue it from its checkpoint."""
        return await self.take_over(
            run_id,
            status="running",
            opening_type="run.recovered",
            opening_payload={"actor": dict(actor)},
            timeout=timeout,
            lease=lease,
        )

    async def wake(
        self, run_id: str, lease: RunLease, *, timeout: float | None = None
    ) -> Execution | None:
        """Continue a paused run a claim found due (its timer, the end of a child), under
        the claim's ``lease``; ``None`` when the wake-up came early and the run paused
        again, releasing the lease."""
        run = await self.get_run(run_id)
        self.kind(run)
        pause = dict(run.pause or {})
        checkpoint = await _read_checkpoint(self.store, run_id)
        if run.cancel_requested or await resolve_wake_up(checkpoint, pause, self.store.get_run):
            resolved = checkpoint

            def settle(_: AgentRun, stored: dict[str, Any]) -> None:
                stored.clear()
                stored.update(resolved)

            return await self.take_over(
                run_id,
                status="paused",
                opening_type="run.resumed",
                opening_payload={"reason": pause.get("reason")},
                decide=settle,
                decide_early=False,
                timeout=timeout,
                lease=lease,
            )
        # Early: pause again as it was, until its timer or its event's deadline; nothing
        # else wakes it but a caller or the end of a child.
        sink = await EventSink.resume(self.store, run, lease, self.observers)
        await sink.release(wake_at=paused_until(pause))
        if pause.get("reason") == "children" and await resolve_wake_up(
            dict(checkpoint), pause, self.store.get_run
        ):
            # The last child ended while this pass looked: its wake-up may have landed
            # before the release cleared it, so take the run again rather than lose it.
            try:
                lease = await self.store.acquire_lease(
                    run_id, self.owner, self.lease_seconds, status="paused"
                )
            except FevexRunError as error:
                if error.code == "RUN_CONFLICT":
                    return None  # taken by someone else, or no longer paused
                raise
            return await self.wake(run_id, lease, timeout=timeout)
        return None

    async def continue_due(self, run_id: str, *, timeout: float | None) -> Execution:
        """Continue a paused run whose wait is over (its timer is due, its children have
        ended, its event's deadline has passed) now, as a worker's wake-up pass would;
        ``RUN_NOT_DUE`` when it still waits (for an approval, an event, a timer, a child),
        with nothing written."""
        run = await self.get_run(run_id)
        self.kind(run)
        pause = run.pause or {}
        checkpoint = await _read_checkpoint(self.store, run_id)
        if not run.cancel_requested and not await resolve_wake_up(
            checkpoint, pause, self.store.get_run
        ):
            raise _not_due(run)
        try:
            lease = await self.store.acquire_lease(
                run_id, self.owner, self.lease_seconds, status="paused"
            )
        except FevexError as error:
            error.for_run(run_id)
            raise
        execution = await self.wake(run_id, lease, timeout=timeout)
        if execution is None:
            # Taken and continued by another process since it was read.
            raise _not_due(await self.get_run(run_id))
        return execution

    async def decide_approval(
        self, run_id: str, decision: ApprovalDecision, *, timeout: float | None
    ) -> Execution:
        """Take over a paused run with ``decision`` on its pending approval, recorded by
        the run's kind in its checkpoint, and continue it; ``APPROVAL_NOT_FOUND`` (nothing
        written) when the run does not wait for that approval."""
        actor = dict(decision.actor)

        def decide(run: AgentRun, checkpoint: dict[str, Any]) -> None:
            self.kind(run).decide_approval(run, checkpoint, decision)

        return await self.take_over(
            run_id,
            status="paused",
            opening_type="run.resumed",
            opening_payload={
                "reason": "approval",
                "approval_id": decision.approval_id,
                "decision": decision.decision,
                "actor": actor,
            },
            decide=decide,
            timeout=timeout,
        )

    async def deliver_event(
        self,
        run_id: str,
        name: str,
        payload: Any,
        actor: Mapping[str, Any] | None,
        *,
        timeout: float | None,
    ) -> Execution:
        """Take over a run paused for the event ``name`` and continue it with ``payload``;
        ``EVENT_NOT_EXPECTED`` (nothing written) when it does not wait for that event."""
        run = await self.get_run(run_id)
        if not waits_for_event(run, name):
            raise _not_expected(run, name)
        kind = self.kind(run)
        accepted = kind.accept_event(run, name, payload, actor)

        def decide(stored_run: AgentRun, checkpoint: dict[str, Any]) -> None:
            if not waits_for_event(stored_run, name):
                raise _not_expected(stored_run, name)
            kind.receive_event(stored_run, checkpoint, accepted, actor)

        return await self.take_over(
            run_id,
            status="paused",
            opening_type="run.resumed",
            opening_payload={"reason": "event", "event": name, "actor": actor},
            decide=decide,
            # The run was checked above; the checkpoint is settled once the run is taken.
            decide_early=False,
            timeout=timeout,
            run=run,
        )

    # -- following ------------------------------------------------------------------

    async def list_events(
        self, run_id: str, *, after: str | None, limit: int | None, order: EventOrder
    ) -> list[RunEvent]:
        """A run's events by sequence (see ``Fevex.list_events``)."""
        check_event_page(after, limit, order)
        await self.get_run(run_id)
        return list(await self.store.list_events(run_id, after=after, limit=limit, order=order))

    async def follow(
        self, run_id: str, after: str | None, *, poll_interval: float, page_size: int
    ) -> AsyncGenerator[RunEvent, None]:
        """Every event of a run executing anywhere, after ``after``, until it has ended
        (see ``Fevex.follow_events``)."""
        async with aclosing(
            self.follow_pages(run_id, after, poll_interval=poll_interval, page_size=page_size)
        ) as pages:
            async for page in pages:
                for event in page:
                    yield event

    async def follow_pages(
        self, run_id: str, after: str | None, *, poll_interval: float, page_size: int
    ) -> AsyncGenerator[Sequence[RunEvent], None]:
        """The events of :meth:`follow`, a non-empty page at a time as the store returned
        it (see ``Fevex.follow_event_pages``)."""
        check_event_page(after, page_size, "asc")
        if not isinstance(poll_interval, int | float) or not poll_interval > 0:
            raise FevexRunError("INVALID_ARGUMENT", "poll_interval must be positive seconds.")
        await self.get_run(run_id)
        store = self.store
        notifying = store if isinstance(store, NotifyingRunStore) else None
        # The store's wait misses no commit by its contract; the bound only limits what a
        # silently broken notification channel could cost a follower.
        recheck_seconds = 30.0
        cursor = after
        while True:
            # Read the status first: a run that ended before this page has all its events
            # in it (or in the pages before).
            ended = (await self.get_run(run_id)).status in TERMINAL_STATUSES
            page = await store.list_events(run_id, after=cursor, limit=page_size)
            if page:
                cursor = page[-1].id
                yield page
            if len(page) == page_size:
                continue
            if ended:
                return
            if notifying is None:
                await asyncio.sleep(poll_interval)
            else:
                await notifying.wait_for_events(run_id, after=cursor, timeout=recheck_seconds)

    # -- cancelling -----------------------------------------------------------------

    async def cancel(self, run_id: str, wait: float) -> AgentRun:
        """Cancel a run and its running or paused children, children first: here, or by
        asking its owner elsewhere, waiting at most ``wait`` seconds (see
        ``Fevex.cancel_run``). A run's owner executes its children inside its own steps:
        cancelling it cancels them as it unwinds. A run taken over to be cancelled (paused,
        or its owner gone) is held under its lease while its children are cancelled, so
        that no wake-up continues it in between, and the children's ends never fail it."""
        execution = self.active.get(run_id)
        if execution is not None:
            await execution.cancel()
            await execution.settled.wait()
            return await self.get_run(run_id)
        run = await self.get_run(run_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        # Polled at a tenth of the lease, so that the answer follows the owner's within
        # about a third of the lease.
        interval = min(self.lease_seconds / 10, 1.0)
        while run.status not in TERMINAL_STATUSES:
            if run.status == "running" and not run.cancel_requested:
                run = await self.store.request_cancel(run_id)
                continue
            cancelled = await self._take_to_cancel(run)
            if cancelled is not None:
                return cancelled
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            await asyncio.sleep(min(interval, remaining))
            run = await self.get_run(run_id)
        return run

    async def _take_to_cancel(self, run: AgentRun) -> AgentRun | None:
        """Take a run that no process executes (paused, or running under a lease that
        lapsed) and cancel it; ``None`` while its lease is live (its owner cancels it) or
        its status changed since it was read."""
        try:
            taken = await take_over_run(
                self.store, run.id, self.owner, self.lease_seconds, status=run.status
            )
        except FevexRunError as error:
            if error.code == "RUN_CONFLICT":
                return None
            raise
        if await self._cancel_children(run.id):
            # Their ends changed the run's row (its wake-up): read it again under the lease.
            taken = await read_takeover(self.store, run.id, taken.lease)
        # Read with the lease: the previous holder may have committed until its lease ended.
        sink = EventSink.taken_over(self.store, taken, self.observers)
        sink.observe(await sink.emit_cancelled("aborted"))
        log_run(sink.run, "cancelled", reason="aborted")
        return await self.get_run(run.id)

    async def _cancel_children(self, run_id: str) -> bool:
        """Cancel the run's running or paused children; whether there were any."""
        cancelled = False
        after = None
        while True:
            page = await self.store.list_runs(parent_run_id=run_id, limit=100, after=after)
            for child in page:
                if child.status not in TERMINAL_STATUSES:
                    await self.cancel(child.id, self.lease_seconds)
                    cancelled = True
            if len(page) < 100:
                return cancelled
            after = page[-1].id


def child_run(parent: AgentRun, run: AgentRun, context: ExecutionContext | None = None) -> AgentRun:
    """``run`` as a child of ``parent``: in the parent's run tree, with the parent's context
    merged with the child's own (``context``), the parent's actor kept."""
    merged = ExecutionContext.from_json(parent.context).child(context)
    return dataclasses.replace(
        run, parent_run_id=parent.id, root_run_id=parent.root_run_id, context=merged.to_json()
    )


def _not_due(run: AgentRun) -> FevexRunError:
    pause = run.pause or {}
    return FevexRunError(
        "RUN_NOT_DUE",
        f"Run {run.id} is {run.status} and still waits"
        + (f" ({pause.get('reason')})" if run.status == "paused" else "")
        + "; nothing was changed. An approval is resumed with a decision, an event is "
        "delivered by send_event.",
        run_id=run.id,
        details={"run_id": run.id, "status": run.status, "reason": pause.get("reason")},
    )


def _not_expected(run: AgentRun, name: str) -> FevexRunError:
    pause = run.pause or {}
    awaited = pause.get("event") if run.status == "paused" else None
    # A run waits for one event at a time: naming it is the likeliest fix for a typo.
    waits = (
        f" It waits for the event {awaited!r}.{did_you_mean(name, [awaited])}"
        if isinstance(awaited, str) and pause.get("reason") == "event"
        else ""
    )
    return FevexRunError(
        "EVENT_NOT_EXPECTED",
        f"Run {run.id} ({run.status}) does not wait for the event {name!r}; nothing was "
        f"changed.{waits}",
        details={"run_id": run.id, "event": name, "status": run.status},
    )


async def _read_checkpoint(store: RunStore, run_id: str) -> dict[str, Any]:
    try:
        checkpoint = await store.get_checkpoint(run_id)
    except ValueError:
        checkpoint = None
    return _checkpoint_object(run_id, checkpoint)


def _checkpoint_object(run_id: str, checkpoint: Any) -> dict[str, Any]:
    """The stored ``checkpoint``; ``CHECKPOINT_UNSUPPORTED`` (malformed) unless it is a
    JSON object."""
    if not isinstance(checkpoint, dict):
        # The stored text is not a JSON object (a damaged row): no fevex can continue it.
        raise FevexRunError(
            "CHECKPOINT_UNSUPPORTED",
            f"The checkpoint of run {run_id} cannot be read as a JSON object.",
            details={"run_id": run_id, "reason": "malformed"},
        )
    return checkpoint


def deadline_of(timeout: float | None) -> float | None:
    """The loop time a run must end by; checked before anything is created or taken."""
    if timeout is None:
        return None
    return asyncio.get_running_loop().time() + seconds_of(timeout)


def seconds_of(timeout: object) -> float:
    """A ``timeout`` argument: ``INVALID_ARGUMENT`` unless a positive number of seconds."""
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        raise FevexRunError("INVALID_ARGUMENT", "timeout must be a positive number of seconds.")
    return float(timeout)
