"""What a team function receives: its delegations, each a durable, journalled step."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeVar, overload

from fevex.agents import AgentDefinition
from fevex.workflows.step import AgentStepResult

__all__ = ["TeamStep"]

OutputT = TypeVar("OutputT")


class TeamStep(Protocol):
    """The steps of one team run. As in a workflow, each ``step_id`` is a durable
    identity: on a resume or a recovery the function runs again from the start, and a
    delegation the journal holds as ended returns its stored result without running."""

    @overload
    async def delegate(
        self,
        step_id: str,
        *,
        agent: AgentDefinition[OutputT],
        task: Any,
        expected_output: str | None = None,
    ) -> AgentStepResult[OutputT]: ...
    @overload
    async def delegate(
        self, step_id: str, *, agent: str, task: Any, expected_output: str | None = None
    ) -> AgentStepResult[Any]: ...
    async def delegate(
        self,
        step_id: str,
        *,
        agent: str | AgentDefinition[Any],
        task: Any,
        expected_output: str | None = None,
    ) -> AgentStepResult[Any]:
        """Run the member ``agent`` (the registered agent as is: its model, tools,
        policies and limits) on ``task`` as a child run of the team, and return its end.
        ``expected_output`` describes the result wanted; it is appended to a text task.
        Given the agent's definition, the result is typed by its output.
        A child that pauses (an approval) pauses the team until it ends. At most
        ``max_parallel`` delegations of the run execute at once; one the journal holds as
        ended takes no turn."""
        ...

    async def parallel(
        self, step_id: str, branches: Mapping[str, Callable[[], Awaitable[Any]]]
    ) -> dict[str, Any]:
        """Run the branches (functions of no arguments, usually each one delegation with
        its own step id) together and return ``{name: result}`` once every branch has
        settled; failures and pauses end the step as a workflow's ``parallel`` does. A
        branch returns JSON or :class:`~fevex.workflows.AgentStepResult` values."""
        ...

    @overload
    async def handoff(
        self,
        step_id: str,
        *,
        from_agent: str | AgentDefinition[Any],
        to_agent: AgentDefinition[OutputT],
        reason: str,
        task: Any,
    ) -> AgentStepResult[OutputT]: ...
    @overload
    async def handoff(
        self,
        step_id: str,
        *,
        from_agent: str | AgentDefinition[Any],
        to_agent: str,
        reason: str,
        task: Any,
    ) -> AgentStepResult[Any]: ...
    async def handoff(
        self,
        step_id: str,
        *,
        from_agent: str | AgentDefinition[Any],
        to_agent: str | AgentDefinition[Any],
        reason: str,
        task: Any,
    ) -> AgentStepResult[Any]:
        """Hand ``task`` over from ``from_agent`` to ``to_agent`` (both the supervisor or
        a member): a delegation to ``to_agent`` announced by one ``team.handoff`` event,
        committed with the delegation's start and never repeated by a replay."""
        ...


TeamFunction = Callable[[TeamStep, Any], Awaitable[Any]]
