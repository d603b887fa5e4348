from fevex.events.run_event import EVENT_TYPES, RunEvent, RunEventType
from fevex.events.views import (
    Cost,
    CostCalculator,
    RunState,
    RunView,
    StateTransition,
    StreamItem,
    TextDelta,
    ToolCallRequested,
    ToolResultReceived,
    Turn,
    TurnStatus,
    project_run,
)

__all__ = [
    "EVENT_TYPES",
    "Cost",
    "CostCalculator",
    "RunEvent",
    "RunEventType",
    "RunState",
    "RunView",
    "StateTransition",
    "StreamItem",
    "TextDelta",
    "ToolCallRequested",
    "ToolResultReceived",
    "Turn",
    "TurnStatus",
    "project_run",
]
