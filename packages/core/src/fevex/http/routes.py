"""The Starlette routes of the run protocol, one per entry of the operations table.

A route reads its request as its :class:`~fevex.http.operations.Operation` describes, in
one order for every operation: the caller (the host's ``authenticate``, once, here), the
query string and headers (an operation that takes query parameters refuses any other),
the JSON body (each field checked, any other refused), then the names in the path. Only
then does the endpoint run, with an :class:`Incoming` that holds the checked values; what
it raises becomes an error answer (see :mod:`fevex.http.errors`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fevex.errors import FevexError
from fevex.http.authentication import ANONYMOUS, Authenticate, authenticated_context
from fevex.http.errors import error_body, error_status
from fevex.http.operations import Operation
from fevex.http.parameters import Bounds
from fevex.http.request_body import check_query, read_json_body
from fevex.runtime.context import ExecutionContext

__all__ = ["Incoming", "Reading", "error_response", "route"]

logger = logging.getLogger("fevex.http")


@dataclass(frozen=True, slots=True)
class Incoming:
    """A request as its operation read it: who asks, and the checked values of its path,
    of its query parameters and headers (``None`` when absent), and of its body."""

    request: Request
    caller: ExecutionContext
    path: Mapping[str, str]
    parameters: Mapping[str, Any]
    body: Mapping[str, Any]


Endpoint = Callable[[Incoming], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class Reading:
    """What every route reads a request with: the host's authentication and the served
    bounds."""

    authenticate: Authenticate | None
    allow_anonymous: bool
    max_body_size: int
    bounds: Bounds

    async def incoming(self, operation: Operation, request: Request) -> Incoming:
        caller = ANONYMOUS
        if operation.authenticated:
            caller = await authenticated_context(
                request, self.authenticate, allow_anonymous=self.allow_anonymous
            )
        query = request.query_params
        if operation.parameters:
            check_query(
                query,
                frozenset(p.name for p in operation.parameters if p.location == "query"),
            )
        parameters = {
            parameter.name: parameter.read(query, request.headers, self.bounds)
            for parameter in operation.parameters
        }
        body: dict[str, Any] = {}
        if operation.body is not None:
            fields = {field.name: field.check for field in operation.body}
            required = frozenset(field.name for field in operation.body if field.required)
            body = await read_json_body(request, self.max_body_size, fields, required)
        path = {name.name: name.read(request.path_params) for name in operation.path_names}
        return Incoming(request, caller, path, parameters, body)


def route(operation: Operation, endpoint: Endpoint, reading: Reading) -> Route:
    """The route of ``operation``, served by ``endpoint``."""

    async def serve(request: Request) -> Response:
        try:
            return await endpoint(await reading.incoming(operation, request))
        except FevexError as error:
            return error_response(error_status(error), error.code, error.message)
        except Exception:
            # The caller learns that the server failed, never how: the traceback stays here.
            logger.exception("fevex.http: %s %s failed", request.method, operation.path)
            return error_response(500, "INTERNAL_ERROR", "The server failed to answer.")

    return Route(operation.path, serve, methods=[operation.method])


def error_response(status: int, code: str, message: str) -> Response:
    return JSONResponse(error_body(code, message), status_code=status)
