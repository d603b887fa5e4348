"""``fevex serve``: the run protocol on uvicorn, with the worker lanes beside it (the work
itself is :mod:`fevex.http.serving`, imported only when the command runs, since it needs
the ``http`` extra)."""

from __future__ import annotations

import argparse

from fevex.cli.app_option import app_reference
from fevex.cli.argument_types import port_number, positive_int
from fevex.cli.store_option import add_store_arguments, check_store
from fevex.errors import FevexConfigurationError
from fevex.plugins.commands import Command

__all__ = []


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--app",
        required=True,
        type=app_reference,
        help="module:attribute of an app of fevex.http.create_http_app (its authenticate is "
        "used), of a fevex app (served to anonymous callers, on a loopback address only), "
        "or of a function returning either",
    )
    add_store_arguments(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=port_number, default=8000, help="port to bind (default 8000)"
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST",
        help="a Host the server answers besides the app's allowed_hosts (by default "
        "localhost, 127.0.0.1, [::1]) and the --host it binds: a name or address, "
        "*.example.com for its subdomains, or * for any; repeat for several. Requests for "
        "other hosts get 400 HOST_NOT_ALLOWED (DNS rebinding defence); --host 0.0.0.0 needs "
        "at least one",
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        help="server processes (default 1); above 1, the store must be shared (SQLite, PostgreSQL)",
    )
    parser.add_argument(
        "--no-worker",
        action="store_true",
        help="serve only: leave recovery and wake-ups to separate `fevex worker` processes",
    )
    parser.add_argument(
        "--ui",
        action="store_true",
        help="also serve the run inspector and approval console at /ui (state-changing "
        "requests then need the X-Fevex-Request: 1 header, which the fevex clients send)",
    )
    parser.add_argument(
        "--actor",
        metavar="NAME",
        help="with --ui, a bare fevex app on a loopback address serves every caller as the "
        "local actor NAME, who decides approvals from the console and the fevex clients "
        "(default: the OS user); refused on any other address",
    )


def _serve(args: argparse.Namespace) -> int:
    try:
        from fevex.http.serving import serve
    except ImportError as error:
        raise FevexConfigurationError("MISSING_EXTRA", str(error)) from None

    check_store(args)
    serve(
        args.app,
        store=args.store,
        host=args.host,
        port=args.port,
        workers=args.workers,
        worker=not args.no_worker,
        ui=args.ui,
        actor=args.actor,
        allowed_hosts=args.allowed_host,
    )
    return 0


SERVE = Command(
    name="serve",
    help="Serve the run protocol (fevex.http) with uvicorn, and continue runs whose "
    "process died and due wake-ups beside it, until SIGINT or SIGTERM.",
    handler=_serve,
    arguments=_arguments,
)
