from fevex.tools.connection import (
    ConnectionContext,
    ConnectionDefinition,
    RemoteTool,
    ToolOverride,
    ToolProvider,
    define_connection,
)
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
    "ConnectionContext",
    "ConnectionDefinition",
    "Idempotency",
    "RemoteTool",
    "RetryPolicy",
    "Risk",
    "ToolContext",
    "ToolDefinition",
    "ToolOverride",
    "ToolProvider",
    "define_connection",
    "define_tool",
]
