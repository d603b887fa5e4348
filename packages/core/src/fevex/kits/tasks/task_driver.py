"""The step driver of task runs: one attempt of a durable task, under the lease the kernel
took for ``run_task``.

An attempt, in order: fail the task once its deadline has passed; ask ``authorize`` (within
the deadline, stopped by cancellation); check the revision; count what the attempts before
used (cancelling children a dead attempt left); then commit the attempt count and the
attempt's model reservation, durably, before any step runs. A refusal (authorization,
revision) changes nothing and leaves the task ready; attempts or budget exhausted end it,
once a reconcile step an attempt started has been asked for its receipt.

Each step's new state is committed with the next step index, so a completed step never
runs again. A ``reconcile`` step is journalled ``started`` durably before it runs; an
attempt that finds it started (its attempt died in it) first asks ``reconcile`` for its
receipt. A step's failure is committed and leaves the task ready for another attempt
(paused, with no wake-up: no worker ever claims it) until its attempts are exhausted; its
reservation is not given back. Whenever no attempt can follow (attempts or budget used up,
the last attempt's step failed), a reconcile step left started is asked for its receipt
before the task ends: an effect that may have happened is never left unknown in a failed
task. Commits are never guarded: a cancellation or the deadline stops the awaits of
``authorize`` and of the steps, never a checkpoint save under way, so the lease is released
(by ``run.cancelled``, which carries the checkpoint marked cancelled) only after the save
landed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, NoReturn

from fevex._ground.clock import utc_now
from fevex._internal.engine.deadline import DeadlineReached
from fevex._internal.workflows.workflow_state import call_for_run
from fevex.errors import FevexError, FevexRunError
from fevex.events import RunEvent
from fevex.kits.callbacks import call_assertion, json_copy, shown
from fevex.kits.tasks.task_checkpoint import TaskCheckpoint, seconds_until
from fevex.kits.tasks.task_context import TaskContext, count_model_calls
from fevex.models import Usage
from fevex.runtime.context import ExecutionContext
from fevex.runtime.records import TERMINAL_STATUSES

if TYPE_CHECKING:
    from fevex._internal.agents.agent_kind import AgentKind
    from fevex._internal.engine.execution import Execution
    from fevex._internal.engine.kernel import Kernel
    from fevex.kits.tasks.definition import DurableTask, TaskStep

__all__ = ["TaskDriver"]

# The pause of a task between attempts: no wake-up, so only run_task continues it.
READY = {"reason": "task"}
# Refusals that leave the task as it was, for a caller (or a deployment) that may succeed.
_REFUSALS = frozenset({"TASK_UNAUTHORIZED", "TASK_REVISION_MISMATCH", "KIT_CALLBACK_CONTRACT"})


class TaskDriver:
    """One pass of a task run: its creation (``context`` is ``None``: it pauses ready at
    once) or one attempt for the ``run_task`` caller's ``context``."""

    execution: Execution

    def __init__(
        self,
        kernel: Kernel,
        agents: AgentKind,
        definition: DurableTask,
        checkpoint: TaskCheckpoint,
        context: ExecutionContext | None,
    ) -> None:
        self.kernel = kernel
        self.agents = agents
        self.definition = definition
        self.state = checkpoint
        self.context = context
        # How this attempt ended when the run did not: a refusal, or a step's failure.
        self.refusal: FevexError | None = None
        self.failure: FevexError | None = None

    @property
    def usage(self) -> Usage:
        return Usage()

    def checkpoint(self) -> dict[str, Any]:
        return self.state.to_json()

    async def steps(self, execution: Execution) -> AsyncGenerator[RunEvent, None]:
        self.execution = execution
        if self.context is None:
            yield await execution.suspend(dict(READY), self.checkpoint)
            return
        try:
            async for event in self._attempt():
                yield event
        except (asyncio.CancelledError, DeadlineReached):
            await self._cancelled()
            raise

    async def _attempt(self) -> AsyncGenerator[RunEvent, None]:
        execution = self.execution
        passed = self._deadline_passed()
        if passed is not None:
            await self._end(passed)
        try:
            await self._authorize()
            self._check_revision()
        except FevexError as refusal:
            if refusal.code not in _REFUSALS:
                raise
            self.refusal = refusal
            yield await execution.suspend({**READY, "refused": refusal.code}, self.checkpoint)
            return
        await self._count_earlier_attempts()
        exhausted = self._exhausted()
        if exhausted is not None:
            async for event in self._end_after_receipt(exhausted):
                yield event
            return
        yield await self._begin_attempt()
        steps = self.definition.steps
        while self.state.next_step_index < len(steps):
            step = steps[self.state.next_step_index]
            try:
                async for event in self._step(step):
                    yield event
            except (asyncio.CancelledError, DeadlineReached):
                raise
            except Exception as error:
                failure = _as_failure(error, step.id)
                if failure.code == "LEASE_LOST":
                    raise
                yield await self._step_failed(step, failure)
                if self.state.attempt_count >= self.state.max_attempts:
                    # No attempt is left: the task ends with its last failure.
                    async for event in self._end_after_receipt(failure, error):
                        yield event
                    return
                self.failure = failure
                self.state.status = "ready"
                yield await execution.suspend({**READY, "failed": failure.code}, self.checkpoint)
                return
        yield await self._complete()

    async def _complete(self) -> RunEvent:
        self.state.status = "completed"
        # Rides on the final commit, so that the stored checkpoint says completed too.
        await self.execution.sink.emit("task.completed", {}, checkpoint=self.checkpoint)
        output = self.definition.state_value(self.state.state)
        return await self.execution.complete(output, self.state.state, {}, ())

    async def _end_after_receipt(
        self, error: FevexError, cause: BaseException | None = None
    ) -> AsyncGenerator[RunEvent, None]:
        """End the task with ``error`` once no attempt can follow, but first ask for its
        receipt a reconcile step an attempt started and did not end: its effect may have
        happened, and a task never ends failed with that unknown. The receipt query runs
        within what is left of the reservation of the attempt that started the step. A
        receipt that completes the task's last step completes the task."""
        state, steps = self.state, self.definition.steps
        step = steps[state.next_step_index] if state.next_step_index < len(steps) else None
        if step is not None and step.replay == "reconcile" and state.started_step == step.id:
            try:
                async for event in self._receipt(step, self._context(step)):
                    yield event
            except (asyncio.CancelledError, DeadlineReached):
                raise
            except Exception as problem:
                failure = _as_failure(problem, step.id)
                if failure.code == "LEASE_LOST":
                    raise
                yield await self._step_failed(step, failure)
                cause = problem
        if state.next_step_index >= len(steps):
            yield await self._complete()
            return
        await self._end(error, cause)

    async def _cancelled(self) -> None:
        """The run is being cancelled (``cancel_run``, or the task's deadline): its
        checkpoint says so too, riding on the run's ``run.cancelled`` commit. Nothing is
        written once the run has ended or lost its lease."""
        self.state.status = "cancelled"
        execution = self.execution
        if not execution.finished and execution.sink.lost is None:
            await execution.sink.emit("task.cancelled", {}, checkpoint=self.checkpoint)

    async def _end(self, error: FevexError, cause: BaseException | None = None) -> NoReturn:
        """End the task with ``error`` (the run fails with it); its checkpoint, marked
        failed, rides on the run's final commit."""
        self.state.status = "failed"
        await self.execution.sink.emit(
            "task.failed", {"code": error.code}, checkpoint=self.checkpoint
        )
        if cause is None or cause is error:
            raise error
        raise error from cause

    # -- before any work ------------------------------------------------------------

    def _deadline_passed(self) -> FevexError | None:
        state = self.state
        if seconds_until(state.deadline_at, utc_now()) > 0:
            return None
        return FevexRunError(
            "TASK_DEADLINE_EXCEEDED",
            f"Task {self.execution.run_id} was due by {state.deadline_at}; it has ended.",
            details={"deadline_at": state.deadline_at},
        )

    async def _authorize(self) -> None:
        assert self.context is not None
        await call_assertion(
            "authorize",
            self.definition.authorize,
            ExecutionContext.from_json(self.context.to_json()),
            self.definition.state_value(json_copy(self.state.state)),
            rejected="TASK_UNAUTHORIZED",
            guard=self.execution.guard,
        )

    def _check_revision(self) -> None:
        stored, mine = self.state.revision, self.definition.revision
        if stored != mine:
            raise FevexRunError(
                "TASK_REVISION_MISMATCH",
                f"Task {self.execution.run_id} was created by revision {stored!r} of "
                f"{self.definition.id}; this app has revision {mine!r}. Nothing was changed.",
                details={"revision": stored, "app_revision": mine},
            )

    async def _count_earlier_attempts(self) -> None:
        """Count the model calls of every child the attempts before left uncounted, after
        cancelling those a dead attempt left running (their calls count, and no worker
        may go on spending the task's budget through them)."""
        kernel, state = self.kernel, self.state
        after = None
        while True:
            page = await kernel.store.list_runs(
                parent_run_id=self.execution.run_id, limit=100, after=after
            )
            for child in page:
                if child.id in state.counted:
                    continue
                if child.status not in TERMINAL_STATUSES:
                    await kernel.cancel(child.id, kernel.lease_seconds)
                state.counted[child.id] = await count_model_calls(kernel, child.id)
            if len(page) < 100:
                return
            after = page[-1].id

    def _exhausted(self) -> FevexError | None:
        """Why no attempt can start: all were had, or all of the budget is reserved."""
        state, run_id = self.state, self.execution.run_id
        if state.attempt_count >= state.max_attempts:
            return FevexRunError(
                "TASK_ATTEMPTS_EXHAUSTED",
                f"Task {run_id} has had all its {state.max_attempts} attempts.",
                details={"attempt_count": state.attempt_count},
            )
        if state.budget_limit is not None and self._reservation() < 1:
            return FevexRunError(
                "TASK_BUDGET_EXHAUSTED",
                f"Task {run_id} has reserved all of its model budget "
                f"({state.budget_limit} calls) in earlier attempts.",
                details={"model_budget": state.budget_json()},
            )
        return None

    def _reservation(self) -> int:
        """An attempt's reservation: ``calls_per_attempt`` of what is left, or all of it."""
        state = self.state
        assert state.budget_limit is not None
        left = state.budget_limit - state.budget_reserved
        per_attempt = self.definition.calls_per_attempt
        return left if per_attempt is None else min(per_attempt, left)

    async def _begin_attempt(self) -> RunEvent:
        """Commit the attempt count and the attempt's reservation before any step runs."""
        state = self.state
        reservation = None
        if state.budget_limit is not None:
            reservation = self._reservation()
            state.budget_reserved += reservation
        state.attempt_count += 1
        state.attempt_reserved = reservation
        state.attempt_used_at_start = state.budget_used
        state.status = "running"
        return await self.execution.sink.emit(
            "task.attempt.started",
            {
                "attempt": state.attempt_count,
                "reserved": reservation,
                "model_budget": state.budget_json(),
                "next_step_index": state.next_step_index,
            },
            durable=True,
            checkpoint=self.checkpoint,
        )

    # -- steps ----------------------------------------------------------------------

    def _context(self, step: TaskStep) -> TaskContext:
        assert self.context is not None
        return TaskContext(
            self.kernel, self.agents, self.execution, self.state, self.context, step.id
        )

    async def _step(self, step: TaskStep) -> AsyncGenerator[RunEvent, None]:
        state, sink = self.state, self.execution.sink
        context = self._context(step)
        identity = {"step_id": step.id, "index": state.next_step_index}
        if step.replay == "reconcile" and state.started_step == step.id:
            # Its attempt died in it: whether its effect happened is the receipt's to say.
            async for event in self._receipt(step, context):
                yield event
            if state.started_step is None:
                return  # the receipt completed it
        if step.replay == "reconcile":
            state.started_step = step.id
        # Durable for a reconcile step: its journal entry must be stored before its effect.
        yield await sink.emit(
            "task.step.started",
            {**identity, "kind": "task", "replay": step.replay, "attempt": state.attempt_count},
            durable=step.replay == "reconcile",
            checkpoint=self.checkpoint,
        )
        result = await call_for_run(self.execution, step.run, self._state_value(), context)
        yield await self._completed(step, result, context, reconciled=False)

    async def _receipt(
        self, step: TaskStep, context: TaskContext
    ) -> AsyncGenerator[RunEvent, None]:
        """Ask the started reconcile ``step`` for its receipt: the step completes with the
        state it returns, or stays started (``None``: its effect did not happen)."""
        yield await self.execution.sink.emit(
            "task.step.reconciling", {"step_id": step.id, "index": self.state.next_step_index}
        )
        assert step.reconcile is not None  # checked by TaskStep.check
        receipt = await call_for_run(self.execution, step.reconcile, self._state_value(), context)
        if receipt is not None:
            yield await self._completed(step, receipt, context, reconciled=True)

    def _state_value(self) -> Any:
        return self.definition.state_value(json_copy(self.state.state))

    async def _completed(
        self, step: TaskStep, result: Any, context: TaskContext, *, reconciled: bool
    ) -> RunEvent:
        """The step's new state, committed with the next step index."""
        state = self.state
        state.state = self.definition.state_json(
            result, f"the state {'reconcile' if reconciled else 'step'} {step.id!r} returned"
        )
        index = state.next_step_index
        state.next_step_index = index + 1
        state.started_step = None
        state.completed_steps.append(step.id)
        return await self.execution.sink.emit(
            "task.step.completed",
            {
                "step_id": step.id,
                "index": index,
                "reconciled": reconciled,
                "model_budget": state.budget_json(),
                "max_model_calls": context.max_model_calls,
            },
            durable=True,
            checkpoint=self.checkpoint,
        )

    async def _step_failed(self, step: TaskStep, failure: FevexError) -> RunEvent:
        state = self.state
        state.last_error = failure.to_json()
        return await self.execution.sink.emit(
            "task.step.failed",
            {
                "step_id": step.id,
                "index": state.next_step_index,
                "attempt": state.attempt_count,
                "error": failure.to_json(),
                "model_budget": state.budget_json(),
            },
            durable=True,
            checkpoint=self.checkpoint,
        )


def _as_failure(error: Exception, step_id: str) -> FevexError:
    if isinstance(error, FevexError):
        return error
    return FevexRunError(
        "TASK_STEP_FAILED",
        f"Task step {step_id!r} raised {type(error).__name__}: {shown(error, str, 300)}",
        details={"step_id": step_id, "cause": type(error).__name__},
    )
