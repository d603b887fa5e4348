"""What a tool function can learn about the call it serves."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

__all__ = ["ToolContext"]


@dataclass(slots=True)
class _Cancellation:
    cancelled: bool = False


class ToolContext:
    """Passed to tools that declare a ``context: ToolContext`` parameter.

    ``idempotency_key`` is set for ``idempotency="keyed"`` tools and stays the same when a
    call is retried or recovered: pass it to the external system so it applies the effect
    once. ``cancelled`` turns true when the run is cancelled or times out; long-running
    tools, especially synchronous ones in a worker thread, should check it and stop.
    """

    __slots__ = (
        "_cancellation",
        "_credentials",
        "agent_name",
        "attempt",
        "idempotency_key",
        "run_id",
        "session_id",
        "tool_call_id",
        "tool_name",
    )

    def __init__(
        self,
        run_id: str,
        session_id: str,
        agent_name: str,
        tool_call_id: str,
        tool_name: str,
        idempotency_key: str | None = None,
        attempt: int = 1,
        cancellation: _Cancellation | None = None,
        credentials: Callable[[str], Awaitable[str]] | None = None,
    ) -> None:
        self.run_id = run_id
        self.session_id = session_id
        self.agent_name = agent_name
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        self.idempotency_key = idempotency_key
        self.attempt = attempt
        self._cancellation = cancellation or _Cancellation()
        self._credentials = credentials

    @property
    def cancelled(self) -> bool:
        return self._cancellation.cancelled

    async def get_credential(self, name: str) -> str:
        """Resolve a credential the tool declared. The value is never stored, sent to a
        model, put in events or logged; an output that contains it is rejected."""
        if self._credentials is None:
            from fevex.errors import FevexRunError

            raise FevexRunError(
                "CREDENTIAL_NOT_DECLARED",
                f"Tool {self.tool_name} declared no credentials.",
                category="tool",
            )
        return await self._credentials(name)

    def __repr__(self) -> str:
        return (
            f"ToolContext(run_id={self.run_id!r}, tool_call_id={self.tool_call_id!r}, "
            f"tool_name={self.tool_name!r}, attempt={self.attempt})"
        )
