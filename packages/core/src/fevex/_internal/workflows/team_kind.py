"""Team runs as the kernel sees them: a workflow run of kind ``"team"`` whose function
only delegates.

A team is replayed exactly as a workflow is, by the workflow driver: each delegation is
that driver's agent step (its child id journalled before the child exists, so a recovery
continues the same child; a paused child pauses the team; the child's end makes the team
due), ``team.parallel`` its parallel step. What a team adds is checked here: a delegation
names a member, runs the registered agent as is (nothing in a delegation can change its
model, tools, policies or limits), counts against ``max_delegations`` and waits for one
of ``max_parallel`` turns, both limits checkpointed with the run's others. Its step
events are named ``team.*``, and its children's events reach its stream marked with
their delegation.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from fevex._internal.agents.agent_kind import AgentKind
from fevex._internal.composition.registry import Composition, PreparedTeam, PreparedWorkflow
from fevex._internal.engine.kernel import Kernel
from fevex._internal.workflows.workflow_driver import WorkflowDriver
from fevex._internal.workflows.workflow_kind import WorkflowKind
from fevex._internal.workflows.workflow_state import WorkflowState
from fevex._internal.workflows.workflow_steps import WorkflowSteps
from fevex.agents import AgentDefinition
from fevex.errors import FevexRunError
from fevex.events import RunEvent
from fevex.runtime.records import AgentRun, Session
from fevex.teams.definition import TeamDefinition, TeamLimits
from fevex.teams.relayed_event import TeamRelayedEvent
from fevex.workflows.definition import WorkflowDefinition
from fevex.workflows.step import AgentStepResult, WorkflowStep

__all__ = ["TeamKind"]

KIND = "team"

# The workflow driver's step events, as a team's run names them by the step's kind.
STEP_ENDINGS = {
    "workflow.step.started": "started",
    "workflow.step.completed": "completed",
    "workflow.step.failed": "failed",
}
STEP_KINDS = {"agent": "team.delegation", "parallel": "team.parallel"}


class TeamKind(WorkflowKind):
    """The :class:`~fevex._internal.engine.kernel.RunKind` of team runs."""

    def __init__(self, composition: Composition, kernel: Kernel, agents: AgentKind) -> None:
        super().__init__(composition, kernel, agents)
        self.teams: dict[tuple[str, str], tuple[PreparedTeam, PreparedWorkflow]] = {
            key: (prepared, _as_workflow(prepared)) for key, prepared in composition.teams.items()
        }

    @property
    def names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.teams)

    def team(self, name: str, version: str | None) -> tuple[PreparedTeam, PreparedWorkflow]:
        """The team ``name`` at ``version`` (``None``: the one registered last)."""
        versions = [key for key in self.teams if key[0] == name]
        if not versions:
            raise FevexRunError(
                "TEAM_NOT_FOUND",
                f"There is no team named {name!r}; pass it in create_fevex(teams=[...]).",
                details={"team": name},
            )
        found = self.teams.get(versions[-1] if version is None else (name, version))
        if found is None:
            raise FevexRunError(
                "TEAM_VERSION_MISMATCH",
                f"This app has team {name!r} in version(s) "
                f"{', '.join(v for _, v in versions)}, not {version!r}; a run is only "
                "continued by the version that started it.",
                details={"team": name, "version": version},
            )
        return found

    def workflow(self, name: str, version: str | None) -> PreparedWorkflow:
        return self.team(name, version)[1]

    def begin(
        self, reference: Any, input: Any, context: dict[str, Any] | None, limits: Any
    ) -> tuple[AgentRun, TeamDriver]:
        """A new run of the team ``reference`` names (``INVALID_INPUT`` before anything is
        stored) and its driver; the effective limits, the definition's narrowed by
        ``limits``, are checkpointed."""
        if isinstance(reference, TeamDefinition):
            team, prepared = self.team(reference.name, reference.version)
            if team.definition is not reference and team.definition != reference:
                raise FevexRunError(
                    "TEAM_NOT_FOUND",
                    f"The team definition {reference.name!r} is not one this app was created "
                    "with; pass it in create_fevex(teams=[...]).",
                )
        elif isinstance(reference, str):
            team, prepared = self.team(reference, None)
        else:
            raise FevexRunError(
                "TEAM_NOT_FOUND", f"{reference!r} is not a team name or definition."
            )
        definition = team.definition
        if limits is not None and not isinstance(limits, TeamLimits):
            raise FevexRunError("INVALID_ARGUMENT", "limits must be a TeamLimits value or None.")
        if limits is not None:
            try:
                limits.check(definition.name)
            except Exception as error:
                raise FevexRunError("INVALID_ARGUMENT", str(error)) from None
        effective = definition.limits.narrowed(limits)
        run, driver = self.new_run(prepared, input, context, None)
        state = dataclasses.replace(
            driver.state, limits={**driver.state.limits, **_team_limits(effective)}
        )
        return dataclasses.replace(run, kind=KIND), TeamDriver(self, prepared, state)

    def driver(self, run: AgentRun, checkpoint: Any, session: Session | None) -> TeamDriver:
        prepared = self.workflow(run.name, run.version or "")
        return TeamDriver(self, prepared, WorkflowState.from_checkpoint(run.id, checkpoint))


class TeamDriver(WorkflowDriver):
    """The workflow driver of a team run: its step events are ``team.*`` and say which
    agent each delegation runs; its delegations take turns under ``max_parallel``."""

    def __init__(self, kind: TeamKind, prepared: PreparedWorkflow, state: WorkflowState):
        super().__init__(kind, prepared, state)
        # What this pass of the function asked, by step id: the agent each delegation
        # runs, the announcement of each handoff, the branch names of each parallel step.
        self.delegated: dict[str, str] = {}
        self.handoffs: dict[str, dict[str, Any]] = {}
        self.branches: dict[str, list[str]] = {}
        limit = state.limits.get("max_parallel")
        self._turns = None if limit is None else asyncio.Semaphore(limit)

    def new_pass(self) -> None:
        self.delegated.clear()
        self.handoffs.clear()
        self.branches.clear()

    @contextlib.asynccontextmanager
    async def turn(self, step_id: str) -> AsyncIterator[None]:
        """One of the ``max_parallel`` turns, held while the delegation ``step_id`` may
        run its child here; a delegation the journal holds as ended runs nothing and
        takes none."""
        entry = self.state.journal.entries.get(step_id)
        if self._turns is None or (entry is not None and entry.status != "started"):
            yield
            return
        async with self._turns:
            yield

    async def emit(self, type: str, payload: dict[str, Any], *, durable: bool = True) -> None:
        if type == "workflow.waiting":
            type = "team.waiting"
        elif type in STEP_ENDINGS:
            step_id = payload.get("step_id")
            kind = payload.get("kind")
            payload = {key: value for key, value in payload.items() if key != "kind"}
            ending = STEP_ENDINGS[type]
            type = f"{STEP_KINDS.get(str(kind), 'team.delegation')}.{ending}"
            if kind == "parallel":
                if ending == "started" and step_id in self.branches:
                    payload["branches"] = self.branches[step_id]
            elif step_id in self.delegated:
                payload["agent"] = self.delegated[step_id]
                handoff = self.handoffs.get(step_id)
                if handoff is not None and ending == "started":
                    # Committed with the journal's ``started`` entry (the checkpoint of
                    # this commit holds it), so no replay announces the handoff again.
                    await super().emit("team.handoff", handoff, durable=True)
        await super().emit(type, payload, durable=durable)

    def relay(self, step_id: str, event: RunEvent) -> RunEvent:
        return TeamRelayedEvent.of(event, step_id, self.delegated[step_id])


class TeamSteps:
    """The :class:`~fevex.teams.TeamStep` a team function receives."""

    __slots__ = ("_definition", "_driver", "_steps")

    def __init__(
        self, steps: WorkflowStep, driver: TeamDriver, definition: TeamDefinition[Any, Any]
    ):
        self._steps = steps
        self._driver = driver
        self._definition = definition

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
        return await self._delegation(step_id, name, task)

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
        if isinstance(step_id, str):
            self._driver.handoffs.setdefault(step_id, announcement)
        return await self._delegation(step_id, target, task)

    async def parallel(
        self, step_id: str, branches: Mapping[str, Callable[[], Awaitable[Any]]]
    ) -> dict[str, Any]:
        if isinstance(step_id, str) and isinstance(branches, Mapping):
            self._driver.branches.setdefault(step_id, [str(name) for name in branches])
        return await self._steps.parallel(step_id, branches)

    def _member(self, step_id: str, agent: str | AgentDefinition[Any]) -> str:
        """The name of ``agent``, refused unless it is the supervisor or a member as
        the app registered it."""
        driver, definition = self._driver, self._definition
        name = agent.name if isinstance(agent, AgentDefinition) else agent
        if not isinstance(name, str) or name not in definition.agents:
            raise FevexRunError(
                "TEAM_MEMBER_UNKNOWN",
                f"Team {definition.name} delegates to {name!r}, which is neither its "
                f"supervisor nor a member ({', '.join(sorted(definition.agents))}).",
                details={"team": definition.name, "agent": str(name), "step_id": step_id},
            )
        registered = driver.kind.composition.agents[name].definition
        if isinstance(agent, AgentDefinition) and agent != registered:
            # A changed copy of a member would widen it; delegations run the registered one.
            raise FevexRunError(
                "TEAM_MEMBER_UNKNOWN",
                f"Team {definition.name}: the agent definition {name!r} is not the one the "
                "app registered; delegate by name to run the registered agent.",
                details={"team": definition.name, "agent": name, "step_id": step_id},
            )
        return name

    async def _delegation(self, step_id: str, agent: str, task: Any) -> AgentStepResult[Any]:
        driver = self._driver
        if isinstance(step_id, str):
            # A second use of the id in this pass fails as STEP_MISMATCH; the first keeps
            # its name on its events.
            driver.delegated.setdefault(step_id, agent)
        async with driver.turn(step_id):
            # Counted once the turn is taken: the agent step journals the delegation
            # before it next yields, so delegations waiting for turns are never all
            # counted against the same journal.
            if isinstance(step_id, str) and step_id not in driver.state.journal.entries:
                _count_delegation(driver, step_id)
            return await self._steps.agent(step_id, agent, input=task)


def _count_delegation(driver: TeamDriver, step_id: str) -> None:
    """Refuse a new delegation past ``max_delegations``: the journal (every delegation
    started so far) and the limit are both in the checkpoint, so a replay or a recovery
    counts exactly as the first pass did."""
    limit = driver.state.limits.get("max_delegations")
    used = sum(1 for entry in driver.state.journal.entries.values() if entry.kind == "agent")
    if limit is not None and used >= limit:
        raise FevexRunError(
            "MAX_DELEGATIONS_EXCEEDED",
            f"The team needed more than {limit} delegations (step {step_id!r}).",
            details={"limit": limit, "step_id": step_id},
        )


def _team_limits(limits: TeamLimits) -> dict[str, int | None]:
    return {"max_delegations": limits.max_delegations, "max_parallel": limits.max_parallel}


def _as_workflow(prepared: PreparedTeam) -> PreparedWorkflow:
    """The team as the workflow driver replays it: its function handed a TeamStep."""
    team = prepared.definition

    async def run(steps: WorkflowStep, input: Any) -> Any:
        assert isinstance(steps, WorkflowSteps)
        driver = steps.driver
        assert isinstance(driver, TeamDriver)
        driver.new_pass()
        return await team.run(TeamSteps(steps, driver, team), input)

    # Unlimited steps and tokens: a team is bounded by its delegations, each child by
    # its own agent's limits.
    definition: WorkflowDefinition[Any, Any] = WorkflowDefinition(
        name=team.name, version=team.version, run=run
    )
    return PreparedWorkflow(definition, prepared.input_schema, prepared.output_schema, {})
