"""``fevex serve``: the run protocol on uvicorn, with the background worker beside it.

``--app`` names what :func:`create_http_app` returned (so that the host's ``authenticate``
is used), a Fevex app, or a function returning either. A bare Fevex app is served to
anonymous callers, which is only allowed on a loopback address: an address other hosts can
reach is refused without authentication (``SERVE_UNAUTHENTICATED``), before anything binds.

A bare app served with the console (``--ui``) on a loopback address gets a *local actor*:
every caller is the person at this machine, named by ``--actor`` (default: the OS user),
so that approvals decided from the console or a :class:`~fevex.http.FevexClient` are
recorded as theirs (``{"id": NAME, "type": "local"}``). Only the console's cross-site
guard (``X-Fevex-Request``) keeps other sites' pages from deciding as that person, hence
``--ui``; and only a loopback bind keeps other hosts from it, so ``--actor`` on another
address is refused (``SERVE_UNAUTHENTICATED``). Start-up prints the API's and the
console's URLs. A ``--store`` the app does not use (it sets ``run_store=`` to another
store) is refused with ``STORE_MISMATCH`` (see :mod:`fevex._internal.hosting.named_store`).

The app answers only requests whose ``Host`` it serves (see
:mod:`fevex.http.request_guard`): its ``allowed_hosts`` (by default the loopback ones), the
address it binds, and each ``--allowed-host``. A wildcard bind (``0.0.0.0``, ``::``) names
no host, so it needs ``allowed_hosts`` or ``--allowed-host`` (``SERVE_HOSTS_REQUIRED``).

Each uvicorn worker process loads the app itself (uvicorn calls :func:`served_app` in it,
configured through environment variables), serves it, and, unless ``--no-worker``, runs
the lanes of ``fevex worker`` beside it, so that runs whose process died are recovered and
due wake-ups continued. The lanes stop with the server; it then closes the app, which
cancels the runs it still executes.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import ipaddress
import json
import os
import socket
import sys
from collections.abc import Callable, Sequence
from typing import Any

try:
    import uvicorn
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError('fevex serve needs uvicorn: pip install "fevex[http]"') from error
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from fevex._internal.hosting.app_reference import load_reference
from fevex._internal.hosting.named_store import check_named_store
from fevex._internal.hosting.worker_lanes import work_lanes
from fevex.app import Fevex
from fevex.errors import FevexConfigurationError
from fevex.http.application import FevexHttpApp, create_http_app
from fevex.runtime.context import ExecutionContext
from fevex.runtime.in_memory_run_store import InMemoryRunStore

__all__ = [
    "LocalActor",
    "ServedApp",
    "check_bind",
    "is_loopback",
    "load_http_app",
    "local_actor_name",
    "served_app",
    "served_hosts",
]

# SSE streams of paused runs never end by themselves: on SIGTERM, requests still open this
# long after are cut (their clients reconnect, to another server or to the restarted one).
GRACEFUL_SHUTDOWN_SECONDS = 5
# How the parent process tells each uvicorn worker process what to serve.
APP_VARIABLE = "FEVEX_SERVE_APP"
WORKER_VARIABLE = "FEVEX_SERVE_WORKER"
UI_VARIABLE = "FEVEX_SERVE_UI"
ACTOR_VARIABLE = "FEVEX_SERVE_ACTOR"
HOSTS_VARIABLE = "FEVEX_SERVE_HOSTS"
# Addresses that bind every interface: they name no host a request could carry.
WILDCARD_ADDRESSES = frozenset({"", "0.0.0.0", "::", "[::]"})


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach ``host``: ``localhost`` or a loopback address."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def served_hosts(host: str, allowed_hosts: Sequence[str]) -> list[str]:
    """The hosts ``fevex serve`` adds to the app's: the address it binds (unless a
    wildcard), then each ``--allowed-host``."""
    added: list[str] = []
    if host not in WILDCARD_ADDRESSES:
        added.append(f"[{host}]" if ":" in host and not host.startswith("[") else host)
    added.extend(name for name in allowed_hosts if name not in added)
    return added


class LocalActor:
    """The ``authenticate`` of a bare app served with the console on loopback: every
    caller is the local actor ``name`` (see the module's description)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.context = ExecutionContext(actor={"id": name, "type": "local"})

    def __call__(self, request: Request) -> ExecutionContext:
        return self.context


def local_actor_name() -> str:
    """Who is at this machine: the OS user (``local`` when the system names nobody)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "local"


def load_http_app(
    reference: str,
    store: str | None,
    *,
    ui: bool = False,
    local_actor: str | None = None,
    hosts: Sequence[str] = (),
) -> FevexHttpApp:
    """The HTTP app ``module:attribute`` names (see the module's description), serving
    the console under ``/ui`` too when ``ui`` and answering ``hosts`` too; a bare app with
    the console is served to ``local_actor`` when one is named, to anonymous callers
    otherwise."""
    target = _load_target(reference, store)
    return _http_app(reference, target, ui=ui, local_actor=local_actor).with_allowed_hosts(hosts)


def _load_target(reference: str, store: str | None) -> FevexHttpApp | Fevex:
    target = load_reference(reference, store)
    if not isinstance(target, FevexHttpApp | Fevex) and callable(target):
        target = target()
    if isinstance(target, FevexHttpApp | Fevex):
        return target
    raise FevexConfigurationError(
        "INVALID_ARGUMENT",
        f"{reference} is not a fevex app, an app of fevex.http.create_http_app, or a "
        "function returning one.",
    )


def _http_app(
    reference: str, target: FevexHttpApp | Fevex, *, ui: bool, local_actor: str | None
) -> FevexHttpApp:
    if isinstance(target, FevexHttpApp):
        if local_actor is not None:
            raise FevexConfigurationError(
                "INVALID_ARGUMENT",
                f"--actor names the local actor of a bare fevex app; {reference} is an app "
                "of create_http_app, whose authenticate names its callers.",
            )
        return target.with_console() if ui else target
    if local_actor is not None and ui:
        return create_http_app(target, authenticate=LocalActor(local_actor), ui=True)
    if local_actor is not None:
        raise FevexConfigurationError(
            "INVALID_ARGUMENT",
            "--actor is the console's local actor: add --ui (the console's cross-site guard "
            "is what keeps other sites' pages from deciding as you).",
        )
    return create_http_app(target, allow_anonymous=True, ui=ui)


def _local_actor(
    target: FevexHttpApp | Fevex, host: str, ui: bool, actor: str | None
) -> str | None:
    """The local actor ``fevex serve`` offers (see the module's description), or ``None``;
    an ``--actor`` on an address other hosts can reach is refused."""
    if actor is not None and not is_loopback(host):
        raise FevexConfigurationError(
            "SERVE_UNAUTHENTICATED",
            f"fevex serve offers a local actor (--actor) on a loopback address only: anyone "
            f"who reaches {host} would decide approvals as {actor!r}. Bind 127.0.0.1, or "
            "point --app at create_http_app(app, authenticate=...).",
            details={"host": host},
        )
    if isinstance(target, Fevex) and ui and is_loopback(host) and actor is None:
        return local_actor_name()
    return actor


def check_bind(http_app: FevexHttpApp, host: str, workers: int) -> None:
    """Refuse what must not be served: anonymous callers on an address other hosts can
    reach, a wildcard address with no host to answer, and several processes on a store
    only one process can see."""
    if not http_app.authenticates and not is_loopback(host):
        raise FevexConfigurationError(
            "SERVE_UNAUTHENTICATED",
            f"fevex serve will not bind {host}, which other hosts can reach, without "
            "authentication: point --app at create_http_app(app, authenticate=...), or bind "
            "127.0.0.1.",
            details={"host": host},
        )
    if http_app.allowed_hosts is None and not is_loopback(host):
        raise FevexConfigurationError(
            "SERVE_HOSTS_REQUIRED",
            f"fevex serve binds {host}, which names no host its requests carry: name the "
            "hosts it answers with --allowed-host (or create_http_app(allowed_hosts=...)).",
            details={"host": host},
        )
    if workers > 1 and isinstance(http_app.fevex.run_store, InMemoryRunStore):
        raise FevexConfigurationError(
            "INVALID_ARGUMENT",
            "--workers above 1 needs a store the processes share (--store sqlite:///... or "
            "postgresql+psycopg://...); each would have its own in-memory store.",
        )


class ServedApp:
    """The HTTP app plus the worker lanes, started and stopped by the ASGI lifespan."""

    def __init__(self, http_app: FevexHttpApp, *, worker: bool, actor: str = "fevex-serve"):
        self.http_app = http_app
        self.worker = worker
        self.actor = {"id": actor, "type": "service"}
        self._stop = asyncio.Event()
        self._lanes: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.http_app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if self.worker:
                    self._lanes = asyncio.create_task(self._work())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self._stop.set()
                if self._lanes is not None:
                    await self._lanes
                await self.http_app.fevex.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _work(self) -> None:
        def report(entry: dict[str, Any]) -> None:
            print(f"fevex serve: {json.dumps(entry)}", file=sys.stderr, flush=True)

        await work_lanes(self.http_app.fevex, self.actor, 1, 1.0, report, self._stop)


def served_app() -> ServedApp:
    """What uvicorn calls in each worker process (``factory=True``): the app that
    ``FEVEX_SERVE_APP`` names, with its store from ``FEVEX_RUN_STORE``."""
    http_app = load_http_app(
        os.environ[APP_VARIABLE],
        None,
        ui=os.environ.get(UI_VARIABLE) == "1",
        local_actor=os.environ.get(ACTOR_VARIABLE) or None,
        hosts=json.loads(os.environ.get(HOSTS_VARIABLE, "[]")),
    )
    return ServedApp(http_app, worker=os.environ.get(WORKER_VARIABLE, "1") == "1")


def serve(
    reference: str,
    *,
    store: str | None,
    host: str,
    port: int,
    workers: int,
    worker: bool,
    ui: bool = False,
    actor: str | None = None,
    allowed_hosts: Sequence[str] = (),
) -> None:
    """Check what ``reference`` serves here, then run uvicorn until SIGINT or SIGTERM;
    ``actor`` names the local actor (see the module's description)."""
    target = _load_target(reference, store)
    check_named_store(store, target.fevex if isinstance(target, FevexHttpApp) else target)
    local_actor = _local_actor(target, host, ui, actor)
    hosts = served_hosts(host, allowed_hosts)
    http_app = _http_app(reference, target, ui=ui, local_actor=local_actor).with_allowed_hosts(
        hosts
    )
    check_bind(http_app, host, workers)
    os.environ[APP_VARIABLE] = reference
    os.environ[WORKER_VARIABLE] = "1" if worker else "0"
    os.environ[UI_VARIABLE] = "1" if ui else "0"
    os.environ[ACTOR_VARIABLE] = local_actor or ""
    os.environ[HOSTS_VARIABLE] = json.dumps(hosts)

    def announce(bound_port: int | None) -> None:
        print(_addresses(host, bound_port, ui, local_actor), file=sys.stderr, flush=True)

    if workers == 1:
        # This process is the one worker: serve the app already loaded.
        config = uvicorn.Config(
            ServedApp(http_app, worker=worker),
            host=host,
            port=port,
            lifespan="on",
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        )
        server = _AnnouncingServer(config, announce)
        with contextlib.suppress(KeyboardInterrupt):
            server.run()
        if not server.started:
            raise SystemExit(1)
        return
    # Each worker process loads its own; this one only supervised them. The port is the
    # one asked for (uvicorn's own line names the one it bound when that is 0).
    http_app.fevex.close_sync()
    announce(port or None)
    uvicorn.run(
        "fevex.http.serving:served_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )


def _addresses(host: str, port: int | None, ui: bool, local_actor: str | None) -> str:
    """The start-up lines: where the API and the console answer, and who decides there."""
    name = f"[{host}]" if ":" in host else host
    base = f"http://{name}:{port if port is not None else '<port>'}"
    lines = [f"fevex serve: API at {base}/v1 (OpenAPI document at {base}/v1/openapi.json)"]
    if ui:
        lines.append(f"fevex serve: console at {base}/ui/")
    if local_actor is not None:
        lines.append(f"fevex serve: approvals are decided as the local actor {local_actor!r}")
    return "\n".join(lines)


class _AnnouncingServer(uvicorn.Server):
    """uvicorn's server, announcing the API's and the console's URLs once it listens (with
    the port the system chose when 0 was asked for)."""

    def __init__(self, config: uvicorn.Config, announce: Callable[[int | None], None]) -> None:
        super().__init__(config)
        self._announce = announce

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            listening = [sock for server in self.servers for sock in server.sockets]
            self._announce(listening[0].getsockname()[1] if listening else None)
