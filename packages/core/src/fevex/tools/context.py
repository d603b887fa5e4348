"""What a tool function can learn about the call it serves, and what it can report
while it runs."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from fevex.errors import InputAnswer, PendingInput
    from fevex.messages import Message
    from fevex.tools.completion import Completion, CompletionRequest

__all__ = ["ToolContext"]

AskInput = Callable[["PendingInput", float], Awaitable["InputAnswer"]]
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

    :meth:`complete` asks one of the app's models for an answer on the run's behalf.
    """

    __slots__ = (
        "_ask_input",
        "_call_limit",
        "_cancellation",
        "_complete",
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
        complete: Callable[[CompletionRequest], Awaitable[Completion]] | None = None,
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
        # Set by the runner of an agent's tool call: how it asks a person for input.
        self._ask_input: AskInput | None = None
        # A connection call's timeout, which a person's time does not count against.
        self._call_limit: asyncio.Timeout | None = None
        self._reports: _CallReports | None = None
        self._complete = complete

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

    async def request_input(
        self,
        message: str,
        *,
        schema: Mapping[str, Any],
        timeout: float,
        kind: str = "input",
        connection: str | None = None,
    ) -> InputAnswer:
        """Ask a person for the values ``schema`` describes, and wait for the answer: the
        run lists the request on ``AgentRun.inputs`` (a
        :class:`~fevex.runtime.PendingInput`) while it stays ``running``, and whoever
        answers it with ``resume_run`` (from any process sharing the store) ends the wait.
        ``INPUT_TIMEOUT`` after ``timeout`` seconds without an answer; the wait does not
        count against a connection's timeout. ``message`` and ``schema`` are stored on the
        run and shown to the person: nothing secret may be in them."""
        from fevex.errors import FevexRunError, PendingInput

        if self._ask_input is None:
            raise FevexRunError(
                "INPUT_UNAVAILABLE",
                f"Tool {self.tool_name} cannot ask a person for input here: only a tool call "
                "of an agent run can.",
                category="tool",
            )
        request = PendingInput(
            "", kind, message, dict(schema), connection, self.tool_name, self.tool_call_id
        )
        limit = self._call_limit
        left = None if limit is None or limit.when() is None else limit.when()
        loop = asyncio.get_running_loop()
        if limit is not None:
            left = None if left is None else left - loop.time()
            limit.reschedule(None)
        try:
            return await self._ask_input(request, timeout)
        finally:
            if limit is not None and left is not None:
                limit.reschedule(loop.time() + max(left, 0.0))

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

    async def complete(
        self,
        messages: str | Sequence[Message],
        *,
        model: str | None = None,
        system: str | None = None,
        max_output_tokens: int | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> Completion:
        """Ask ``model`` (a key of the app's ``models=``; ``None``: the agent's own model)
        for one answer to ``messages`` (text, or user and assistant
        :class:`~fevex.messages.Message` s), with ``system`` as its system prompt, at most
        ``max_output_tokens`` tokens and the gateway's ``options``. The call offers the
        model no tools.

        It is a model step of the run: the app's policies see it first (stage
        ``"completion"``); it counts in ``Limits.max_steps``, the run's token budgets (the
        remaining output budget caps it) and its tree's model calls; its usage and cost
        join the run's, and its ``model.started`` and ``model.completed`` events (with this
        call's ``tool_call_id``) join the run's events and traces. A limit reached or a
        policy's denial raises its code, and fails this tool call with it even when the
        tool catches the error. Only tools an agent run calls can ask
        (``COMPLETION_UNAVAILABLE`` elsewhere).
        """
        from fevex.errors import FevexRunError
        from fevex.tools.completion import CompletionRequest

        if self._complete is None:
            raise FevexRunError(
                "COMPLETION_UNAVAILABLE",
                f"Tool {self.tool_name} asked for a completion outside an agent run's tool "
                "call; only the tools an agent run calls can ask the app's models.",
                category="tool",
            )
        request = CompletionRequest.of(
            messages, model, system, max_output_tokens, options, self.tool_name
        )
        return await self._complete(request)

    def __repr__(self) -> str:
        return (
            f"ToolContext(run_id={self.run_id!r}, tool_call_id={self.tool_call_id!r}, "
            f"tool_name={self.tool_name!r}, attempt={self.attempt})"
        )
