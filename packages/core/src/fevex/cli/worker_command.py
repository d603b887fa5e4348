"""``fevex worker``: the worker lanes in a process of their own, until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from typing import TYPE_CHECKING, Any

from fevex._internal.hosting.named_store import check_named_store, describe_app_store
from fevex._internal.hosting.worker_lanes import work_lanes
from fevex.cli.app_option import app_reference, load_app
from fevex.cli.argument_types import MIN_INTERVAL, interval_seconds, positive_int
from fevex.cli.store_option import add_store_arguments, check_store, store_url
from fevex.plugins.commands import Command

if TYPE_CHECKING:
    from fevex.app import Fevex

__all__ = []


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--app", required=True, type=app_reference, help="module:attribute of your fevex app"
    )
    add_store_arguments(parser)
    parser.add_argument(
        "--concurrency", type=positive_int, default=1, help="runs continued at once (default 1)"
    )
    parser.add_argument(
        "--interval",
        type=interval_seconds,
        default=1.0,
        help=f"seconds between looks when idle (default 1, at least {MIN_INTERVAL:g})",
    )
    parser.add_argument("--actor", default="fevex-worker", help="actor id recorded in events")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")


def _worker(args: argparse.Namespace) -> int:
    # SIGTERM while the app loads (a deploy stopping a worker that just started) ends the
    # worker cleanly: it holds no run yet. Once working, the loop's own handler takes over.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    check_store(args)
    app = load_app(args.app, args.store)
    check_named_store(args.store, app)
    # Without --store, a worker on the default in-memory store would wait forever for runs
    # that other processes keep in their own memory: say where it looks.
    for line in _store_description(args, app):
        print(f"fevex worker: {line}", file=sys.stderr, flush=True)
    # From here until the loop's handler is in place, a SIGTERM is remembered, not raised
    # inside the starting loop, and the loop stops at once.
    early: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: early.append(signum))
    actor = {"id": args.actor, "type": "service"}
    asyncio.run(_work(app, actor, args.concurrency, args.interval, args.json, early))
    return 0


def _store_description(args: argparse.Namespace, app: Fevex) -> list[str]:
    """Where the worker looks: the store the app uses, which ``--store`` (checked) or
    ``FEVEX_RUN_STORE`` named, or the app's own; never its password."""
    from fevex.runtime.in_memory_run_store import InMemoryRunStore

    in_memory = isinstance(app.run_store, InMemoryRunStore)
    if in_memory and not store_url(args):
        lines = ["runs on memory:// (no --store, and FEVEX_RUN_STORE is not set)"]
    elif app._run_store_url is not None:
        lines = [f"runs on the store {describe_app_store(app)}"]
    else:
        lines = [f"runs on the app's own store {describe_app_store(app)}"]
    if in_memory:
        lines.append(
            "warning: an in-memory store's runs are this process's alone, so this worker "
            "never sees another process's runs; name the store they share with --store "
            "(sqlite:///runs.db, postgresql+psycopg://...) or FEVEX_RUN_STORE."
        )
    return lines


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


async def _work(
    app: Fevex,
    actor: dict[str, str],
    concurrency: int,
    interval: float,
    as_json: bool,
    early: list[int],
) -> None:
    """Claim and continue expired runs and due wake-ups on ``concurrency`` lanes until
    SIGINT or SIGTERM (``early`` holds one that came before the loop ran); a lane stops
    between claims, so the run it holds is finished first."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    if early:
        stop.set()

    def report(entry: dict[str, Any]) -> None:
        if as_json:
            print(json.dumps(entry), flush=True)
        else:
            print(" ".join(str(value) for value in entry.values()), flush=True)

    try:
        await work_lanes(app, actor, concurrency, interval, report, stop)
    finally:
        await app.close()


WORKER = Command(
    name="worker",
    help="Keep continuing runs whose lease expired and paused runs whose wake-up is due "
    "(a timer, the end of a child), until SIGINT or SIGTERM; several workers share the "
    "work and never claim one run twice.",
    handler=_worker,
    arguments=_arguments,
)
