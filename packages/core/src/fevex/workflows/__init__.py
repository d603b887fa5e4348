from fevex.workflows.definition import WorkflowDefinition, define_workflow
from fevex.workflows.step import AgentStepResult, EventDelivery, WorkflowStep

__all__ = [
    "AgentStepResult",
    "EventDelivery",
    "WorkflowDefinition",
    "WorkflowStep",
    "define_workflow",
]
