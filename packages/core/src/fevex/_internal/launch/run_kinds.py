"""The run kinds every app registers with its kernel when it is created."""

from __future__ import annotations

from fevex._internal.agents.agent_kind import AgentKind
from fevex._internal.composition.connections import ConnectionResolver
from fevex._internal.composition.registry import Composition
from fevex._internal.engine.kernel import KindFactory
from fevex._internal.workflows import team_kind, workflow_kind
from fevex._internal.workflows.team_kind import TeamKind
from fevex._internal.workflows.workflow_kind import WorkflowKind

__all__ = ["app_run_kinds"]

# The kind names runs record (AgentRun.kind), by which the launcher starts them.
AGENT = "agent"
WORKFLOW = workflow_kind.KIND
TEAM = team_kind.KIND


def app_run_kinds(composition: Composition) -> dict[str, KindFactory]:
    """The agent, workflow and team kinds of ``composition``; workflows and teams run
    their agent steps with the app's one agent kind."""
    agents = AgentKind(composition, ConnectionResolver(composition.connections))
    return {
        AGENT: lambda kernel: agents,
        WORKFLOW: lambda kernel: WorkflowKind(composition, kernel, agents),
        TEAM: lambda kernel: TeamKind(composition, kernel, agents),
    }
