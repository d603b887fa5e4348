"""The steps a team function awaits (:class:`~fevex.teams.TeamStep`): each delegation an
agent step of the workflow steps it wraps, seeing its run only as their
:class:`~fevex._internal.workflows.step_host.StepHost`.

A delegation names a member, runs the registered agent as is (nothing in a delegation can
change its model, tools, policies or limits), counts against ``max_delegations`` and waits
for one of ``max_parallel`` turns, both limits checkpointed with the run's others. Its
events name the agent it runs; a handoff is announced by a ``team.handoff`` event of its
own, committed with the delegation's start.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from fevex._internal.workflows.step_host import Announcement, StepHost
from fevex._internal.workflows.workflow_steps import WorkflowSteps
from fevex.agents import AgentDefinition
from fevex.errors import FevexRunError
from fevex.teams.definition import TeamDefinition
from fevex.workflows.step import AgentStepResult

__all__ = ["TeamSteps"]

HANDOFF = "team.handoff"


class TeamSteps:
    """The :class:`~fevex.teams.TeamStep` a team function receives, for one pass of it."""

    __slots__ = ("_definition", "_host", "_steps", "_turns")

    def __init__(self, steps: WorkflowSteps, definition: TeamDefinition[Any, Any]) -> None:
        self._steps = steps
        self._host = steps.host
        self._definition = definition
        limit = self._host.limits.get("max_parallel")
        self._turns = None if limit is None else asyncio.Semaphore(limit)

    @property
    def host(self) -> StepHost:
        """The run these steps belong to (a kit's steps use it: fevex.kits.children)."""
        return self._host

    async def delegate(
        self,
        step_id: str,
        *,
        agent: str | AgentDefinition[Any],
        task: Any,
        expected_output: str | None = None,
    ) -> AgentStepResult[Any]:
        name = self._member(step_id, agent)
        if expected_output is not None:
            if not isinstance(expected_output, str) or not isinstance(task, str):
                raise FevexRunError(
                    "WORKFLOW_STEP_INVALID",
                    f"Step {step_id!r}: expected_output is a text that a text task ends with.",
                    details={"step_id": step_id},
                )
            task = f"{task}\n\nExpected output: {expected_output}"
        return await self._delegation(step_id, name, task, Announcement({"agent": name}))

    async def handoff(
        self,
        step_id: str,
        *,
        from_agent: str | AgentDefinition[Any],
        to_agent: str | AgentDefinition[Any],
        reason: str,
        task: Any,
    ) -> AgentStepResult[Any]:
        source = self._member(step_id, from_agent)
        target = self._member(step_id, to_agent)
        if not isinstance(reason, str):
            raise FevexRunError(
                "WORKFLOW_STEP_INVALID",
                f"Step {step_id!r}: the reason of a handoff is a text.",
                details={"step_id": step_id},
            )
        announcement = {
            "step_id": step_id,
            "from_agent": source,
            "to_agent": target,
            "reason": reason,
        }
        announce = Announcement({"agent": target}, preface=(HANDOFF, announcement))
        return await self._delegation(step_id, target, task, announce)

    async def parallel(
        self, step_id: str, branches: Mapping[str, Callable[[], Awaitable[Any]]]
    ) -> dict[str, Any]:
        announce = Announcement()
        if isinstance(branches, Mapping):
            announce = Announcement(on_start={"branches": [str(name) for name in branches]})
        return await self._steps.parallel_step(step_id, branches, announce)

    def _member(self, step_id: str, agent: str | AgentDefinition[Any]) -> str:
        """The name of ``agent``, refused unless it is the supervisor or a member as
        the app registered it."""
        definition = self._definition
        name = agent.name if isinstance(agent, AgentDefinition) else agent
        if not isinstance(name, str) or name not in definition.agents:
            raise FevexRunError(
                "TEAM_MEMBER_UNKNOWN",
                f"Team {definition.name} delegates to {name!r}, which is neither its "
                f"supervisor nor a member ({', '.join(sorted(definition.agents))}).",
                details={"team": definition.name, "agent": str(name), "step_id": step_id},
            )
        if isinstance(agent, AgentDefinition) and agent != self._host.agent(name):
            # A changed copy of a member would widen it; delegations run the registered one.
            raise FevexRunError(
                "TEAM_MEMBER_UNKNOWN",
                f"Team {definition.name}: the agent definition {name!r} is not the one the "
                "app registered; delegate by name to run the registered agent.",
                details={"team": definition.name, "agent": name, "step_id": step_id},
            )
        return name

    async def _delegation(
        self, step_id: str, agent: str, task: Any, announce: Announcement
    ) -> AgentStepResult[Any]:
        async with self._turn(step_id):
            # Counted once the turn is taken: the agent step journals the delegation
            # before it next yields, so delegations waiting for turns are never all
            # counted against the same journal.
            if isinstance(step_id, str) and step_id not in self._host.entries:
                _count_delegation(self._host, step_id)
            return await self._steps.agent_step(step_id, agent, task, None, announce)

    @contextlib.asynccontextmanager
    async def _turn(self, step_id: str) -> AsyncIterator[None]:
        """One of the ``max_parallel`` turns, held while the delegation ``step_id`` may
        run its child here; a delegation the journal holds as ended runs nothing and
        takes none."""
        entry = self._host.entries.get(step_id)
        if self._turns is None or (entry is not None and entry.status != "started"):
            yield
            return
        async with self._turns:
            yield


def _count_delegation(host: StepHost, step_id: str) -> None:
    """Refuse a new delegation past ``max_delegations``: the journal (every delegation
    started so far) and the limit are both in the checkpoint, so a replay or a recovery
    counts exactly as the first pass did."""
    limit = host.limits.get("max_delegations")
    used = sum(1 for entry in host.entries.values() if entry.kind == "agent")
    if limit is not None and used >= limit:
        raise FevexRunError(
            "MAX_DELEGATIONS_EXCEEDED",
            f"The team needed more than {limit} delegations (step {step_id!r}).",
            details={"limit": limit, "step_id": step_id},
        )
