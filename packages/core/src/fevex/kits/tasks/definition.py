"""A durable task's definition: its id and revision, what its state is, who may run it, and
its steps in order (DESIGN §12, "Durable professional tasks")."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from fevex.errors import FevexConfigurationError, FevexRunError
from fevex.kits.callbacks import check_callable
from fevex.schemas.schema import CompiledSchema, compile_schema, ensure_json

if TYPE_CHECKING:
    from fevex.kits.tasks.task_context import TaskContext

__all__ = ["DurableTask", "TaskStep", "define_durable_task"]

Replay = Literal["safe", "reconcile"]
# A step: ``run(state, ctx)`` returns the task's new state.
StepFunction = Callable[[Any, "TaskContext"], Awaitable[Any] | Any]
# A reconcile step's receipt query: the new state when its effect happened, ``None`` when not.
ReconcileFunction = Callable[[Any, "TaskContext"], Awaitable[Any] | Any]

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


def _invalid(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("INVALID_TASK", message)


@dataclass(frozen=True, slots=True)
class TaskStep:
    """One step of a durable task.

    ``run(state, ctx)`` (sync or async) returns the task's new state. ``replay="safe"``: a
    step an attempt died in runs again from its start (it has no effect a second run would
    repeat, or its effect is idempotent). ``replay="reconcile"``: its effect may already
    have happened when an attempt died in it, so the next attempt first calls
    ``reconcile(state, ctx)``, the app's receipt query: the state the step would have
    returned when the effect happened, ``None`` when it did not (then the step runs)."""

    id: str
    run: StepFunction
    replay: Replay = "safe"
    reconcile: ReconcileFunction | None = None

    def check(self) -> None:
        if not isinstance(self.id, str) or not _ID.match(self.id):
            raise _invalid(f"A task step id must be a short name, not {self.id!r}.")
        check_callable(f"step {self.id!r} run", self.run, required=True)
        if self.replay not in ("safe", "reconcile"):
            raise _invalid(
                f"Step {self.id!r}: replay must be 'safe' or 'reconcile', not {self.replay!r}."
            )
        if self.replay == "reconcile":
            check_callable(f"step {self.id!r} reconcile", self.reconcile, required=True)
        elif self.reconcile is not None:
            raise _invalid(
                f"Step {self.id!r} has a reconcile function but replay='safe'; "
                "set replay='reconcile' for a step whose effect needs a receipt."
            )


@dataclass(frozen=True, slots=True)
class DurableTask:
    """A durable task as :func:`define_durable_task` made it; register it with
    ``create_fevex(tasks=[...])``."""

    id: str
    revision: str
    steps: tuple[TaskStep, ...]
    authorize: Callable[..., Any]
    max_attempts: int
    calls_per_attempt: int | None
    state: Any = None

    @property
    def schema(self) -> CompiledSchema | None:
        """The state's type, compiled (``None`` for a predicate or any JSON)."""
        if isinstance(self.state, type):
            return compile_schema(self.state)
        return None

    def state_json(self, value: Any, what: str) -> Any:
        """``value`` as the JSON the checkpoint keeps; ``TASK_STATE_INVALID`` when the
        state type or predicate refuses it."""
        schema = self.schema
        try:
            if schema is not None:
                value = schema.to_json(schema.validate(value))
            ensure_json(value)
        except Exception as error:
            raise _state_invalid(self.id, what, f"{type(error).__name__}: {error}") from None
        if schema is None and self.state is not None and not self.state(value):
            raise _state_invalid(self.id, what, "the state predicate refused it")
        return value

    def state_value(self, state_json: Any) -> Any:
        """The stored state as a step is given it: its type's value, or a JSON copy."""
        schema = self.schema
        if schema is not None:
            return schema.validate(state_json)
        import copy

        return copy.deepcopy(state_json)


def _state_invalid(task_id: str, what: str, why: str) -> FevexRunError:
    return FevexRunError(
        "TASK_STATE_INVALID",
        f"Task {task_id}: {what} is not a valid state ({why[:300]}).",
        category="validation",
        details={"task": task_id, "what": what},
    )


def define_durable_task(
    *,
    id: str,
    revision: str,
    steps: Sequence[TaskStep],
    authorize: Callable[..., Any],
    state: Any = None,
    max_attempts: int = 3,
    calls_per_attempt: int | None = None,
) -> DurableTask:
    """A durable task: ``steps`` run in order, each once, over attempts an app starts with
    ``app.run_task``.

    ``state`` is the state's type (a pydantic model or any type pydantic validates), a
    predicate of its JSON, or ``None`` for any JSON. ``authorize(context, state)`` is an
    assertion callback (``None`` accepts, raising refuses with ``TASK_UNAUTHORIZED``) asked
    at the start of every attempt with the caller's ``ExecutionContext``. ``max_attempts``
    bounds the attempts; ``calls_per_attempt`` is the model calls each attempt reserves
    from the task's ``model_budget`` (default: all that is left), never given back. When
    no attempt can follow (attempts or budget used up), a ``reconcile`` step an attempt
    started is asked for its receipt before the task ends: failed, or completed when that
    was its last step."""
    if not isinstance(id, str) or not _ID.match(id):
        raise _invalid(f"A task id must be a short name, not {id!r}.")
    if not isinstance(revision, str) or not revision:
        raise _invalid(f"Task {id}: revision must be a non-empty string.")
    check_callable("authorize", authorize, required=True)
    for name, value in (("max_attempts", max_attempts), ("calls_per_attempt", calls_per_attempt)):
        if value is None and name == "calls_per_attempt":
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise _invalid(f"Task {id}: {name} must be a positive integer, not {value!r}.")
    if state is not None and not isinstance(state, type) and not callable(state):
        raise _invalid(f"Task {id}: state must be a type, a predicate or None.")
    if isinstance(state, type):
        compile_schema(state)
    checked = tuple(steps)
    if not checked:
        raise _invalid(f"Task {id} has no steps.")
    for step in checked:
        if not isinstance(step, TaskStep):
            raise _invalid(f"Task {id}: steps must be TaskStep values, not {step!r}.")
        step.check()
    ids = [step.id for step in checked]
    if len(set(ids)) != len(ids):
        raise _invalid(f"Task {id}: two steps share an id.")
    return DurableTask(id, revision, checked, authorize, max_attempts, calls_per_attempt, state)
