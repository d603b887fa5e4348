"""What a tool function can learn about the call it serves, and what it can report
while it runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

__all__ = ["ToolContext"]

TraceAttribute = str | int | float | bool


class _CallReports(Protocol):
    """Where a running call's reports go (the agent loop's; none outside a run)."""

    def progress(self, progress: float, total: float | None, message: str | None) -> None: ...

    def trace_event(self, name: str, attributes: Mapping[str, TraceAttribute]) -> None: ...


@dataclass(slots=True)
class _Cancellation:
    cancelled: bool = False


class ToolContext:
    """Passed to tools that declare a ``context: ToolContext`` parameter.

    ``idempotency_key`` is set for ``idempotency="keyed"`` tools and stays the same when a
    call is retried or recovered: pass it to the external system so it applies the effect
    once. ``cancelled`` turns true when the run is cancelled or times out; long-running
    tools, especially synchronous ones in a worker thread, should check it and stop.

    :meth:`report_progress` and :meth:`add_trace_event` report what the call is doing
    while it runs; both return at once, from async tools and from synchronous ones in a
    worker thread alike, and do nothing for a context made outside a run.
    """

    __slots__ = (
        "_cancellation",
        "_credentials",
        "_reports",
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
        self._reports: _CallReports | None = None

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

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report how far the call is: ``progress`` of ``total`` (when known), with a
        short ``message``. The run records it as a ``tool.progress`` event, coalesced: at
        most a few events a second per call (the latest report wins) and a bounded number
        per call; the message is cut to a few hundred characters and cleaned of control
        characters. Never waits; reports after the call ended are ignored."""
        if self._reports is not None:
            self._reports.progress(progress, total, message)

    def add_trace_event(
        self, name: str, attributes: Mapping[str, TraceAttribute] | None = None
    ) -> None:
        """Add an event named ``name`` to the call's span in the app's traces (nothing
        without a tracer): ``attributes`` are scalars, strings bounded in length. A call
        adds a bounded number of them; the rest are dropped. Never waits."""
        if self._reports is not None:
            self._reports.trace_event(name, dict(attributes or {}))

    def __repr__(self) -> str:
        return (
            f"ToolContext(run_id={self.run_id!r}, tool_call_id={self.tool_call_id!r}, "
            f"tool_name={self.tool_name!r}, attempt={self.attempt})"
        )
