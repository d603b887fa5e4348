"""The client capabilities a provider offers its server: only those configured (sampling,
roots), each an SDK callback (:meth:`ClientFeatures.client_options`). Without one, the SDK
declares no capability and refuses the server's request itself.

A sampling request is answered for the tool call it belongs to
(:mod:`fevex_mcp.calls_in_flight`); none, or several on a handshake-era session, is
refused (``MCP_SAMPLING_NO_CALL``). A request fevex refuses is answered with a JSON-RPC
error that names only its code, and the call ends with that code at once: a refused
request is a limit or a policy the run must not get around, or a server that asks for what
it was not offered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fevex.errors import FevexError
from fevex_mcp.calls_in_flight import CallInFlight, call_for
from fevex_mcp.errors import SAMPLING_LIMIT, SAMPLING_NO_CALL, run_error
from fevex_mcp.roots import Root
from fevex_mcp.sampling import MCPSampling, sampling_ask, stopped

if TYPE_CHECKING:
    from mcp.client.session import ClientRequestContext
    from mcp.types import (
        CreateMessageRequestParams,
        CreateMessageResult,
        ErrorData,
        ListRootsResult,
    )

__all__ = ["ClientFeatures"]


class ClientFeatures:
    """The sampling and roots a provider offers (either may be ``None``: not offered)."""

    def __init__(self, sampling: MCPSampling | None, roots: tuple[Root, ...] | None) -> None:
        self.sampling = sampling
        self.roots = roots
        # Set by the provider once its channel exists: where the server is, for messages.
        self.where = ""

    def client_options(self) -> dict[str, Any]:
        """The ``Client(...)`` keywords of what is offered."""
        options: dict[str, Any] = {}
        if self.sampling is not None:
            options["sampling_callback"] = self._sample
        if self.roots is not None:
            options["list_roots_callback"] = self._list_roots
        return options

    # -- the SDK's callbacks ---------------------------------------------------------------

    async def _sample(
        self, ctx: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult | ErrorData:
        call = call_for(ctx.session)
        if call is None:
            refusal = run_error(
                SAMPLING_NO_CALL,
                f"The MCP server {self.where} asked for sampling while no single tool call "
                "of a run was in flight on its session; fevex refused it.",
            )
            return _refused(refusal)
        try:
            async with call.answering():
                return await self._answer(call, params)
        except FevexError as error:
            call.fail(error)
            return _refused(error)
        # The call ended while the answer was being made.
        return _refused(call.failure or run_error(SAMPLING_NO_CALL, "The tool call ended."))

    async def _answer(
        self, call: CallInFlight, params: CreateMessageRequestParams
    ) -> CreateMessageResult:
        from mcp.types import CreateMessageResult, TextContent

        config = self.sampling
        assert config is not None
        if call.failure is not None:
            raise call.failure
        if call.count("sampling") > config.max_requests:
            raise run_error(
                SAMPLING_LIMIT,
                f"The MCP server {self.where} asked for more than {config.max_requests} "
                f"samplings during one call of tool {call.context.tool_name}; fevex "
                "refused the rest (MCPSampling.max_requests).",
                tool_name=call.context.tool_name,
            )
        ask = sampling_ask(params, config, call.secrets, self.where)
        # One answer at a time per call: a server asking many at once waits its turn.
        async with call.turn:
            completion = await call.context.complete(
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


def _refused(error: FevexError) -> ErrorData:
    from mcp.types import INVALID_REQUEST, ErrorData

    # The code only: the message may name the app's policy or its limits.
    return ErrorData(code=INVALID_REQUEST, message=f"fevex refused the request ({error.code}).")
