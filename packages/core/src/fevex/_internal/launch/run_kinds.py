"""The run kinds every app registers with its kernel when it is created.

The workflow and team kinds' modules are imported by their factories, which the kernel calls
the first time it looks the kind up (:mod:`fevex._internal.engine.kind_table`): an app whose
runs are all agent runs never loads the workflow and team machinery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fevex._internal.agents.agent_kind import AgentKind
from fevex._internal.composition.connections import ConnectionResolver
from fevex._internal.composition.registry import Composition
from fevex._internal.engine.kernel import Kernel, KindFactory

if TYPE_CHECKING:
    from fevex._internal.engine.run_kind import RunKind

__all__ = ["app_run_kinds"]

# The kind names runs record (AgentRun.kind), by which the launcher starts them; the
# workflow and team kinds' modules hold the same names (workflow_kind.KIND, team_kind.KIND).
AGENT = "agent"
WORKFLOW = "workflow"
TEAM = "team"


def app_run_kinds(composition: Composition) -> dict[str, KindFactory]:
    """The agent, workflow and team kinds of ``composition``; workflows and teams run
    their agent steps with the app's one agent kind."""
    agents = AgentKind(composition, ConnectionResolver(composition.connections))

    def workflows(kernel: Kernel) -> RunKind:
        from fevex._internal.workflows.workflow_kind import WorkflowKind

        return WorkflowKind(composition, kernel, agents)

    def teams(kernel: Kernel) -> RunKind:
        from fevex._internal.workflows.team_kind import TeamKind

        return TeamKind(composition, kernel, agents)

    return {AGENT: lambda kernel: agents, WORKFLOW: workflows, TEAM: teams}
