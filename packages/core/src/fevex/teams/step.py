"""What a team function receives: its delegations, each a durable, journalled step."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from fevex.agents import AgentDefinition
from fevex.workflows.step import AgentStepResult

__all__ = ["TeamStep"]


class TeamStep(Protocol):
    """The steps of one team run. As in a workflow, each ``step_id`` is a durable
    identity: on a resume or a recovery the function runs again from the start, and a
    delegation the journal holds as ended returns its stored result without running."""

    async def delegate(
        self,
        step_id: str,
        *,
        agent: str | AgentDefinition[Any],
        task: Any,
        expected_output: str | None = None,
    ) -> AgentStepResult:
        """Run the member ``agent`` (the registered agent as is: its model, tools,
        policies and limits) on ``task`` as a child run of the team, and return its end.
        ``expected_output`` describes the result wanted; it is appended to a text task.
        A child that pauses (an approval) pauses the team until it ends."""
        ...


TeamFunction = Callable[[TeamStep, Any], Awaitable[Any]]
