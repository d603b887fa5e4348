"""What a task step is given besides the state: who runs the task, and agents to run as
child runs of the task within what is left of the attempt's model reservation.

The calls a child makes are counted by the kernel's record of it (the ``model.started``
events its run stored), never by what the step says: a step cannot spend more than the
reservation, because each child's ``max_steps`` is narrowed to what is left, and it cannot
under-report, because the count is read from the store.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from fevex._ground.clock import new_id
from fevex._internal.engine.kernel import child_run
from fevex.agents import Limits
from fevex.errors import FevexError, FevexRunError
from fevex.runtime.context import ExecutionContext
from fevex.runtime.records import TERMINAL_STATUSES, AgentRun

if TYPE_CHECKING:
    from fevex._internal.agents.agent_kind import AgentKind
    from fevex._internal.engine.execution import Execution
    from fevex._internal.engine.kernel import Kernel
    from fevex.kits.tasks.task_checkpoint import TaskCheckpoint

__all__ = ["TaskContext", "count_model_calls"]

# Each bound but the model calls left open: a task narrows only what it reserves.
_UNBOUNDED = Limits(
    max_steps=None,
    max_tool_calls=None,
    max_input_tokens=None,
    max_output_tokens=None,
    max_tool_retries=None,
)


async def count_model_calls(kernel: Kernel, run_id: str) -> int:
    """The model calls a run made, as its stored events say."""
    calls, after = 0, None
    while True:
        page = await kernel.store.list_events(run_id, after=after, limit=500)
        calls += sum(1 for event in page if event.type == "model.started")
        if len(page) < 500:
            return calls
        after = page[-1].id


class TaskContext:
    """A task step's context: ``context`` (the ``ExecutionContext`` of the ``run_task``
    call), ``task_id``, ``step_id``, ``attempt`` and :meth:`run_agent`."""

    def __init__(
        self,
        kernel: Kernel,
        agents: AgentKind,
        execution: Execution,
        checkpoint: TaskCheckpoint,
        context: ExecutionContext,
        step_id: str,
    ) -> None:
        self._kernel = kernel
        self._agents = agents
        self._execution = execution
        self._checkpoint = checkpoint
        self.context = context
        self.step_id = step_id

    @property
    def task_id(self) -> str:
        return self._execution.run_id

    @property
    def attempt(self) -> int:
        return self._checkpoint.attempt_count

    @property
    def max_model_calls(self) -> int | None:
        """The model calls this attempt may still make (``None``: no budget was set)."""
        checkpoint = self._checkpoint
        if checkpoint.attempt_reserved is None:
            return None
        spent = checkpoint.budget_used - checkpoint.attempt_used_at_start
        return max(checkpoint.attempt_reserved - spent, 0)

    async def run_agent(self, agent: str, input: Any) -> Any:
        """Run the app's agent ``agent`` as a child run of the task, its model calls
        bounded by :attr:`max_model_calls`, and return its output (JSON, or text).
        ``TASK_BUDGET_EXHAUSTED`` when nothing is left; the child's failure is raised."""
        remaining = self.max_model_calls
        if remaining is not None and remaining < 1:
            raise FevexRunError(
                "TASK_BUDGET_EXHAUSTED",
                f"Task {self.task_id}: this attempt's model reservation is spent.",
                details={"task_id": self.task_id, "step_id": self.step_id},
            )
        limits = dataclasses.replace(_UNBOUNDED, max_steps=remaining)
        kernel, execution = self._kernel, self._execution
        run, loop = self._agents.new_run(agent, input, new_id("ses"), None, None, limits)
        parent = execution.sink.run
        started = await kernel.start(
            child_run(parent, run, self.context),
            loop,
            session_revision=None,
            opening={
                "agent_name": agent,
                "session_id": run.session_id,
                "input": run.input,
                "parent_run_id": parent.id,
                "parent_step_id": self.step_id,
            },
            deadline=execution.deadline,
            batching=True,
        )
        try:
            # Guarded: cancelling the task (or its deadline) cancels the child first.
            await execution.guard(_drain(kernel, started))
        except FevexError as error:
            if error.run_id != run.id:
                raise  # the task's own (its lease was lost)
        stored = await kernel.get_run(run.id)
        await self._count(stored)
        if stored.status == "paused":
            await self._count(await kernel.cancel(run.id, kernel.lease_seconds))
            raise FevexRunError(
                "TASK_STEP_FAILED",
                f"Agent {agent} paused (for an approval) in task step {self.step_id}; a task "
                "step cannot wait, so the child was cancelled.",
                details={"step_id": self.step_id, "child_run_id": run.id},
            )
        if stored.status != "completed":
            ended = stored.error or {}
            raise FevexRunError(
                str(ended.get("code") or "TASK_STEP_FAILED"),
                f"Agent {agent} ended {stored.status} in task step {self.step_id}: "
                f"{ended.get('message', '')}",
                details={"step_id": self.step_id, "child_run_id": run.id},
            )
        schema = self._agents.agent(agent).output_schema
        return stored.output if schema is None else schema.validate(stored.output)

    async def _count(self, child: AgentRun) -> None:
        if child.status in TERMINAL_STATUSES:
            self._checkpoint.counted[child.id] = await count_model_calls(self._kernel, child.id)


async def _drain(kernel: Kernel, child: Execution) -> None:
    async for _ in kernel.events(child):
        pass
