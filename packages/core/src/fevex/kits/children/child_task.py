"""One task of a group of child runs, and its frozen form: what the group's journal entry
is identified by."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from fevex.agents import AgentDefinition
from fevex.errors import FevexRunError
from fevex.kits.callbacks import frozen_json
from fevex.workflows import WorkflowDefinition

__all__ = ["ChildTask", "FrozenTask", "freeze_tasks"]


@dataclasses.dataclass(frozen=True, slots=True)
class ChildTask:
    """One child run of a group: of the agent or the workflow it names (exactly one),
    given ``input``. ``max_calls`` bounds the model calls of the child and of every run
    under it (an agent's ``max_steps`` is narrowed to it), ``reserve_calls`` of them are
    set aside from the root run's ``max_model_calls`` when the group starts, and
    ``timeout`` (seconds) bounds the child's run and the check of its result."""

    id: str
    agent: str | AgentDefinition[Any] | None = None
    workflow: str | WorkflowDefinition[Any, Any] | None = None
    input: Any = None
    max_calls: int | None = None
    reserve_calls: int = 0
    timeout: float | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class FrozenTask:
    """A task as the group journals it: plain JSON, copied before the first await."""

    id: str
    kind: str  # "agent" or "workflow"
    name: str
    input: Any
    max_calls: int | None
    reserve_calls: int
    timeout: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            self.kind: self.name,
            "input": self.input,
            "max_calls": self.max_calls,
            "reserve_calls": self.reserve_calls,
            "timeout": self.timeout,
        }


def freeze_tasks(step_id: str, tasks: Sequence[ChildTask]) -> tuple[FrozenTask, ...]:
    """The group's tasks, checked and frozen; ``KIT_REQUEST_INVALID`` for what is not a
    task a group can run."""
    if isinstance(tasks, str | bytes) or not isinstance(tasks, Sequence) or not tasks:
        raise _invalid(step_id, "tasks must be a non-empty list of ChildTask values.")
    frozen: list[FrozenTask] = []
    seen: set[str] = set()
    for task in tasks:
        if not isinstance(task, ChildTask):
            raise _invalid(step_id, f"{task!r} is not a ChildTask.")
        if not isinstance(task.id, str) or not task.id or ":" in task.id:
            raise _invalid(step_id, f"task id {task.id!r} must be a non-empty text without ':'.")
        if task.id in seen:
            raise _invalid(step_id, f"task id {task.id!r} is used twice.")
        seen.add(task.id)
        frozen.append(_freeze(step_id, task))
    return tuple(frozen)


def _freeze(step_id: str, task: ChildTask) -> FrozenTask:
    where = f"task {task.id!r}"
    if (task.agent is None) == (task.workflow is None):
        raise _invalid(step_id, f"{where} names exactly one of agent= or workflow=.")
    kind = "agent" if task.agent is not None else "workflow"
    target = task.agent if task.agent is not None else task.workflow
    name = target.name if isinstance(target, AgentDefinition | WorkflowDefinition) else target
    if not isinstance(name, str) or not name:
        raise _invalid(step_id, f"{where}: {kind} must be a name or a definition.")
    if task.max_calls is not None and not _count(task.max_calls, lowest=1):
        raise _invalid(step_id, f"{where}: max_calls must be a positive integer or None.")
    if not _count(task.reserve_calls, lowest=0):
        raise _invalid(step_id, f"{where}: reserve_calls must be an integer of 0 or more.")
    if task.max_calls is not None and task.reserve_calls > task.max_calls:
        raise _invalid(step_id, f"{where}: reserve_calls cannot exceed max_calls.")
    timeout = task.timeout
    if timeout is not None and (
        not isinstance(timeout, int | float) or isinstance(timeout, bool) or not timeout > 0
    ):
        raise _invalid(step_id, f"{where}: timeout must be positive seconds or None.")
    return FrozenTask(
        task.id,
        kind,
        name,
        frozen_json(task.input, f"the input of {where}"),
        task.max_calls,
        task.reserve_calls,
        None if timeout is None else float(timeout),
    )


def _count(value: Any, *, lowest: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= lowest


def _invalid(step_id: str, message: str) -> FevexRunError:
    return FevexRunError(
        "KIT_REQUEST_INVALID",
        f"Step {step_id!r}: {message}",
        details={"step_id": step_id},
    )
