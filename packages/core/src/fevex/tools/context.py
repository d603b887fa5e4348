"""What a tool function can learn about the call it serves."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fevex.messages import Message
    from fevex.tools.completion import Completion, CompletionRequest

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
    :meth:`complete` asks one of the app's models for an answer on the run's behalf.
    """

    __slots__ = (
        "_cancellation",
        "_complete",
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
