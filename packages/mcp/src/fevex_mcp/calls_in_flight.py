"""The tool calls of a run in flight on an MCP session, as the server's requests and
notifications during them see them.

A server may ask the client something while a call runs (elicitation, sampling) or tell
it something (log messages). Each belongs to one of the run's calls: on a 2026-07-28
session the server asks inside the call's own request, so the asking task carries the
call (a context variable); on a handshake-era session it is the one call in flight, and
a request that arrives while none or several are is refused (``call_for`` gives
``None``). A request may end its call with a stable code (``CallInFlight.fail``): the
call is cancelled at once (the SDK tells the server) and raises that code; answers still
being made when a call ends are cancelled and waited for.
"""

from __future__ import annotations

import contextvars
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from fevex.errors import FevexError
from fevex.tools import ToolContext

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["CallInFlight", "call_for", "in_flight", "latest_call"]

T = TypeVar("T")


@dataclass(eq=False)
class CallInFlight:
    """One tool call on a session: ``asked`` counts the server's requests by kind, and
    ``turn`` lets it answer one at a time."""

    context: ToolContext
    secrets: Sequence[str]
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    turn: anyio.Lock = field(default_factory=anyio.Lock)
    asked: dict[str, int] = field(default_factory=dict)
    failure: FevexError | None = None
    _answering: set[tuple[anyio.CancelScope, anyio.Event]] = field(default_factory=set)

    def fail(self, error: FevexError) -> None:
        """End the call with ``error`` (the first failure wins)."""
        if self.failure is None:
            self.failure = error
        self.scope.cancel()

    def count(self, kind: str) -> int:
        """Count one more request of ``kind``; how many there were."""
        self.asked[kind] = self.asked.get(kind, 0) + 1
        return self.asked[kind]

    @asynccontextmanager
    async def answering(self) -> AsyncIterator[anyio.CancelScope]:
        """Make an answer for this call: cancelled if the call ends first."""
        entry = (anyio.CancelScope(), anyio.Event())
        self._answering.add(entry)
        try:
            with entry[0]:
                yield entry[0]
        finally:
            self._answering.discard(entry)
            entry[1].set()

    async def _ended(self) -> None:
        waiting = tuple(self._answering)
        for scope, _ in waiting:
            scope.cancel()
        for _, done in waiting:
            await done.wait()


_CURRENT: contextvars.ContextVar[CallInFlight | None] = contextvars.ContextVar(
    "fevex_mcp_call_in_flight", default=None
)
_CALLS: weakref.WeakKeyDictionary[Any, list[CallInFlight]] = weakref.WeakKeyDictionary()


async def in_flight(
    client: Client,
    context: ToolContext,
    secrets: Sequence[str],
    operation: Callable[[], Awaitable[T]],
) -> T:
    """Run ``operation`` (a tool call on ``client``) as the call in flight for
    ``context``; raise the failure a server request ended it with, if any."""
    call = CallInFlight(context, secrets)
    calls = _CALLS.setdefault(client.session, [])
    calls.append(call)
    token = _CURRENT.set(call)
    result: T | None = None
    try:
        with call.scope:
            result = await operation()
    finally:
        _CURRENT.reset(token)
        calls.remove(call)
        with anyio.CancelScope(shield=True):
            await call._ended()
    if call.failure is not None:
        # Raised outside any handler: what the server sent is not its context.
        raise call.failure
    return result  # type: ignore[return-value]


def call_for(session: Any) -> CallInFlight | None:
    """The call a server request on ``session`` belongs to: the asking task's own (a
    request inside its call), else the only one in flight there."""
    calls = _CALLS.get(session, [])
    current = _CURRENT.get()
    if current is not None and current in calls:
        return current
    return calls[0] if len(calls) == 1 else None


def latest_call(session: Any) -> CallInFlight | None:
    """The call that started last of those in flight on ``session``, if any."""
    calls = _CALLS.get(session, [])
    return calls[-1] if calls else None
