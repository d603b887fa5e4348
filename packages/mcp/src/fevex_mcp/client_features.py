"""The client capabilities a provider offers its server: only those configured (sampling,
roots), each an SDK callback (:meth:`ClientFeatures.client_options`). Without one, the SDK
declares no capability and refuses the server's request itself.

A sampling request is answered for the tool call it belongs to: the call in flight on the
session the request arrived on (sessions are per run, and a run calls its tools one at a
time). A server on a 2026 protocol asks inside the call's own request, so the call is known
exactly; on a handshake-era session it asks on the side, and the one call in flight there
is taken. None, or several, is refused (``MCP_SAMPLING_NO_CALL``). A request fevex refuses
is answered with a JSON-RPC error that names only its code, and the call fails with that
code, whatever the server answers afterwards: a refused request is a limit or a policy the
run must not get around, or a server that asks for what it was not offered.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from fevex.errors import FevexError
from fevex.tools import ToolContext
from fevex_mcp.errors import SAMPLING_LIMIT, SAMPLING_NO_CALL, run_error
from fevex_mcp.roots import Root
from fevex_mcp.sampling import MCPSampling, sampling_ask, stopped

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client.session import ClientRequestContext
    from mcp.types import (
        CreateMessageRequestParams,
        CreateMessageResult,
        ErrorData,
        ListRootsResult,
    )

__all__ = ["ClientFeatures"]

T = TypeVar("T")


@dataclass(eq=False)
class _Flight:
    """One tool call in flight on a session, and what its sampling requests did."""

    context: ToolContext
    secrets: Sequence[str]
    requests: int = 0
    refusal: FevexError | None = None
    answering: set[asyncio.Task[Any]] = field(default_factory=set)
    turn: asyncio.Lock = field(default_factory=asyncio.Lock)


_FLIGHT: contextvars.ContextVar[_Flight | None] = contextvars.ContextVar(
    "fevex_mcp_flight", default=None
)


class ClientFeatures:
    """The sampling and roots a provider offers (either may be ``None``: not offered)."""

    def __init__(self, sampling: MCPSampling | None, roots: tuple[Root, ...] | None) -> None:
        self.sampling = sampling
        self.roots = roots
        # Set by the provider once its channel exists: where the server is, for messages.
        self.where = ""
        self._flights: weakref.WeakKeyDictionary[Any, list[_Flight]] = weakref.WeakKeyDictionary()

    def client_options(self) -> dict[str, Any]:
        """The ``Client(...)`` keywords of what is offered."""
        options: dict[str, Any] = {}
        if self.sampling is not None:
            options["sampling_callback"] = self._sample
        if self.roots is not None:
            options["list_roots_callback"] = self._list_roots
        return options

    async def run_call(
        self, client: Client, context: ToolContext, secrets: Sequence[str], call: Awaitable[T]
    ) -> T:
        """Await ``call`` with ``context`` as the call in flight on ``client``'s session;
        a sampling request refused meanwhile fails it with its code."""
        if self.sampling is None:
            return await call
        flight = _Flight(context, secrets)
        flights = self._flights.setdefault(client.session, [])
        flights.append(flight)
        token = _FLIGHT.set(flight)
        try:
            try:
                result: T | None = await call
            except Exception:
                if flight.refusal is None:
                    raise
                result = None
        finally:
            _FLIGHT.reset(token)
            flights.remove(flight)
            # An answer still being made belongs to a call that has ended.
            for task in flight.answering:
                task.cancel()
            if flight.answering:
                await asyncio.wait(flight.answering)
        if flight.refusal is not None:
            # Raised outside the handler: the server's failure is not its context.
            raise flight.refusal
        return result  # type: ignore[return-value]

    # -- the SDK's callbacks ---------------------------------------------------------------

    async def _sample(
        self, ctx: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult | ErrorData:
        flight = self._flight(ctx.session)
        if flight is None:
            refusal = run_error(
                SAMPLING_NO_CALL,
                f"The MCP server {self.where} asked for sampling while no single tool call "
                "of a run was in flight on its session; fevex refused it.",
            )
            return _refused(refusal)
        task = asyncio.current_task()
        if task is not None:
            flight.answering.add(task)
        try:
            return await self._answer(flight, params)
        except FevexError as error:
            if flight.refusal is None:
                flight.refusal = error
            return _refused(error)
        finally:
            if task is not None:
                flight.answering.discard(task)

    async def _answer(
        self, flight: _Flight, params: CreateMessageRequestParams
    ) -> CreateMessageResult:
        from mcp.types import CreateMessageResult, TextContent

        config = self.sampling
        assert config is not None
        if flight.refusal is not None:
            raise flight.refusal
        flight.requests += 1
        if flight.requests > config.max_requests:
            raise run_error(
                SAMPLING_LIMIT,
                f"The MCP server {self.where} asked for more than {config.max_requests} "
                f"samplings during one call of tool {flight.context.tool_name}; fevex "
                "refused the rest (MCPSampling.max_requests).",
                tool_name=flight.context.tool_name,
            )
        ask = sampling_ask(params, config, flight.secrets, self.where)
        # One answer at a time per call: a server asking many at once waits its turn.
        async with flight.turn:
            completion = await flight.context.complete(
                ask.messages,
                model=config.model,
                system=ask.system,
                max_output_tokens=ask.max_output_tokens,
                options=ask.options,
            )
        text, stop_reason = stopped(completion.text, ask.stop_sequences, completion.stop_reason)
        return CreateMessageResult(
            role="assistant",
            content=TextContent(type="text", text=text),
            model=completion.model,
            stop_reason=stop_reason,
        )

    async def _list_roots(self, ctx: ClientRequestContext) -> ListRootsResult:
        from mcp.types import ListRootsResult
        from mcp.types import Root as SdkRoot

        return ListRootsResult(
            roots=[SdkRoot(uri=root.uri, name=root.name) for root in self.roots or ()]  # type: ignore[arg-type]
        )

    def _flight(self, session: Any) -> _Flight | None:
        """The call a request on ``session`` belongs to: the caller's own (a request inside
        its call), else the only one in flight there."""
        flights = self._flights.get(session, [])
        current = _FLIGHT.get()
        if current is not None and current in flights:
            return current
        return flights[0] if len(flights) == 1 else None


def _refused(error: FevexError) -> ErrorData:
    from mcp.types import INVALID_REQUEST, ErrorData

    # The code only: the message may name the app's policy or its limits.
    return ErrorData(code=INVALID_REQUEST, message=f"fevex refused the request ({error.code}).")
