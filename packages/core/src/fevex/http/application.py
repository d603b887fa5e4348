"""``create_http_app``: a fevex app behind the versioned run protocol, as an ASGI application."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

try:
    from starlette.applications import Starlette
except ImportError as error:  # pragma: no cover - depends on the environment
    from fevex.plugins.install_hints import install_command

    raise ImportError(
        f"The fevex HTTP server needs Starlette: {install_command('http')}"
    ) from error
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from fevex.app import Fevex
from fevex.errors import FevexConfigurationError
from fevex.http.authentication import Authenticate
from fevex.http.console import Console
from fevex.http.endpoints import Endpoints
from fevex.http.openapi import openapi_document
from fevex.http.operations import OPERATIONS
from fevex.http.parameters import Bounds
from fevex.http.request_guard import (
    LOOPBACK_HOSTS,
    REQUEST_HEADER,
    RequestGuard,
    host_pattern_problem,
)
from fevex.http.routes import Reading, error_response, route

__all__ = ["FevexHttpApp", "create_http_app"]

DEFAULT_MAX_BODY_SIZE = 1_048_576


class FevexHttpApp:
    """The ASGI application :func:`create_http_app` returns: call it as any ASGI app.

    ``fevex`` is the app it serves; ``authenticates`` says whether callers are
    authenticated (an ``authenticate`` function was given), which ``fevex serve`` requires
    before it binds an address other hosts can reach; ``ui`` whether it serves the console
    under ``/ui`` (see :mod:`fevex.http.console`); ``allowed_hosts`` the hosts it answers
    (``None``: the loopback ones) and ``allow_cross_site_requests`` whether it serves
    state-changing requests from other sites (see :mod:`fevex.http.request_guard`)."""

    def __init__(
        self,
        asgi: ASGIApp,
        fevex: Fevex,
        *,
        authenticates: bool,
        cors_origins: Sequence[str] = (),
        ui: bool = False,
        allowed_hosts: Sequence[str] | None = None,
        allow_cross_site_requests: bool = False,
    ) -> None:
        self._protocol = asgi
        self.fevex = fevex
        self.authenticates = authenticates
        self.cors_origins = tuple(cors_origins)
        self.ui = ui
        self.allowed_hosts = None if allowed_hosts is None else tuple(allowed_hosts)
        self.allow_cross_site_requests = allow_cross_site_requests
        self._asgi = RequestGuard(
            Console(asgi) if ui else asgi,
            allowed_hosts=LOOPBACK_HOSTS if allowed_hosts is None else allowed_hosts,
            cors_origins=cors_origins,
            allow_cross_site_requests=allow_cross_site_requests,
            require_request_header=ui,
        )

    def with_console(self) -> FevexHttpApp:
        """This app serving the console too (what ``fevex serve --ui`` serves)."""
        if self.ui:
            return self
        _check_console_guarded(self.allow_cross_site_requests)
        return self._copy(ui=True, allowed_hosts=self.allowed_hosts)

    def with_allowed_hosts(self, hosts: Sequence[str]) -> FevexHttpApp:
        """This app answering ``hosts`` too, besides its own ``allowed_hosts`` (or the
        loopback hosts); what ``fevex serve --allowed-host`` serves."""
        _check_allowed_hosts(hosts)
        if not hosts:
            return self
        own = LOOPBACK_HOSTS if self.allowed_hosts is None else self.allowed_hosts
        added = tuple(host for host in hosts if host not in own)
        return self._copy(ui=self.ui, allowed_hosts=(*own, *added))

    def _copy(self, *, ui: bool, allowed_hosts: Sequence[str] | None) -> FevexHttpApp:
        return FevexHttpApp(
            self._protocol,
            self.fevex,
            authenticates=self.authenticates,
            cors_origins=self.cors_origins,
            ui=ui,
            allowed_hosts=allowed_hosts,
            allow_cross_site_requests=self.allow_cross_site_requests,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._asgi(scope, receive, send)


def create_http_app(
    app: Fevex,
    *,
    authenticate: Authenticate | None = None,
    allow_anonymous: bool = False,
    event_page_size: int = 100,
    poll_interval: float = 0.2,
    heartbeat: float = 15.0,
    max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    cors_origins: Sequence[str] = (),
    ui: bool = False,
    allowed_hosts: Sequence[str] | None = None,
    allow_cross_site_requests: bool = False,
) -> FevexHttpApp:
    """An ASGI application (Starlette) serving ``app`` under ``/v1``, with its OpenAPI 3.1
    document at ``/v1/openapi.json``.

    ``authenticate(request)`` (may be async) returns the caller's
    :class:`~fevex.runtime.ExecutionContext`, or ``None`` when it recognises nobody (401),
    or raises :class:`~fevex.http.Forbidden` (403). Callers without credentials are served
    only with ``allow_anonymous=True``, with an empty context (no actor, no namespace).
    A caller sees and controls only the runs and sessions of its context's namespace.

    ``event_page_size`` (1 to 1000) bounds every read of events: a listing's page and each
    read of an SSE stream; an idle stream reads again after ``poll_interval`` seconds, or
    when a store that notifies says the run moved on, and sends a comment every
    ``heartbeat`` seconds. Request bodies over ``max_body_size`` bytes are refused (413).
    Cross-origin requests are refused by browsers unless their origin is in
    ``cors_origins`` (``"*"``: any).

    A request is answered only when its ``Host`` is one of ``allowed_hosts`` (a name or
    address, ``*.example.com``, or ``*`` for any; ``None``: ``localhost``, ``127.0.0.1`` and
    ``[::1]``), else 400 ``HOST_NOT_ALLOWED``; this stops web pages whose name re-resolves
    to the server (DNS rebinding). A state-changing request that came from another site or
    origin is refused (403 ``CROSS_SITE_REQUEST``) unless ``allow_cross_site_requests=True``
    (see :mod:`fevex.http.request_guard`).

    ``ui=True`` also serves the run inspector and approval console under ``/ui``; a POST
    must then carry ``X-Fevex-Request: 1`` too (see :mod:`fevex.http.console`), and the
    console is never served with ``allow_cross_site_requests``."""
    _check_settings(
        authenticate=authenticate,
        allow_anonymous=allow_anonymous,
        event_page_size=event_page_size,
        poll_interval=poll_interval,
        heartbeat=heartbeat,
        max_body_size=max_body_size,
        cors_origins=cors_origins,
        allowed_hosts=allowed_hosts,
        allow_cross_site_requests=allow_cross_site_requests,
        ui=ui,
    )
    asgi = _protocol(
        app,
        Reading(
            authenticate=authenticate,
            allow_anonymous=allow_anonymous,
            max_body_size=max_body_size,
            bounds=Bounds(app, event_page_size),
        ),
        poll_interval=float(poll_interval),
        heartbeat=float(heartbeat),
        cors_origins=cors_origins,
    )
    return FevexHttpApp(
        asgi,
        app,
        authenticates=authenticate is not None,
        cors_origins=cors_origins,
        ui=ui,
        allowed_hosts=allowed_hosts,
        allow_cross_site_requests=allow_cross_site_requests,
    )


def _check_settings(
    *,
    authenticate: Authenticate | None,
    allow_anonymous: bool,
    event_page_size: int,
    poll_interval: float,
    heartbeat: float,
    max_body_size: int,
    cors_origins: Sequence[str],
    allowed_hosts: Sequence[str] | None,
    allow_cross_site_requests: bool,
    ui: bool,
) -> None:
    if authenticate is None and not allow_anonymous:
        raise FevexConfigurationError(
            "INVALID_CONFIG",
            "create_http_app needs authenticate= (a function of the request returning its "
            "ExecutionContext) or allow_anonymous=True.",
        )
    if authenticate is not None and not callable(authenticate):
        raise FevexConfigurationError("INVALID_CONFIG", "authenticate must be callable.")
    if not _whole(event_page_size) or not 1 <= event_page_size <= 1000:
        raise FevexConfigurationError(
            "INVALID_CONFIG", "event_page_size must be a whole number from 1 to 1000."
        )
    for name, seconds in (("poll_interval", poll_interval), ("heartbeat", heartbeat)):
        if not _positive(seconds):
            raise FevexConfigurationError("INVALID_CONFIG", f"{name} must be positive seconds.")
    if not _whole(max_body_size) or max_body_size < 1:
        raise FevexConfigurationError("INVALID_CONFIG", "max_body_size must be positive bytes.")
    if isinstance(cors_origins, str) or not all(isinstance(o, str) for o in cors_origins):
        raise FevexConfigurationError("INVALID_CONFIG", "cors_origins must be a list of origins.")
    if allowed_hosts is not None:
        _check_allowed_hosts(allowed_hosts)
        if not allowed_hosts:
            raise FevexConfigurationError(
                "INVALID_CONFIG",
                "allowed_hosts names no host: list the hosts to answer, or leave it None for "
                "the loopback ones.",
            )
    if not isinstance(allow_cross_site_requests, bool):
        raise FevexConfigurationError(
            "INVALID_CONFIG", "allow_cross_site_requests must be True or False."
        )
    if ui:
        _check_console_guarded(allow_cross_site_requests)


def _protocol(
    app: Fevex,
    reading: Reading,
    *,
    poll_interval: float,
    heartbeat: float,
    cors_origins: Sequence[str],
) -> Starlette:
    """The run protocol's routes, one per operation of the table, each served by the
    endpoint of its name."""
    event_page_size = reading.bounds.event_page_size
    endpoints = Endpoints(
        fevex=app,
        event_page_size=event_page_size,
        poll_interval=poll_interval,
        heartbeat=heartbeat,
        document=openapi_document(
            app,
            event_page_size=event_page_size,
            max_body_size=reading.max_body_size,
            anonymous=reading.authenticate is None,
        ),
    )
    routes = [
        route(operation, getattr(endpoints, operation.name), reading) for operation in OPERATIONS
    ]
    middleware = []
    if cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["Authorization", "Content-Type", "Last-Event-ID", REQUEST_HEADER],
            )
        )
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: _http_exception},
    )


def _check_allowed_hosts(hosts: Sequence[str]) -> None:
    if isinstance(hosts, str) or not isinstance(hosts, Sequence):
        raise FevexConfigurationError("INVALID_CONFIG", "allowed_hosts must be a list of hosts.")
    for host in hosts:
        problem = host_pattern_problem(host)
        if problem is not None:
            raise FevexConfigurationError("INVALID_CONFIG", f"allowed_hosts: {problem}.")


def _check_console_guarded(allow_cross_site_requests: bool) -> None:
    # The console's pages drive the protocol with the visitor's credentials.
    if allow_cross_site_requests:
        raise FevexConfigurationError(
            "INVALID_CONFIG",
            "The console (ui=True, fevex serve --ui) is not served with "
            "allow_cross_site_requests=True.",
        )


async def _http_exception(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    if error.status_code == 405:
        response = error_response(405, "METHOD_NOT_ALLOWED", "This path takes another method.")
        if error.headers:
            response.headers.update(error.headers)
        return response
    return error_response(404, "NOT_FOUND", "There is nothing at this path.")


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )
