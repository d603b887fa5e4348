"""What callers hand the app to start or continue a run, and the checks of it that hold
for every kind: a chosen run id, a context, the definition that types a result."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from fevex.agents import AgentDefinition
from fevex.errors import FevexRunError
from fevex.messages import ContentPart, Message
from fevex.runtime.context import ExecutionContext
from fevex.runtime.records import AgentRun

if TYPE_CHECKING:
    # Named in the aliases below only: an agent app never loads workflows or teams.
    from fevex.teams import TeamDefinition
    from fevex.workflows import WorkflowDefinition

__all__ = [
    "AgentInput",
    "AgentReference",
    "RunContext",
    "TeamReference",
    "TypedDefinition",
    "WorkflowReference",
    "check_run_definition",
    "check_run_id",
]

OutputT = TypeVar("OutputT")
# What context= takes: who the run is for (see ExecutionContext), stored with the run.
RunContext = ExecutionContext | Mapping[str, Any] | None
# Text, a user message or content parts; a value of the agent's input_schema when it has one.
AgentInput = str | Message | Sequence[ContentPart] | Mapping[str, Any]
# An agent of the app: its name, or its definition (which types the run's output).
AgentReference = str | AgentDefinition[Any]
# A workflow of the app: its name (the version registered last), or its definition.
WorkflowReference: TypeAlias = "str | WorkflowDefinition[Any, Any]"
# A team of the app: its name (the version registered last), or its definition.
TeamReference: TypeAlias = "str | TeamDefinition[Any, Any]"
# A definition whose runs' output type is known: what types a result read back by run id.
TypedDefinition: TypeAlias = (
    "AgentDefinition[OutputT] | WorkflowDefinition[Any, OutputT] | TeamDefinition[Any, OutputT]"
)
# A run id a caller chooses: what every store keeps as a key and every URL path carries.
_RUN_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


def check_run_id(run_id: object) -> None:
    if not isinstance(run_id, str) or _RUN_ID.fullmatch(run_id) is None:
        raise FevexRunError(
            "INVALID_ARGUMENT",
            "run_id must be 1 to 128 letters, digits or the characters _ . : -",
        )


def check_run_definition(run: AgentRun, definition: TypedDefinition[Any]) -> None:
    """Refuse ``definition`` as the type of ``run``'s result unless the run is of it."""
    if isinstance(definition, AgentDefinition):
        kind = "agent"
    else:
        # Loaded already: the caller holds a workflow's or a team's definition.
        from fevex.workflows import WorkflowDefinition

        kind = "workflow" if isinstance(definition, WorkflowDefinition) else "team"
    if (run.kind, run.name) != (kind, definition.name):
        raise FevexRunError(
            "RUN_DEFINITION_MISMATCH",
            f"Run {run.id} is a run of {run.kind} {run.name!r}, not of {kind} "
            f"{definition.name!r}; pass its own definition (or none).",
            run_id=run.id,
        )
