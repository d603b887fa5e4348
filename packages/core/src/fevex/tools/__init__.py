from fevex.tools.context import ToolContext
from fevex.tools.definition import (
    Approval,
    Idempotency,
    RetryPolicy,
    Risk,
    ToolDefinition,
    define_tool,
)

__all__ = [
    "Approval",
    "Idempotency",
    "RetryPolicy",
    "Risk",
    "ToolContext",
    "ToolDefinition",
    "define_tool",
]
