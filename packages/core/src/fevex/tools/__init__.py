from fevex.tools.context import ToolContext
from fevex.tools.definition import ToolDefinition, define_tool

__all__ = ["ToolContext", "ToolDefinition", "define_tool"]
