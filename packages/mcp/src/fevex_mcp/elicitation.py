"""MCP elicitation: a server asks, during a tool call, for a few values from the user.

Off unless the provider is given ``elicitation=``: the client then declares no elicitation
capability, and the SDK refuses a server's request as before. With a handler (an app's
function, sync or async) each request goes to it as an :class:`ElicitationRequest`; with
``"person"`` it goes to a person through the run (``ToolContext.request_input``): the run
lists it as a pending input while the tool call waits, its MCP session alive, and
``resume_run`` answers it from any process sharing the store.

A request is answered only for the tool call it belongs to (see
:mod:`fevex_mcp.calls_in_flight`); at any other time (discovery, two parallel calls on a
handshake-era session) it is refused, never guessed. Each call asks at most
``MAX_ELICITATIONS``, one at a time. A request that breaks the rules (its schema not MCP's
restricted form, too large), an answer that does not match the schema, a handler that
fails and an answer that does not come within the provider's ``elicitation_timeout`` each
end the tool call with a stable code (the server is told ``cancel``, or gets an error for
a malformed request).
"""

from __future__ import annotations

import inspect
from typing import Any, Literal

import anyio
import anyio.to_thread
from mcp.types import INVALID_PARAMS, INVALID_REQUEST, ElicitResult, ErrorData

from fevex.errors import FevexError
from fevex.tools import ToolContext
from fevex_mcp.calls_in_flight import CallInFlight, call_for
from fevex_mcp.elicitation_schema import (
    MAX_MESSAGE_CHARS,
    checked_content,
    checked_schema,
    clean_text,
)
from fevex_mcp.elicitation_types import (
    MAX_ELICITATIONS,
    ElicitationHandler,
    ElicitationRequest,
    ElicitationResponse,
)
from fevex_mcp.errors import ELICITATION_FAILED, ELICITATION_LIMIT, ELICITATION_TIMEOUT, run_error

__all__ = ["Elicitor"]


class Elicitor:
    """A provider's elicitation: who answers (``answer``), within ``timeout`` seconds,
    for the server ``where``."""

    def __init__(
        self, answer: ElicitationHandler | Literal["person"], timeout: float, where: str
    ) -> None:
        self.answer = answer
        self.timeout = timeout
        self.where = where

    def client_options(self) -> dict[str, Any]:
        """What the SDK's ``Client`` takes to declare and answer elicitation."""
        return {"elicitation_callback": self.callback}

    async def callback(self, context: Any, params: Any) -> ElicitResult | ErrorData:
        """The SDK's elicitation callback: the answer the server gets."""
        call = call_for(context.session)
        if call is None:
            return ErrorData(
                code=INVALID_REQUEST,
                message="fevex-mcp answers an elicitation only during one tool call.",
            )
        if getattr(params, "mode", "form") != "form":
            return ErrorData(code=INVALID_PARAMS, message="Only form mode elicitation.")
        async with call.turn:
            if call.failure is not None:
                return ElicitResult(action="cancel")
            if call.count("elicitation") > MAX_ELICITATIONS:
                call.fail(
                    run_error(
                        ELICITATION_LIMIT,
                        f"The MCP server {self.where} asked for input more than "
                        f"{MAX_ELICITATIONS} times in one tool call; the call was ended.",
                    )
                )
                return ElicitResult(action="cancel")
            try:
                request = self._request(call.context, params)
            except FevexError as error:
                call.fail(error)
                return ErrorData(code=INVALID_PARAMS, message="Not MCP's restricted form.")
            async with call.answering():
                return await self._answered(call, request)
            return ElicitResult(action="cancel")

    def _request(self, context: ToolContext, params: Any) -> ElicitationRequest:
        schema = checked_schema(getattr(params, "requested_schema", None), self.where)
        tool_name = context.tool_name
        connection, separator, _ = tool_name.partition("__")
        return ElicitationRequest(
            message=clean_text(getattr(params, "message", ""), MAX_MESSAGE_CHARS),
            schema=schema,
            server=self.where,
            connection=connection if separator else None,
            run_id=context.run_id,
            tool_call_id=context.tool_call_id,
            tool_name=tool_name,
        )

    async def _answered(self, call: CallInFlight, request: ElicitationRequest) -> ElicitResult:
        try:
            response = await self._response(call.context, request)
            if response.action == "accept":
                content = checked_content(response.content or {}, request.schema, self.where)
                return ElicitResult(action="accept", content=content)
            return ElicitResult(action=response.action)
        except FevexError as error:
            call.fail(error)
        except Exception as error:
            call.fail(
                run_error(
                    ELICITATION_FAILED,
                    f"The elicitation handler failed ({type(error).__name__}); the tool "
                    "call was ended.",
                )
            )
        return ElicitResult(action="cancel")

    async def _response(
        self, context: ToolContext, request: ElicitationRequest
    ) -> ElicitationResponse:
        answer = self.answer
        if answer == "person":
            try:
                person = await context.request_input(
                    request.message,
                    schema=request.schema,
                    timeout=self.timeout,
                    kind="elicitation",
                    connection=request.connection,
                )
            except FevexError as error:
                if error.code == "INPUT_TIMEOUT":
                    raise self._timed_out() from None
                if error.code == "INPUT_UNAVAILABLE":
                    raise run_error(ELICITATION_FAILED, error.message) from None
                raise
            return ElicitationResponse(person.action, person.content)
        given: Any
        try:
            with anyio.fail_after(self.timeout):
                if _is_async(answer):
                    given = await answer(request)  # type: ignore[misc]
                else:
                    given = await anyio.to_thread.run_sync(answer, request, abandon_on_cancel=True)
                    if inspect.isawaitable(given):
                        given = await given
        except TimeoutError:
            raise self._timed_out() from None
        return _response(given)

    def _timed_out(self) -> FevexError:
        return run_error(
            ELICITATION_TIMEOUT,
            f"The elicitation of the MCP server {self.where} was not answered within "
            f"{self.timeout} s; the request was cancelled and the tool call ended.",
            recoverable=True,
        )


def _is_async(handler: Any) -> bool:
    # A callable object whose __call__ is async is awaited too.
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        type(handler).__call__
    )


def _response(given: Any) -> ElicitationResponse:
    if isinstance(given, ElicitationResponse) and given.action in ("accept", "decline", "cancel"):
        return given
    raise run_error(
        ELICITATION_FAILED,
        "An elicitation handler returns an ElicitationResponse (accept, decline or cancel), "
        f"not {type(given).__name__}; the tool call was ended.",
    )
