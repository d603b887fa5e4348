from fevex.sandbox.local_sandbox import LocalSandbox, network_isolation
from fevex.sandbox.sandbox import CommandResult, Sandbox
from fevex.sandbox.tools import SANDBOX_TOOL_NAMES, sandbox_tools

__all__ = [
    "SANDBOX_TOOL_NAMES",
    "CommandResult",
    "LocalSandbox",
    "Sandbox",
    "network_isolation",
    "sandbox_tools",
]
