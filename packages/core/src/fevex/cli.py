"""The ``fevex`` command. Plugins add subcommands through ``fevex_register_commands``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from fevex.__about__ import __version__
from fevex.errors import FevexConfigurationError, FevexError
from fevex.plugins.discovery import get_plugin_manager, list_plugins, record_command

__all__ = ["CommandRegistry", "main"]


class CommandRegistry:
    """What ``fevex_register_commands(cli)`` receives."""

    def __init__(self, subparsers: Any) -> None:
        self._subparsers = subparsers
        self.plugin_name = "fevex"

    def add_command(self, name: str, *, help: str) -> argparse.ArgumentParser:
        """Add ``fevex NAME``; set ``handler`` on the returned parser with
        ``parser.set_defaults(handler=function)``, where ``function(args) -> int``."""
        parser: argparse.ArgumentParser = self._subparsers.add_parser(
            name, help=help, description=help
        )
        record_command(self.plugin_name, name)
        return parser


def _plugins_command(args: argparse.Namespace) -> int:
    print(json.dumps(list_plugins(), indent=2))
    return 0


def _version_command(args: argparse.Namespace) -> int:
    print(__version__)
    return 0


def _load_app(reference: str, store: str | None) -> Any:
    """``module:attribute``: a Fevex app, or a function that returns one, imported from the
    working directory; ``store`` (a store URL) is set as ``FEVEX_RUN_STORE`` first, since the
    app reads its store from the environment when it is created."""
    import importlib
    import os

    from fevex.app import Fevex

    if store:
        os.environ["FEVEX_RUN_STORE"] = store
    sys.path.insert(0, os.getcwd())

    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise FevexConfigurationError(
            "INVALID_ARGUMENT", f"--app takes module:attribute, not {reference!r}."
        )
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    if not isinstance(target, Fevex) and callable(target):
        target = target()
    if not isinstance(target, Fevex):
        raise FevexConfigurationError(
            "INVALID_ARGUMENT", f"{reference} is not a fevex app or a function returning one."
        )
    return target


def _recover_command(args: argparse.Namespace) -> int:
    import asyncio
    import time

    app = _load_app(args.app, args.store)
    actor = {"id": args.actor, "type": "service"}
    while True:
        try:
            sweep = asyncio.run(app.recover_expired_runs(actor=actor, limit=args.limit))
        except Exception as error:
            # One failed pass (the store unreachable for a while) must not end a watcher.
            print(f"fevex: recovery pass failed: {_describe(error)}", file=sys.stderr, flush=True)
            if args.interval is None:
                return 1
        else:
            for run in sweep.recovered:
                print(json.dumps({"run_id": run.id, "status": run.status}), flush=True)
            for skipped in sweep.skipped:
                line = {"run_id": skipped.run_id, "status": "skipped", "code": skipped.code}
                print(json.dumps(line), flush=True)
            for run_id in sweep.unclaimed:
                print(json.dumps({"run_id": run_id, "status": "unclaimed"}), flush=True)
        if args.interval is None:
            return 0
        time.sleep(args.interval)


def _worker_command(args: argparse.Namespace) -> int:
    import asyncio

    if args.concurrency < 1:
        raise FevexConfigurationError("INVALID_ARGUMENT", "--concurrency must be at least 1.")
    if not args.interval > 0:
        raise FevexConfigurationError("INVALID_ARGUMENT", "--interval must be positive seconds.")
    app = _load_app(args.app, args.store)
    actor = {"id": args.actor, "type": "service"}
    asyncio.run(_work(app, actor, args.concurrency, args.interval, args.json))
    return 0


async def _work(
    app: Any, actor: dict[str, str], concurrency: int, interval: float, as_json: bool
) -> None:
    """Claim and continue expired runs and due wake-ups on ``concurrency`` lanes until
    SIGINT or SIGTERM; a lane stops between claims, so the run it holds is finished first."""
    import asyncio
    import contextlib
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)

    def report(entry: dict[str, Any]) -> None:
        if as_json:
            print(json.dumps(entry), flush=True)
        else:
            print(" ".join(str(value) for value in entry.values()), flush=True)

    # A run left for another worker is reported once, not on every pass.
    reported_skips: set[tuple[str, str]] = set()

    async def lane() -> None:
        while not stop.is_set():
            busy = False
            try:
                sweep = await app.recover_expired_runs(actor=actor, limit=1)
            except Exception as error:
                print(f"fevex: recovery failed: {_describe(error)}", file=sys.stderr, flush=True)
            else:
                for run in sweep.recovered:
                    report({"action": "recovered", "run_id": run.id, "status": run.status})
                for skipped in sweep.skipped:
                    if (skipped.run_id, skipped.code) not in reported_skips:
                        reported_skips.add((skipped.run_id, skipped.code))
                        report(
                            {"action": "skipped", "run_id": skipped.run_id, "code": skipped.code}
                        )
                busy = sweep.claimed > 0
            try:
                wake_ups = await app.wake_due_runs(limit=1)
            except Exception as error:
                print(f"fevex: wake-up failed: {_describe(error)}", file=sys.stderr, flush=True)
            else:
                for run in wake_ups.woken:
                    report({"action": "woken", "run_id": run.id, "status": run.status})
                for skipped in wake_ups.skipped:
                    report({"action": "skipped", "run_id": skipped.run_id, "code": skipped.code})
                busy = busy or wake_ups.claimed > 0
            if not busy:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), interval)

    try:
        await asyncio.gather(*(lane() for _ in range(concurrency)))
    finally:
        await app.close()


def _describe(error: Exception) -> str:
    return str(error) if isinstance(error, FevexError) else type(error).__name__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fevex", description="The fevex agent runtime.")
    parser.add_argument("--version", action="version", version=f"fevex {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    registry = CommandRegistry(subparsers)
    registry.add_command(
        "plugins", help="List loaded plugins and what they registered, as JSON."
    ).set_defaults(handler=_plugins_command)
    registry.add_command("version", help="Print the fevex version.").set_defaults(
        handler=_version_command
    )
    recover = registry.add_command(
        "recover",
        help="Find running runs whose lease expired (their worker died) and continue them.",
    )
    recover.add_argument(
        "--app",
        required=True,
        help="module:attribute of your fevex app (or of a function returning it); recovery "
        "needs your agents, tools and models to continue a run",
    )
    recover.add_argument("--store", help="run-store URL (sets FEVEX_RUN_STORE before loading)")
    recover.add_argument("--limit", type=int, help="recover at most this many runs per pass")
    recover.add_argument("--actor", default="fevex-recover", help="actor id recorded in events")
    recover.add_argument(
        "--interval", type=float, help="keep watching, one pass every INTERVAL seconds"
    )
    recover.set_defaults(handler=_recover_command)
    worker = registry.add_command(
        "worker",
        help="Keep continuing runs whose lease expired and paused runs whose wake-up is due "
        "(a timer, the end of a child), until SIGINT or SIGTERM; several workers share the "
        "work and never claim one run twice.",
    )
    worker.add_argument("--app", required=True, help="module:attribute of your fevex app")
    worker.add_argument("--store", help="run-store URL (sets FEVEX_RUN_STORE before loading)")
    worker.add_argument(
        "--concurrency", type=int, default=1, help="runs continued at once (default 1)"
    )
    worker.add_argument(
        "--interval", type=float, default=1.0, help="seconds between looks when idle (default 1)"
    )
    worker.add_argument("--actor", default="fevex-worker", help="actor id recorded in events")
    worker.add_argument("--json", action="store_true", help="one JSON object per line")
    worker.set_defaults(handler=_worker_command)
    manager = get_plugin_manager()
    for implementation in manager.hook.fevex_register_commands.get_hookimpls():
        registry.plugin_name = implementation.plugin_name
        implementation.function(cli=registry)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return handler(args)
    except FevexError as error:
        print(f"fevex: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
