from fevex.models.gateway import (
    Completed,
    ModelGateway,
    ModelInput,
    ModelResult,
    ModelStreamEvent,
    OutputDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from fevex.models.stream_reader import ModelStreamReader

__all__ = [
    "Completed",
    "ModelGateway",
    "ModelInput",
    "ModelResult",
    "ModelStreamEvent",
    "ModelStreamReader",
    "OutputDelta",
    "ToolCall",
    "ToolSpec",
    "Usage",
]
