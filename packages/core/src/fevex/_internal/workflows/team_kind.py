"""Team runs as the kernel sees them: a workflow run of kind ``"team"`` whose function
only delegates.

A team is replayed exactly as a workflow is, by the workflow driver: each delegation is
that driver's agent step (its child id journalled before the child exists, so a recovery
continues the same child; a paused child pauses the team; the child's end makes the team
due), ``team.parallel`` its parallel step. What a team adds is checked by its steps
(:mod:`~fevex._internal.workflows.team_steps`): a delegation names a member, runs the
registered agent as is, counts against ``max_delegations`` and waits for one of
``max_parallel`` turns, both limits checkpointed here with the run's others. Its step
events go by the team's names
(``team.*``), which its kind hands the driver, and its children's events reach its
stream marked with their delegation.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fevex._internal.agents.agent_kind import AgentKind
from fevex._internal.composition.registry import Composition, PreparedTeam, PreparedWorkflow
from fevex._internal.engine.kernel import Kernel
from fevex._internal.workflows.team_steps import TeamSteps
from fevex._internal.workflows.workflow_driver import WorkflowDriver
from fevex._internal.workflows.workflow_kind import WORKFLOW_EVENTS, WorkflowKind
from fevex._internal.workflows.workflow_steps import WorkflowSteps
from fevex.errors import FevexRunError
from fevex.runtime.records import AgentRun
from fevex.teams.definition import TEAM_LIMITS, TeamDefinition, TeamLimits
from fevex.teams.relayed_event import TeamRelayedEvent
from fevex.workflows.definition import WorkflowDefinition
from fevex.workflows.step import WorkflowStep

__all__ = ["TeamKind"]

KIND = "team"

# The names a team run's stream tells its steps by: each delegation's events (an agent
# step's) and each parallel step's by what they are, a child's events marked with its
# delegation. A team neither waits for events nor compensates: those keep their names.
TEAM_EVENTS = dataclasses.replace(
    WORKFLOW_EVENTS,
    waiting="team.waiting",
    step="team.delegation",
    prefixes={"parallel": "team.parallel"},
    names_kind=False,
    relay=TeamRelayedEvent.of,
)


class TeamKind(WorkflowKind):
    """The :class:`~fevex._internal.engine.run_kind.RunKind` of team runs."""

    step_events = TEAM_EVENTS

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
    ) -> tuple[AgentRun, WorkflowDriver]:
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
        return dataclasses.replace(run, kind=KIND), WorkflowDriver(self, prepared, state)


def _team_limits(limits: TeamLimits) -> dict[str, int | None]:
    return {name: getattr(limits, name) for name in TEAM_LIMITS}


def _as_workflow(prepared: PreparedTeam) -> PreparedWorkflow:
    """The team as the workflow driver replays it: its function handed a TeamStep."""
    team = prepared.definition

    async def run(steps: WorkflowStep, input: Any) -> Any:
        assert isinstance(steps, WorkflowSteps)
        return await team.run(TeamSteps(steps, team), input)

    # Unlimited steps and tokens: a team is bounded by its delegations, each child by
    # its own agent's limits.
    definition: WorkflowDefinition[Any, Any] = WorkflowDefinition(
        name=team.name, version=team.version, run=run
    )
    return PreparedWorkflow(definition, prepared.input_schema, prepared.output_schema, {})
