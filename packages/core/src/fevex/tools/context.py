"""What a tool function can learn about the call it serves."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ToolContext"]


@dataclass(slots=True)
class _Cancellation:
    cancelled: bool = False


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Passed to tools that declare a ``context: ToolContext`` parameter.

    ``cancelled`` turns true when the run is cancelled or times out; long-running tools,
    especially synchronous ones running in a worker thread, should check it and stop.
    """

    run_id: str
    session_id: str
    agent_name: str
    tool_call_id: str
    tool_name: str
    idempotency_key: str | None = None
    _cancellation: _Cancellation = field(default_factory=_Cancellation, repr=False)

    @property
    def cancelled(self) -> bool:
        return self._cancellation.cancelled
