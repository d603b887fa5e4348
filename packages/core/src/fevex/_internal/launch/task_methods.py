"""The app's methods for durable tasks (:mod:`fevex.kits.tasks`), with their blocking
twins. The kit is imported when a method is called: ``import fevex`` never loads it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fevex._internal.engine.kernel import Kernel
from fevex._internal.launch.blocking_twins import blocking
from fevex.runtime.context import ExecutionContext
from fevex.runtime.run_result import RunResult

__all__ = ["TaskMethods"]


class TaskMethods:
    """``create_task`` and ``run_task`` of :class:`fevex.Fevex`."""

    _kernel: Kernel

    async def create_task(
        self,
        task: str,
        state: Any,
        *,
        deadline: float,
        model_budget: int | None = None,
        context: ExecutionContext | Mapping[str, Any] | None = None,
    ) -> str:
        """Store a ready task of the durable task ``task`` (its id) with the initial
        ``state`` and return the task's run id; nothing runs until ``run_task``.

        ``deadline`` is seconds from now: the task's fixed ``deadline_at``, after which no
        attempt starts and a running one is cancelled. ``model_budget`` is the model calls
        all its attempts may make together (``None``: unbounded). ``context`` is stored
        with the run (its namespace scopes it, as any run's)."""
        from fevex.kits.tasks.task_runs import create_task

        return await create_task(
            self._kernel,
            task,
            state,
            deadline=deadline,
            model_budget=model_budget,
            context=context,
        )

    async def run_task(
        self, task_id: str, *, context: ExecutionContext | Mapping[str, Any] | None = None
    ) -> RunResult[Any]:
        """Run one attempt of the task ``task_id`` for the caller ``context`` and return
        its final state as the result's ``output``.

        The attempt takes the task's lease (``RUN_CONFLICT`` while another caller's is
        live), asks the task's ``authorize`` (``TASK_UNAUTHORIZED``), checks its revision
        (``TASK_REVISION_MISMATCH``) and deadline (``TASK_DEADLINE_EXCEEDED``), and commits
        the attempt and its model reservation (``TASK_ATTEMPTS_EXHAUSTED``,
        ``TASK_BUDGET_EXHAUSTED``) before any step. A refusal or a step's failure is raised
        and leaves the task ready for another ``run_task`` while attempts are left; the
        others end it."""
        from fevex.kits.tasks.task_runs import run_task

        return await run_task(self._kernel, task_id, context)

    create_task_sync = blocking(create_task)
    run_task_sync = blocking(run_task)
