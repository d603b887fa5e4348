from fevex.tools.completion import Completion
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
    ErrorsToModel,
    Idempotency,
    RetryPolicy,
    Risk,
    ToolDefinition,
    define_tool,
)
from fevex.tools.output import ToolOutput
from fevex.tools.redaction import REDACTED, redact_secrets, secret_spellings
from fevex.tools.retry import ToolRetry

__all__ = [
    "REDACTED",
    "Approval",
    "Completion",
    "ConnectionContext",
    "ConnectionDefinition",
    "ErrorsToModel",
    "Idempotency",
    "RemoteTool",
    "RetryPolicy",
    "Risk",
    "ToolContext",
    "ToolDefinition",
    "ToolOutput",
    "ToolOverride",
    "ToolProvider",
    "ToolRetry",
    "define_connection",
    "define_tool",
    "redact_secrets",
    "secret_spellings",
]
