"""fevex: a small, durable runtime for LLM agents, extended by plugins."""

from typing import TYPE_CHECKING

from fevex.__about__ import __version__
from fevex._ground.lazy_exports import lazy_exports
from fevex.agents import AgentDefinition, Limits, define_agent
from fevex.app import Fevex, RunResult, create_fevex
from fevex.errors import (
    FevexConfigurationError,
    FevexError,
    FevexRunError,
    RunCancelledError,
    RunPausedError,
)
from fevex.events import RunEvent
from fevex.messages import Message
from fevex.models import ModelGateway
from fevex.runtime import (
    AgentRun,
    ApprovalDecision,
    InMemoryRunStore,
    InputAnswer,
    PendingApproval,
    PendingInput,
    Session,
)
from fevex.schemas import Schema
from fevex.tools import ToolContext, ToolDefinition, ToolRetry, define_connection, define_tool

if TYPE_CHECKING:
    # Imported when first read (fevex._ground.lazy_exports): an agent app never loads
    # workflows or teams. Type checkers and IDEs see these plain imports.
    from fevex.teams import (
        TeamDefinition,
        TeamLimits,
        TeamMember,
        TeamRelayedEvent,
        TeamStep,
        define_team,
    )
    from fevex.workflows import (
        AgentStepResult,
        EventDelivery,
        WorkflowDefinition,
        WorkflowStep,
        define_workflow,
    )
else:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "fevex.teams": (
                "TeamDefinition",
                "TeamLimits",
                "TeamMember",
                "TeamRelayedEvent",
                "TeamStep",
                "define_team",
            ),
            "fevex.workflows": (
                "AgentStepResult",
                "EventDelivery",
                "WorkflowDefinition",
                "WorkflowStep",
                "define_workflow",
            ),
        },
    )

__all__ = [
    "AgentDefinition",
    "AgentStepResult",
    "AgentRun",
    "ApprovalDecision",
    "Fevex",
    "FevexConfigurationError",
    "FevexError",
    "FevexRunError",
    "InMemoryRunStore",
    "InputAnswer",
    "Limits",
    "EventDelivery",
    "Message",
    "ModelGateway",
    "PendingApproval",
    "PendingInput",
    "RunCancelledError",
    "RunEvent",
    "RunPausedError",
    "RunResult",
    "Schema",
    "Session",
    "TeamDefinition",
    "TeamLimits",
    "TeamMember",
    "TeamRelayedEvent",
    "TeamStep",
    "ToolContext",
    "ToolDefinition",
    "ToolRetry",
    "WorkflowDefinition",
    "WorkflowStep",
    "__version__",
    "create_fevex",
    "define_agent",
    "define_connection",
    "define_team",
    "define_tool",
    "define_workflow",
]
