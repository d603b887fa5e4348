"""The sandbox contract: run commands and read and write files in one workspace, within
limits the sandbox enforces whatever a model asks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["CommandResult", "Sandbox"]


@dataclass(frozen=True, slots=True)
class CommandResult:
    """How a command ended: its exit code (``None`` when it was killed at the timeout), its
    output cut to the sandbox's bound, and whether either limit was reached."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "timed_out": self.timed_out,
            "truncated": self.truncated,
        }


@runtime_checkable
class Sandbox(Protocol):
    """Where an agent's commands run and its files live. Paths are relative to the
    workspace; one outside it is refused with ``SANDBOX_PATH_REFUSED``."""

    async def run_command(self, command: str | Sequence[str]) -> CommandResult:
        """Run ``command`` (a shell line, or the program and its arguments) in the
        workspace; a command past the timeout is killed with every process it started."""
        ...

    async def read_file(self, path: str) -> str: ...

    async def write_file(self, path: str, content: str) -> None: ...
