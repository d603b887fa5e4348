"""Task runs as the kernel sees them: the run kind ``task``.

A task runs only when the app calls ``run_task``. Its kind names no definition a worker
claims (``names`` is empty: no recovery or wake-up pass ever takes a task run), and
:meth:`TaskKind.check` refuses every other continuation (``resume_run``, ``recover_run``,
an approval, a wake-up) with ``TASK_NOT_CONTINUABLE`` before any lease is taken: only a
``run_task`` call, marked for its run in :data:`_RUNNING`, gets a driver. A cancellation
needs no driver, so ``cancel_run`` cancels a task like any run.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from fevex._ground.clock import new_id, utc_now
from fevex._internal.engine.run_kind import LaunchRequest, NewRun, ReadSession, approval_not_found
from fevex.errors import FevexConfigurationError, FevexRunError
from fevex.kits.tasks.definition import DurableTask
from fevex.kits.tasks.task_checkpoint import TaskCheckpoint, deadline_after
from fevex.kits.tasks.task_driver import TaskDriver
from fevex.runtime.approval import ApprovalDecision
from fevex.runtime.context import ExecutionContext
from fevex.runtime.records import AgentRun, Session

if TYPE_CHECKING:
    from fevex._internal.agents.agent_kind import AgentKind
    from fevex._internal.engine.kernel import Kernel, KindFactory

__all__ = ["KIND", "TaskKind", "TaskOrder", "task_run_kinds"]

KIND = "task"

# The run a run_task call in this context continues, with the caller's context.
_RUNNING: ContextVar[tuple[str, ExecutionContext] | None] = ContextVar(
    "fevex_task_running", default=None
)


@dataclass(slots=True)
class TaskOrder:
    """What ``create_task`` asks for besides the state: seconds to the deadline and the
    model calls the task may make (``None``: unbounded)."""

    deadline: float
    model_budget: int | None


@contextmanager
def running_task(run_id: str, context: ExecutionContext) -> Iterator[None]:
    """Within it, the kernel may build a driver for ``run_id``: a ``run_task`` call."""
    token = _RUNNING.set((run_id, context))
    try:
        yield
    finally:
        _RUNNING.reset(token)


class TaskKind:
    """The :class:`~fevex._internal.engine.run_kind.RunKind` of task runs."""

    reads_session = False
    background_batching = True

    def __init__(self, kernel: Kernel, tasks: Mapping[str, DurableTask]) -> None:
        self.kernel = kernel
        self.tasks = dict(tasks)

    @property
    def names(self) -> Collection[str]:
        # None: workers claim runs by name, and a task is never theirs to continue.
        return ()

    @property
    def agents(self) -> AgentKind:
        return cast("AgentKind", self.kernel.kinds["agent"])

    def definition(self, task_id: str) -> DurableTask:
        found = self.tasks.get(task_id)
        if found is None:
            raise FevexRunError(
                "TASK_NOT_FOUND",
                f"There is no durable task {task_id!r}; pass it in create_fevex(tasks=[...]).",
                details={"task": task_id},
            )
        return found

    async def launch(
        self, request: LaunchRequest, context: dict[str, Any] | None, read_session: ReadSession
    ) -> NewRun:
        """A new task, ready: its driver pauses it at once (``create_task``)."""
        definition = self.definition(str(request.reference))
        order = request.limits
        assert isinstance(order, TaskOrder)
        state = definition.state_json(request.input, "the initial state")
        now = utc_now()
        run = AgentRun(
            new_id("run"),
            new_id("ses"),
            definition.id,
            "running",
            state,
            now,
            now,
            revision=1,
            kind=KIND,
            name=definition.id,
            version=definition.revision,
            context=context,
        )
        checkpoint = TaskCheckpoint(
            definition_id=definition.id,
            revision=definition.revision,
            state=state,
            max_attempts=definition.max_attempts,
            deadline_at=deadline_after(now, order.deadline),
            budget_limit=order.model_budget,
        )
        driver = TaskDriver(self.kernel, self.agents, definition, checkpoint, None)
        opening = {
            "task_name": definition.id,
            "version": definition.revision,
            "session_id": run.session_id,
            "input": state,
            "deadline_at": checkpoint.deadline_at,
            "model_budget": checkpoint.budget_json(),
        }
        return NewRun(run, driver, opening)

    def check(self, run: AgentRun) -> None:
        self.definition(run.name)
        running = _RUNNING.get()
        if running is None or running[0] != run.id:
            raise FevexRunError(
                "TASK_NOT_CONTINUABLE",
                f"Run {run.id} is a durable task: only app.run_task continues it (a worker, "
                "resume_run or recover_run never does). Nothing was changed.",
                details={"run_id": run.id},
            )

    def driver(self, run: AgentRun, checkpoint: Any, session: Session | None) -> TaskDriver:
        self.check(run)
        running = _RUNNING.get()
        assert running is not None
        definition = self.definition(run.name)
        return TaskDriver(
            self.kernel,
            self.agents,
            definition,
            TaskCheckpoint.from_json(run.id, checkpoint),
            running[1],
        )

    def decide_approval(
        self, run: AgentRun, checkpoint: dict[str, Any], decision: ApprovalDecision
    ) -> None:
        # A task waits for no approval: its steps' agents that pause are cancelled.
        raise approval_not_found(run.id, decision.approval_id)

    def accept_event(self, run: AgentRun, name: str, payload: Any, actor: Any) -> Any:
        raise FevexRunError(
            "EVENT_NOT_EXPECTED",
            f"Run {run.id} is a durable task; tasks wait for no event.",
            details={"run_id": run.id, "event": name, "status": run.status},
        )

    def receive_event(
        self, run: AgentRun, checkpoint: dict[str, Any], payload: Any, actor: Any
    ) -> None:
        raise FevexRunError("EVENT_NOT_EXPECTED", f"Run {run.id} waits for no event.")


def task_run_kinds(tasks: Iterable[Any], taken: Collection[str]) -> dict[str, KindFactory]:
    """The ``task`` kind of the app's durable ``tasks``; ``INVALID_TASK`` for a value that
    is not one, two with one id, or an id an agent, workflow or team has (workers claim
    runs by name: a task's must never be one of theirs)."""
    by_id: dict[str, DurableTask] = {}
    for task in tasks:
        if not isinstance(task, DurableTask):
            raise FevexConfigurationError(
                "INVALID_TASK", f"tasks= takes define_durable_task(...) values, not {task!r}."
            )
        if task.id in by_id:
            raise FevexConfigurationError("INVALID_TASK", f"Two tasks have the id {task.id!r}.")
        if task.id in taken:
            raise FevexConfigurationError(
                "INVALID_TASK",
                f"The task id {task.id!r} is the name of an agent, workflow or team too.",
            )
        by_id[task.id] = task
    return {KIND: lambda kernel: TaskKind(kernel, by_id)}
