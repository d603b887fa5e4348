"""``app.create_task`` and ``app.run_task`` over the kernel: a task is created by the
kernel's one start (its driver pauses it ready at once) and each attempt is a takeover of
the stored run under a new lease, executed like every run (lease keeper, deadline,
cancellation, event sink)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, cast

from fevex._ground.clock import utc_now
from fevex._internal.engine.run_kind import LaunchRequest
from fevex.errors import FevexRunError
from fevex.kits.callbacks import frozen_json
from fevex.kits.tasks.task_checkpoint import TaskCheckpoint, seconds_until
from fevex.kits.tasks.task_driver import TaskDriver
from fevex.kits.tasks.task_kind import KIND, TaskKind, TaskOrder, running_task
from fevex.models import Usage
from fevex.runtime.context import ExecutionContext
from fevex.runtime.records import TERMINAL_STATUSES
from fevex.runtime.run_result import RunResult

if TYPE_CHECKING:
    from fevex._internal.engine.kernel import Kernel

__all__ = ["create_task", "run_task"]


def _task_kind(kernel: Kernel, task_id: str) -> TaskKind:
    kind = kernel.kinds.get(KIND)
    if not isinstance(kind, TaskKind):
        raise FevexRunError(
            "TASK_NOT_FOUND",
            f"This app has no durable task {task_id!r}; pass it in create_fevex(tasks=[...]).",
            details={"task": task_id},
        )
    return kind


async def create_task(
    kernel: Kernel,
    task_id: str,
    state: Any,
    *,
    deadline: float,
    model_budget: int | None,
    context: ExecutionContext | Mapping[str, Any] | None,
) -> str:
    """Store a ready task of the definition ``task_id`` and return its run id."""
    kind = _task_kind(kernel, task_id)
    definition = kind.definition(task_id)
    if not isinstance(deadline, int | float) or isinstance(deadline, bool) or deadline <= 0:
        raise FevexRunError("INVALID_ARGUMENT", "deadline must be a positive number of seconds.")
    if model_budget is not None and (
        not isinstance(model_budget, int) or isinstance(model_budget, bool) or model_budget < 1
    ):
        raise FevexRunError(
            "INVALID_ARGUMENT", "model_budget must be a positive number of model calls or None."
        )
    # Frozen before the first await: the caller's objects changing later change nothing.
    frozen = frozen_json(definition.state_json(state, "the initial state"), "state")
    given = None if context is None else ExecutionContext.of(context).to_json()
    order = TaskOrder(float(deadline), model_budget)
    new = await kind.launch(
        LaunchRequest(task_id, frozen, limits=order), given, kernel.store.get_session
    )
    execution = await kernel.start(
        new.run,
        new.driver,
        session_revision=None,
        opening=new.opening,
        deadline=None,
        batching=True,
    )
    async for _ in kernel.events(execution):
        pass
    return new.run.id


async def run_task(
    kernel: Kernel, run_id: str, context: ExecutionContext | Mapping[str, Any] | None
) -> RunResult[Any]:
    """One attempt of the task ``run_id`` (see ``Fevex.run_task``)."""
    caller = ExecutionContext.of(context)
    run = await kernel.get_run(run_id)
    if run.kind != KIND:
        raise FevexRunError(
            "TASK_NOT_FOUND",
            f"Run {run_id} is a {run.kind} run, not a durable task.",
            details={"run_id": run_id},
        )
    _task_kind(kernel, run.name).definition(run.name)
    if run.status in TERMINAL_STATUSES:
        raise FevexRunError(
            "TASK_ENDED",
            f"Task {run_id} has ended ({run.status}); a task runs until it completes or fails.",
            details={"run_id": run_id, "status": run.status},
        )
    stored = TaskCheckpoint.from_json(run_id, await kernel.store.get_checkpoint(run_id))
    remaining = seconds_until(stored.deadline_at, utc_now())
    status: Literal["running", "paused"] = "paused" if run.status == "paused" else "running"
    with running_task(run_id, caller):
        execution = await kernel.take_over(
            run_id,
            status=status,
            opening_type="run.resumed",
            opening_payload={"reason": "task", "actor": caller.to_json().get("actor")},
            # The task's fixed deadline bounds the attempt (authorize and every step); one
            # already passed is the driver's to report, ending the task.
            timeout=remaining if remaining > 0 else None,
            run=run,
        )
    events = [event async for event in kernel.events(execution)]
    driver = cast(TaskDriver, execution.driver)
    if driver.refusal is not None:
        raise driver.refusal.for_run(run_id)
    if driver.failure is not None:
        raise driver.failure.for_run(run_id)
    return RunResult(run_id, run.session_id, execution.output, Usage(), tuple(events))
