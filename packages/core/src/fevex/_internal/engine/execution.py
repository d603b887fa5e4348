"""An execution: one run advancing in this process, whatever its kind.

The execution owns everything a run's life needs besides its steps: the lease and its
renewal, the run's deadline, cancellation (by the consumer, by ``cancel_run`` in this
process or, through the store's refusal to renew the lease, in another one, by the task
being cancelled), and every terminal commit (``run.completed``, ``run.paused``,
``run.failed``, ``run.cancelled``). A *step driver* (the agent loop; later workflow and team
functions) yields the events of its steps and ends by calling :meth:`Execution.complete` or
:meth:`Execution.pause`, or by raising; it never touches leases, cancellation or final
commits itself.

An execution is an async generator of committed events, so a consumer that stops asking
stops the run (backpressure). Closing it early, cancelling it or timing out persists
``run.cancelled``; losing the lease stops it without writing anything more.

Every error a run raises carries its ``run_id``; each step of a run's life (started,
resumed, recovered, paused, completed, failed, cancelled) is logged at INFO on the
``fevex`` logger with ``run_id`` and ``agent`` in the record's ``extra``: names, ids,
statuses and codes only, never input, output or messages (which can hold user data).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Awaitable
from typing import Any, Literal, Protocol, TypeVar

from fevex._internal.engine.deadline import DeadlineReached
from fevex._internal.engine.event_sink import EventSink
from fevex._internal.engine.lease_keeper import LeaseKeeper
from fevex._internal.engine.model_calls import ModelCallGate
from fevex._internal.engine.person_inputs import InputDesk
from fevex._internal.engine.waits import paused_until
from fevex.errors import FevexError, FevexRunError, RunCancelledError
from fevex.events import RunEvent
from fevex.events.cost import Cost
from fevex.runtime.inputs import InputAnswer, PendingInput
from fevex.runtime.records import AgentRun
from fevex.tools.context import _Cancellation

logger = logging.getLogger("fevex")

T = TypeVar("T")
CancelReason = Literal["aborted", "timeout"]

# The longest a run's task keeps the event loop to itself (seconds). An await that finishes
# without suspending (a model whose stream is buffered, a batched commit) gives the loop no
# turn: without one, the lease keeper's renewal and the run's own deadline never fire, and a
# step of a million such awaits outlives its lease.
LOOP_TURN_EVERY = 0.005


def log_run(run: AgentRun, what: str, **fields: str | None) -> None:
    """Log a step of ``run``'s life at INFO: ``what`` (``started``, ``completed``, ...) and
    ``fields`` (a reason, a code) must never hold user content."""
    if not logger.isEnabledFor(logging.INFO):
        return
    told = "".join(f" {key}={value}" for key, value in fields.items() if value is not None)
    logger.info(
        "run %s of %s %s %s%s",
        run.id,
        run.kind,
        run.name,
        what,
        told,
        extra={"run_id": run.id, "agent": run.name, "run_kind": run.kind, "lifecycle": what},
    )


class StepDriver(Protocol):
    """What a run kind plugs into an execution: its steps, as committed events."""

    def steps(self, execution: Execution) -> AsyncGenerator[RunEvent, None]: ...


class Execution:
    """One run executing in this process, from a new start, a resume or a recovery."""

    def __init__(
        self,
        sink: EventSink,
        driver: StepDriver,
        deadline: float | None,
        *,
        lease_seconds: float = 30.0,
        opening: tuple[RunEvent, ...] = (),
        active: dict[str, Execution] | None = None,
    ) -> None:
        self.sink = sink
        # The kernel's executions under way: this one leaves them when its events end.
        self._active = active
        self.driver = driver
        self.deadline = deadline
        self.lease_seconds = lease_seconds
        self.opening = opening
        # A takeover's opening may wait in the sink's batch: it is committed before the
        # first guarded await at the latest (see guard).
        self._opened_at = opening[-1].sequence if opening else 0
        self.output: Any = None
        self.pause: dict[str, Any] | None = None
        # Shared with the driver's tools, which may watch ``context.cancelled``.
        self.cancellation = _Cancellation()
        self._cancel_reason: CancelReason | None = None
        self._lease_error: FevexError | None = None
        # The cancellation another process asked for, under way (see _cancel_requested).
        self._cancelling: asyncio.Task[None] | None = None
        # The tasks awaiting inside guard() now: one, or a workflow's parallel branches.
        self._guarded: set[asyncio.Task[Any]] = set()
        self._parked = False
        # When guard() next gives the loop a turn (see LOOP_TURN_EVERY).
        self._turn_at = time.monotonic() + LOOP_TURN_EVERY
        # The deadline's timer has fired; the guarded tasks it cancelled.
        self._deadline_hit = False
        self._timed_out: set[asyncio.Task[Any]] = set()
        self.finished = False
        self.settled = asyncio.Event()
        # The gate of the run's tree when a group of child runs holds one (the kernel
        # sets it): the agent loop takes a slot of it around each model call.
        self.model_calls: ModelCallGate | None = None
        # Where its tool calls ask a person for input (the kernel sets it).
        self.inputs: InputDesk | None = None

    @property
    def run_id(self) -> str:
        return self.sink.run.id

    # -- what a driver calls ---------------------------------------------------------

    async def guard(self, awaitable: Awaitable[T]) -> T:
        """Await on the run's behalf: within its deadline, and stoppable by cancellation
        and lease loss. Drivers await every model call, effect and delay through it.

        A takeover's opening still waiting in the batch is committed first: what the
        takeover settled (an event received, an approval decided, the run running again)
        is stored before the run's first effect starts. Once per ``LOOP_TURN_EVERY`` it
        gives the event loop a turn before awaiting, so that a step whose awaits never
        suspend still lets the lease keeper, the deadline and other runs run."""
        if self.sink.committed < self._opened_at:
            try:
                await self.sink.flush()
            except BaseException as error:
                if asyncio.iscoroutine(awaitable):
                    awaitable.close()
                if isinstance(error, FevexError):
                    # Not the step's failure: the run stops here, writing nothing more, as
                    # a process that died here would, and is taken over again later.
                    self._lease_lost(error)
                raise
        if self._lease_error is not None or self._cancel_reason is not None:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            if self._lease_error is not None:
                raise self._lease_error
            raise asyncio.CancelledError
        if self._deadline_hit:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            raise DeadlineReached
        task = asyncio.current_task()
        cancelling = 0
        # A guarded await may guard another (a task step running a child agent): only the
        # outermost registers the task, so that the inner one ending leaves it guarded.
        outermost = task is not None and task not in self._guarded
        if task is not None:
            cancelling = task.cancelling()
            self._guarded.add(task)
        try:
            if time.monotonic() >= self._turn_at:
                try:
                    await asyncio.sleep(0)
                except BaseException:
                    if asyncio.iscoroutine(awaitable):
                        awaitable.close()
                    raise
                self._turn_at = time.monotonic() + LOOP_TURN_EVERY
            return await awaitable
        except asyncio.CancelledError:
            # The run's deadline cancelled this await (see _deadline_fired), and nothing
            # else did too: as asyncio.timeout tells its own cancellation from others'. A
            # TimeoutError user code raises is that code's failure, never the deadline.
            if task is not None and task in self._timed_out:
                self._timed_out.discard(task)
                if task.uncancel() <= cancelling:
                    raise DeadlineReached from None
            raise
        finally:
            if outermost and task is not None:
                self._guarded.discard(task)

    async def ask_input(self, request: PendingInput, timeout: float) -> InputAnswer:
        """Show ``request`` on the run and wait, inside the calling tool call, for a
        person's answer (see :mod:`fevex._internal.engine.person_inputs`)."""
        if self.inputs is None:
            raise FevexRunError("INPUT_UNAVAILABLE", "This run cannot ask a person for input.")
        return await self.inputs.ask(self.sink, request, timeout)

    def _deadline_fired(self) -> None:
        """The run's deadline: every await inside guard() now stops with DeadlineReached;
        one timer for the run rather than one per await, which a step streaming a million
        deltas would pay a million times."""
        self._deadline_hit = True
        for task in tuple(self._guarded):
            self._timed_out.add(task)
            task.cancel()

    async def complete(
        self,
        output: Any,
        output_json: Any,
        usage: dict[str, Any],
        history: tuple[Any, ...],
        *,
        cost: Cost | None = None,
    ) -> RunEvent:
        """The run's final commit: its output, what it cost (when priced), and the
        messages its session keeps."""
        self.finished = True
        self.output = output
        payload = {"output": output_json, "usage": usage}
        if cost is not None:
            payload["cost"] = cost.to_json()
        completed = await self.sink.emit(
            "run.completed",
            payload,
            status="completed",
            output=output_json,
            history=history,
            release_session=True,
            release_lease=True,
        )
        log_run(self.sink.run, "completed")
        return completed

    async def suspend(self, pause: dict[str, Any], checkpoint: Any) -> RunEvent:
        """Pause the run for what ``pause`` names (see :mod:`fevex._internal.engine.waits`): the
        lease is released, the session stays held. A timer (or an event's deadline) is
        committed as the run's ``wake_at``; a run that waits for its children keeps the
        ``wake_at`` a child that ended meanwhile set, so that no child's end is missed."""
        self.finished = True
        self.pause = pause
        wake: dict[str, Any] = {}
        if pause.get("reason") == "children":
            # Not even the wake_at=None of a take-over's opening, when it waits in this
            # commit's batch: a child that ended after the driver read it has set wake_at.
            self.sink.withdraw("wake_at")
        else:
            wake["wake_at"] = paused_until(pause)
        paused = await self.sink.emit(
            "run.paused",
            pause,
            status="paused",
            pause=pause,
            checkpoint=checkpoint,
            release_lease=True,
            **wake,
        )
        reason = pause.get("reason")
        log_run(self.sink.run, "paused", reason=reason if isinstance(reason, str) else None)
        return paused

    # -- cancellation and lease loss ------------------------------------------------

    async def cancel(self) -> None:
        """Cancel from outside the run (``cancel_run``)."""
        if self.finished or self._cancel_reason is not None:
            return
        self._cancel_reason = "aborted"
        self.cancellation.cancelled = True
        if self._parked:
            # The run waits for its consumer to ask for the next event: persist now; when
            # the consumer resumes, the run stops without writing.
            self._observe(await self._persist_cancelled("aborted"))
        else:
            self._cancel_guarded()

    def _cancel_requested(self) -> None:
        """The store refused to renew the lease: another process asked to cancel the run.
        It is cancelled as ``cancel_run`` cancels a run of this process, within what is
        left of the lease; the lease keeper calls this, and cannot await."""
        if self._cancelling is None and not self.finished:
            self._cancelling = asyncio.get_running_loop().create_task(self.cancel())

    async def _cancelled_on_request(self) -> None:
        """Let a requested cancellation finish its commit before the run's caller hears of
        the run's end; its failure leaves the run to whoever takes it over next (the
        request stays recorded)."""
        cancelling = self._cancelling
        if cancelling is None:
            return
        await asyncio.wait((cancelling,))
        if not cancelling.cancelled() and cancelling.exception() is not None:
            logger.warning(
                "cancelling run %s as requested failed",
                self.run_id,
                exc_info=cancelling.exception(),
            )

    def _cancel_guarded(self) -> None:
        """Interrupt every task awaiting inside guard(); with none (a store commit is in
        flight), the next guarded await stops the run."""
        for task in tuple(self._guarded):
            task.cancel()

    def _lease_lost(self, error: FevexError) -> None:
        """Stop the run without writing anything more: its lease was lost, or the store
        failed to take in its opening."""
        if self.finished or self._lease_error is not None:
            return
        self._lease_error = error
        self.cancellation.cancelled = True
        self.sink.lost = error
        self._cancel_guarded()

    async def _persist_cancelled(self, reason: CancelReason) -> RunEvent | None:
        if self.finished:
            return None
        self.finished = True
        self.cancellation.cancelled = True
        try:
            cancelled = await self.sink.emit_cancelled(reason)
        finally:
            self.settled.set()
        log_run(self.sink.run, "cancelled", reason=reason)
        return cancelled

    async def _persist_failed(self, error: FevexError) -> RunEvent | None:
        if self._lease_error is not None or (
            error.category == "store" and error.code != "STORE_ERROR"
        ):
            # A lost lease, or a store that is busy, full, read-only or unreachable for a
            # while: nothing more is written; the lease lapses and recovery continues the
            # run from its last commit once the store is healthy.
            self.finished = True
            return None
        # A store that refused a commit, the last one included, gets a run.failed without
        # the refused events, so that the run does not fail the same way on every recovery.
        refused = error.code == "STORE_ERROR"
        if self.finished and not refused:
            return None
        self.finished = True
        if refused:
            self.sink.discard_pending()
        failed = await self.sink.emit_failed(error)
        log_run(self.sink.run, "failed", code=error.code)
        return failed

    def _observe(self, event: RunEvent | None) -> None:
        """Show observers an event no consumer will receive."""
        if event is not None:
            self.sink.delivered(event)

    # -- the run --------------------------------------------------------------------

    async def events(self) -> AsyncGenerator[RunEvent, None]:
        """Committed events, each yielded before observers see it."""
        assert self.sink.lease is not None
        keeper = LeaseKeeper(
            self.sink.store,
            self.run_id,
            self.sink.lease,
            self.lease_seconds,
            self._lease_lost,
            self._cancel_requested,
        )
        keeper.start()
        timer = None
        if self.deadline is not None:
            timer = asyncio.get_running_loop().call_at(self.deadline, self._deadline_fired)
        inner = self._run()
        try:
            try:
                async for event in inner:
                    self._parked = True
                    try:
                        yield event
                    finally:
                        self._parked = False
                    self.sink.delivered(event)
                    if self._cancel_reason is not None and self.finished:
                        raise RunCancelledError(self.run_id, self._cancel_reason)
            finally:
                # Not aclosing: its context manager costs a run more than relaying its events.
                await inner.aclose()
        except FevexError as error:
            error.for_run(self.run_id)
            raise
        except Exception as error:
            # Not fevex's own (a bug, or a tool's exception the runner let through): the
            # run id still reaches whoever reads the traceback.
            error.add_note(f"(raised from fevex run {self.run_id})")
            raise
        finally:
            if timer is not None:
                timer.cancel()
            try:
                await keeper.stop()
                await self._cancelled_on_request()
            finally:
                if self._active is not None:
                    self._active.pop(self.run_id, None)

    async def _run(self) -> AsyncGenerator[RunEvent, None]:
        try:
            # Yielded inside the handlers: a consumer that stops right after the opening
            # event cancels the run like one that stops anywhere else.
            for event in self.opening:
                yield event
            steps = self.driver.steps(self)
            try:
                async for event in steps:
                    yield event
            finally:
                await steps.aclose()
        except GeneratorExit:
            # The consumer abandoned the stream: the run is cancelled, durably.
            if self._lease_error is None:
                if self._cancel_reason is None:
                    self._cancel_reason = "aborted"
                self._observe(await self._persist_cancelled(self._cancel_reason))
            raise
        except DeadlineReached:
            if self._cancel_reason is None:
                self._cancel_reason = "timeout"
            cancelled = await self._persist_cancelled(self._cancel_reason)
            if cancelled is not None:
                yield cancelled
            raise RunCancelledError(self.run_id, self._cancel_reason) from None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self._lease_error is not None:
                if task is not None and task.cancelling():
                    task.uncancel()
                self.finished = True
                # Its cause (the store's failure) kept, the cancellation that stopped the
                # step dropped.
                lost = self._lease_error
                raise lost from lost.__cause__
            if self._cancel_reason is None:
                # Cancelled from outside fevex (task cancellation): record it and let the
                # cancellation propagate untouched.
                self._observe(await self._persist_cancelled("aborted"))
                raise
            if task is not None and task.cancelling():
                task.uncancel()
            cancelled = await self._persist_cancelled(self._cancel_reason)
            if cancelled is not None:
                yield cancelled
            raise RunCancelledError(self.run_id, self._cancel_reason) from None
        except FevexError as error:
            failed = await self._persist_failed(error)
            if failed is not None:
                yield failed
            raise
        except Exception as error:
            failed = await self._persist_failed(
                FevexRunError(
                    "UNEXPECTED_ERROR", f"The run failed unexpectedly: {type(error).__name__}."
                )
            )
            if failed is not None:
                yield failed
            raise
        finally:
            self.settled.set()
