"""The tools an agent given ``sandbox=`` gets: run a command, read a file, write a file.

They are ordinary tools: policies see each call, and ``approval="required"`` pauses the
run before each until a person decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fevex.sandbox.sandbox import Sandbox
from fevex.tools.definition import Approval, ToolDefinition, define_tool

__all__ = ["SANDBOX_TOOL_NAMES", "sandbox_tools"]

SANDBOX_TOOL_NAMES = ("sandbox_run_command", "sandbox_read_file", "sandbox_write_file")


@dataclass(frozen=True, slots=True)
class CommandInput:
    command: str


@dataclass(frozen=True, slots=True)
class ReadInput:
    path: str


@dataclass(frozen=True, slots=True)
class WriteInput:
    path: str
    content: str


def sandbox_tools(
    sandbox: Sandbox, *, approval: Approval = "never"
) -> tuple[ToolDefinition[Any, Any], ...]:
    """The sandbox's three tools, each with ``approval``."""

    async def sandbox_run_command(request: CommandInput) -> dict[str, Any]:
        """Run a shell command in the sandbox's workspace and return its exit code and
        output. The command has no network and is killed at the sandbox's timeout."""
        return (await sandbox.run_command(request.command)).to_json()

    async def sandbox_read_file(request: ReadInput) -> str:
        """Read a text file of the sandbox's workspace (a path relative to it)."""
        return await sandbox.read_file(request.path)

    async def sandbox_write_file(request: WriteInput) -> str:
        """Write a text file in the sandbox's workspace (a path relative to it)."""
        await sandbox.write_file(request.path, request.content)
        return "written"

    return (
        define_tool(output_schema=dict, approval=approval, risk="high")(sandbox_run_command),
        define_tool(approval=approval, risk="medium")(sandbox_read_file),
        define_tool(approval=approval, risk="high")(sandbox_write_file),
    )
