"""What a workflow function receives: its steps, each a durable, journalled identity."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, overload

from fevex.agents import AgentDefinition
from fevex.models import Usage
from fevex.tools import ToolDefinition

__all__ = ["AgentStepResult", "EventDelivery", "WorkflowStep"]


@dataclass(frozen=True, slots=True)
class EventDelivery:
    """An external event a workflow waited for: its ``payload`` (a value of the declared
    schema), the ``actor`` who sent it (``None`` when none was given), ``received_at``
    (ISO 8601 UTC) and ``payload_json``, the payload as the journal stores it."""

    payload: Any
    actor: dict[str, Any] | None
    received_at: str
    payload_json: Any = field(default=None, compare=False)


OutputT = TypeVar("OutputT")
ResultT = TypeVar("ResultT")


@dataclass(frozen=True, slots=True)
class AgentStepResult(Generic[OutputT]):
    """The end of an agent step's child run: its id, its session, its ``output`` (the
    validated value, typed by the agent definition's output schema, as ``run_agent``
    returns it: rebuilt from the same stored JSON on a replay), ``usage``, and
    ``output_json``, the output as the journal stores it."""

    run_id: str
    session_id: str
    output: OutputT
    usage: Usage
    output_json: Any = field(default=None, compare=False)


class WorkflowStep(Protocol):
    """The steps of one workflow run. Each ``step_id`` is the step's durable identity:
    on a resume or a recovery the function runs again from the start, and a step whose id
    the journal holds as completed returns its stored result without running."""

    @overload
    async def run(
        self,
        step_id: str,
        function: Callable[..., Awaitable[ResultT]],
        /,
        *args: Any,
        compensate: Compensation | None = None,
    ) -> ResultT: ...
    @overload
    async def run(
        self,
        step_id: str,
        function: Callable[..., ResultT],
        /,
        *args: Any,
        compensate: Compensation | None = None,
    ) -> ResultT: ...
    async def run(
        self,
        step_id: str,
        function: Callable[..., Any],
        /,
        *args: Any,
        compensate: Compensation | None = None,
    ) -> Any:
        """Call ``function(*args)`` (sync, run in a thread, or async) once; its result must
        be JSON, and is typed as the function's (an async function's, awaited). ``args``
        must be JSON too: with the function's qualified name (not its module: a script run
        as ``__main__`` and a worker importing it agree), they are the step's identity,
        which a replay must ask
        for again at ``step_id``.

        ``compensate(result)`` undoes the step: when the workflow fails later, the
        compensations of its completed steps run in reverse completed order."""
        ...

    async def tool(
        self,
        step_id: str,
        tool: str | ToolDefinition[Any, Any],
        input: Any,
        *,
        compensate: Compensation | None = None,
    ) -> Any:
        """Run a tool of the app with ``input``, as an agent's call runs it (validation,
        policies, credentials, retries), and return its JSON output. ``compensate`` as
        for :meth:`run`, called with the tool's output."""
        ...

    @overload
    async def agent(
        self,
        step_id: str,
        agent: AgentDefinition[OutputT],
        *,
        input: Any,
        session_id: str | None = None,
    ) -> AgentStepResult[OutputT]: ...
    @overload
    async def agent(
        self,
        step_id: str,
        agent: str,
        *,
        input: Any,
        session_id: str | None = None,
    ) -> AgentStepResult[Any]: ...
    async def agent(
        self,
        step_id: str,
        agent: str | AgentDefinition[Any],
        *,
        input: Any,
        session_id: str | None = None,
    ) -> AgentStepResult[Any]:
        """Run an agent of the app as a child run of the workflow; a child that pauses
        (an approval) pauses the workflow until it ends. Given the agent's definition, the
        result is typed by its output."""
        ...

    async def wait_for_event(self, step_id: str, name: str) -> EventDelivery:
        """Pause until ``send_event`` delivers the declared event ``name``."""
        ...

    async def sleep(self, step_id: str, seconds: float) -> None:
        """Pause for ``seconds``: a durable timer a worker (``fevex worker``,
        ``wake_due_runs``) fires once it is due."""
        ...

    async def parallel(
        self, step_id: str, branches: Mapping[str, Callable[[], Awaitable[Any]]]
    ) -> dict[str, Any]:
        """Run the ``branches`` (each a function of no arguments that awaits steps of
        this run, with their own step ids) together and return ``{name: result}``.
        Every branch settles before the step ends: a branch that pauses pauses the
        workflow (several pauses are resolved one at a time, in declaration order, and a
        resume never reruns a completed step); one failure is raised as it is, several
        as ``WORKFLOW_PARALLEL_FAILED`` with every failure, in declaration order."""
        ...


# Undoes a completed step: called with the step's result (sync, in a thread, or async).
Compensation = Callable[[Any], Any]

StepFunction = Callable[[WorkflowStep, Any], Awaitable[Any]]
