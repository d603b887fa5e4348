"""The ``fevex`` command. Plugins add subcommands through ``fevex_register_commands``, and
store plugins answer ``fevex db`` and ``--store`` checks for their own URL schemes.

Arguments are checked by the parser (a bad one exits with status 2 and one line), a fevex
error is one line and status 1, and Ctrl-C is one line and status 130: never a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fevex.__about__ import __version__
from fevex._ground.names import did_you_mean
from fevex.errors import FevexConfigurationError, FevexError
from fevex.plugins.discovery import (
    add_plugin_commands,
    list_plugins,
    record_command,
    run_store_factory,
)

__all__ = ["CommandRegistry", "StoreCommands", "load_reference", "main", "work_lanes"]

# The shortest wait between two passes of ``recover --interval`` or two looks of an idle
# ``worker``: each pass queries the store, so a shorter one is a busy loop against it.
MIN_INTERVAL = 0.1
_SCHEME = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):")
_PASSWORD = re.compile(r"(://[^:/@]*:)[^@/]*@")


@dataclass(frozen=True, slots=True)
class StoreCommands:
    """What a store plugin answers for URLs of its schemes on the command line.

    ``status(url)`` prints the store's schema version and returns the exit status (0 when
    it is current); ``upgrade(url, create)`` applies the migrations the store lacks, creating
    it first only when ``create``; ``check(url, create)``, when given, raises a
    :class:`~fevex.FevexError` for a store that does not exist before a command opens it
    (``create`` is ``--create``)."""

    status: Callable[[str], int]
    upgrade: Callable[[str, bool], int]
    check: Callable[[str, bool], None] | None = None


class CommandRegistry:
    """What ``fevex_register_commands(cli)`` receives."""

    def __init__(self, subparsers: Any) -> None:
        self._subparsers = subparsers
        self.plugin_name = "fevex"
        self.store_commands: dict[str, StoreCommands] = {}

    def add_command(self, name: str, *, help: str) -> argparse.ArgumentParser:
        """Add ``fevex NAME``; set ``handler`` on the returned parser with
        ``parser.set_defaults(handler=function)``, where ``function(args) -> int``."""
        parser: argparse.ArgumentParser = self._subparsers.add_parser(
            name, help=help, description=help
        )
        record_command(self.plugin_name, name)
        return parser

    def add_store_commands(
        self,
        schemes: Sequence[str],
        *,
        status: Callable[[str], int],
        upgrade: Callable[[str, bool], int],
        check: Callable[[str, bool], None] | None = None,
    ) -> None:
        """Answer ``fevex db status|upgrade --store URL`` for URLs of ``schemes`` (looked up
        like run-store schemes: whole, then the part before ``+``), and check such a URL
        before ``recover`` or ``worker`` opens it; see :class:`StoreCommands`."""
        for scheme in schemes:
            self.store_commands[scheme.lower()] = StoreCommands(status, upgrade, check)
        record_command(self.plugin_name, "db")


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
    from fevex.app import Fevex

    target = load_reference(reference, store)
    if not isinstance(target, Fevex) and callable(target):
        target = target()
    if not isinstance(target, Fevex):
        raise FevexConfigurationError(
            "INVALID_ARGUMENT", f"{reference} is not a fevex app or a function returning one."
        )
    return target


def load_reference(reference: str, store: str | None) -> Any:
    """The object ``module:attribute`` names, imported from the working directory, with
    ``store`` set as ``FEVEX_RUN_STORE`` first (see ``_load_app``)."""
    import importlib

    if store:
        os.environ["FEVEX_RUN_STORE"] = store
    sys.path.insert(0, os.getcwd())

    module_name, _, attribute = reference.partition(":")
    target: Any = _import_app_module(module_name, reference, importlib.import_module)
    found = module_name
    for part in attribute.split("."):
        if not hasattr(target, part):
            known = [name for name in dir(target) if not name.startswith("_")]
            raise FevexConfigurationError(
                "APP_NOT_FOUND",
                f"--app {reference}: {found} has no attribute {part!r}.{did_you_mean(part, known)}",
                details={"app": reference},
            )
        target = getattr(target, part)
        found = f"{found}.{part}"
    return target


def _import_app_module(module_name: str, reference: str, import_module: Any) -> Any:
    try:
        return import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is None or not (
            module_name == error.name or module_name.startswith(f"{error.name}.")
        ):
            raise _app_import_failed(reference, error) from error
        raise FevexConfigurationError(
            "APP_NOT_FOUND",
            f"--app {reference}: no module named {error.name!r} importable from "
            f"{os.getcwd()}; run fevex from the directory that holds it, or add that "
            "directory to PYTHONPATH.",
            details={"app": reference},
        ) from error
    except Exception as error:
        raise _app_import_failed(reference, error) from error


def _app_import_failed(reference: str, error: BaseException) -> FevexConfigurationError:
    """One line for an exception raised while the app's module ran: its type, message and
    the innermost line of the app's own code."""
    where = ""
    traceback = error.__traceback__
    while traceback is not None:
        filename = traceback.tb_frame.f_code.co_filename
        if not filename.startswith("<"):
            where = f" (at {filename}:{traceback.tb_lineno})"
        traceback = traceback.tb_next
    if isinstance(error, SyntaxError) and error.filename:
        where = f" (at {error.filename}:{error.lineno})"
    return FevexConfigurationError(
        "APP_IMPORT_FAILED",
        f"--app {reference}: importing it raised {type(error).__name__}: {error}{where}.",
        details={"app": reference},
    )


def _store_url(args: argparse.Namespace) -> str | None:
    url: str | None = args.store or os.environ.get("FEVEX_RUN_STORE")
    return url


def _store_commands_for(args: argparse.Namespace, url: str) -> StoreCommands | None:
    commands: dict[str, StoreCommands] = getattr(args, "store_commands", {})
    match = _SCHEME.match(url)
    if match is None:
        return None
    scheme = match["scheme"].lower()
    return commands.get(scheme) or commands.get(scheme.partition("+")[0])


def _check_store(args: argparse.Namespace) -> None:
    """Before a command opens the store: refuse a URL no loaded plugin serves (rather than
    let the app's import fail on it), and let the plugin of its scheme refuse a store that
    does not exist (a misspelt SQLite path) unless ``--create``."""
    url = _store_url(args)
    if not url:
        return
    run_store_factory(url)
    commands = _store_commands_for(args, url)
    if commands is not None and commands.check is not None:
        commands.check(url, args.create)


def _recover_command(args: argparse.Namespace) -> int:
    import asyncio
    import time

    _check_store(args)
    app = _load_app(args.app, args.store)
    actor = {"id": args.actor, "type": "service"}
    watching = args.interval is not None
    while True:
        try:
            sweep, leased = asyncio.run(_recovery_pass(app, actor, args.limit, watching))
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
            # On stderr: stdout stays one JSON object per run, for scripts to read.
            print(
                f"fevex recover: {len(sweep.recovered)} recovered, {len(sweep.skipped)} "
                f"skipped, {len(sweep.unclaimed)} unclaimed",
                file=sys.stderr,
                flush=True,
            )
            for run in leased:
                print(
                    f"fevex recover: run {run.id} ({run.kind} {run.name}) is running and its "
                    "lease has not expired: the process running it may still be working, or "
                    f"died within its lease ({app.lease_seconds:g} s for this app). Recover it "
                    "once the lease expires: run fevex recover again, or keep watching with "
                    "--interval.",
                    file=sys.stderr,
                    flush=True,
                )
        if args.interval is None:
            return 0
        time.sleep(args.interval)


async def _recovery_pass(
    app: Any, actor: dict[str, str], limit: int | None, watching: bool
) -> tuple[Any, list[Any]]:
    """One pass of ``recover``, and, unless ``watching``, the running runs it could not
    take because their lease is still live: right after a crash, the very run the user
    came for, which a bare ``0 recovered`` would leave unexplained."""
    sweep = await app.recover_expired_runs(actor=actor, limit=limit)
    if watching:
        return sweep, []
    seen = {run.id for run in sweep.recovered} | {run.run_id for run in sweep.skipped}
    seen |= set(sweep.unclaimed) | set(await app.run_store.expired_run_ids(limit=100))
    running = await app.list_runs(status="running", limit=100)
    return sweep, [run for run in running if run.id not in seen]


def _worker_command(args: argparse.Namespace) -> int:
    import asyncio
    import signal

    # SIGTERM while the app loads (a deploy stopping a worker that just started) ends the
    # worker cleanly: it holds no run yet. Once working, the loop's own handler takes over.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    _check_store(args)
    app = _load_app(args.app, args.store)
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


def _store_description(args: argparse.Namespace, app: Any) -> list[str]:
    from fevex.runtime.in_memory_run_store import InMemoryRunStore

    url = _store_url(args)
    if url:
        # A password in the URL stays out of the terminal and the logs.
        shown = _PASSWORD.sub(r"\1***@", url)
        lines = [f"runs on the store {shown}"]
    elif isinstance(app.run_store, InMemoryRunStore):
        lines = ["runs on memory:// (no --store, and FEVEX_RUN_STORE is not set)"]
    else:
        lines = [f"runs on the app's own store ({type(app.run_store).__name__})"]
    if isinstance(app.run_store, InMemoryRunStore):
        lines.append(
            "warning: an in-memory store's runs are this process's alone, so this worker "
            "never sees another process's runs; name the store they share with --store "
            "(sqlite:///runs.db, postgresql+psycopg://...) or FEVEX_RUN_STORE."
        )
    return lines


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


async def _work(
    app: Any,
    actor: dict[str, str],
    concurrency: int,
    interval: float,
    as_json: bool,
    early: list[int],
) -> None:
    """Claim and continue expired runs and due wake-ups on ``concurrency`` lanes until
    SIGINT or SIGTERM (``early`` holds one that came before the loop ran); a lane stops
    between claims, so the run it holds is finished first."""
    import asyncio
    import signal

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


async def work_lanes(
    app: Any,
    actor: dict[str, str],
    concurrency: int,
    interval: float,
    report: Callable[[dict[str, Any]], None],
    stop: Any,
) -> None:
    """What ``fevex worker`` (and ``fevex serve`` beside its server) does until the
    ``asyncio.Event`` ``stop`` is set: ``concurrency`` lanes, each claiming one expired run
    or due wake-up at a time and continuing it, looking again every ``interval`` seconds
    when idle. A failed pass is one line on stderr; the lanes go on."""
    import asyncio
    import contextlib

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

    await asyncio.gather(*(lane() for _ in range(concurrency)))


def _describe(error: Exception) -> str:
    return str(error) if isinstance(error, FevexError) else type(error).__name__


def _interval(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, not {text!r}") from None
    if not math.isfinite(seconds) or seconds < MIN_INTERVAL:
        raise argparse.ArgumentTypeError(
            f"must be at least {MIN_INTERVAL:g} seconds (each pass queries the store), not {text}"
        )
    return seconds


def _positive_int(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {text}")
    return number


def _app_reference(text: str) -> str:
    module_name, _, attribute = text.partition(":")
    if not module_name or not attribute:
        raise argparse.ArgumentTypeError(
            f"takes module:attribute (such as myservice.app:app), not {text!r}"
        )
    return text


def _add_store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store", metavar="URL", help="run-store URL (sets FEVEX_RUN_STORE before loading)"
    )
    parser.add_argument(
        "--create",
        action="store_true",
        help="create the store when it does not exist (a SQLite file); without it, a "
        "URL naming a missing file is refused, so that a misspelt path is not a new store",
    )


def _db_command(args: argparse.Namespace) -> int:
    url = _store_url(args)
    if not url:
        raise FevexConfigurationError(
            "INVALID_CONFIG", "Name the store with --store URL or FEVEX_RUN_STORE."
        )
    commands = _store_commands_for(args, url)
    if commands is None:
        known: dict[str, StoreCommands] = args.store_commands
        if not known:
            # No store plugin is loaded at all (fevex-sqlite left uninstalled): the URL's
            # is MISSING_PLUGIN, with the install that brings it.
            run_store_factory(url)
        match = _SCHEME.match(url)
        scheme = match["scheme"] if match else url
        managed = (
            f"the schemes {', '.join(sorted(known))}"
            if known
            else "no scheme: no loaded plugin manages a store's schema (fevex-sqlite and "
            "fevex-postgres do)"
        )
        raise FevexConfigurationError(
            "INVALID_ARGUMENT",
            f"fevex db manages stores of {managed}, not {scheme!r}."
            f"{did_you_mean(scheme.lower(), known)} (An in-memory store has no schema; "
            "another store's plugin must be installed to manage its schema.)",
            details={"scheme": scheme},
        )
    if args.db_action == "status":
        return commands.status(url)
    return commands.upgrade(url, args.create)


def _add_db_command(subparsers: Any, schemes: Sequence[str]) -> None:
    described = ", ".join(sorted(schemes)) or "none (fevex-sqlite and fevex-postgres add theirs)"
    parser = subparsers.add_parser(
        "db",
        help="Manage the schema of a run store (status, upgrade).",
        description=f"Manage the schema of a run store; installed plugins serve: {described}.",
    )
    actions = parser.add_subparsers(dest="db_action", metavar="{status,upgrade}", required=True)
    upgrade = actions.add_parser(
        "upgrade",
        help="Apply the schema migrations the store lacks (idempotent).",
        description="Apply the schema migrations the store lacks, in one transaction. "
        "Safe to run again and from several processes at once.",
    )
    status = actions.add_parser(
        "status",
        help="Print the store's schema version and the version this code needs.",
        description="Print the store's schema version and the version this code needs; "
        "exit status 0 when they match, 1 otherwise.",
    )
    for action in (upgrade, status):
        action.add_argument(
            "--store",
            metavar="URL",
            help=f"the store's URL (default: $FEVEX_RUN_STORE); schemes: {described}. "
            "A PostgreSQL password may come from PGPASSWORD or ~/.pgpass instead of the URL",
        )
        action.set_defaults(handler=_db_command, create=False)
    upgrade.add_argument(
        "--create", action="store_true", help="create the store if it does not exist (SQLite)"
    )


def _eval_command(args: argparse.Namespace) -> int:
    from fevex.evals.command import eval_command

    return eval_command(args, _load_app)


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, not {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, not {text}")
    return value


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, not {text!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, not {text}")
    return seconds


def _add_eval_command(registry: CommandRegistry) -> None:
    parser = registry.add_command(
        "eval",
        help="Run a dataset of cases against an agent or a workflow, score each case and "
        "compare with a baseline report: exit status 1 on a regression, 0 otherwise, 2 when "
        "the evaluation cannot run.",
    )
    parser.add_argument(
        "--app", required=True, type=_app_reference, help="module:attribute of your fevex app"
    )
    parser.add_argument(
        "--dataset",
        required=True,
        metavar="FILE",
        help="cases as JSON Lines (.jsonl, one {id, input, expected, metadata} per line) or "
        "JSON (.json: a list of cases, or {name, version, cases})",
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--agent", metavar="NAME", help="the agent each case runs")
    target.add_argument("--workflow", metavar="NAME", help="the workflow each case runs")
    parser.add_argument(
        "--baseline", metavar="FILE", help="a report written by --out before, to compare with"
    )
    parser.add_argument(
        "--out", metavar="FILE", help="write the report as canonical JSON (a new baseline)"
    )
    parser.add_argument("--html", metavar="FILE", help="write a self-contained HTML page")
    parser.add_argument(
        "--concurrency", type=_positive_int, default=1, help="cases run at once (default 1)"
    )
    parser.add_argument(
        "--scorers",
        metavar="MODULE:ATTRIBUTE",
        help="a list of scorers, or a function returning one (default: exact_output, "
        "tool_selection and forbidden_tools)",
    )
    parser.add_argument(
        "--tolerance",
        type=_tolerance,
        default=0.0,
        help="how far a score may drop before it is a regression (0 to 1, default 0)",
    )
    parser.add_argument("--suite", metavar="NAME", help="the suite's name (default: the dataset's)")
    parser.add_argument(
        "--target-version", metavar="TEXT", help="what is evaluated (a prompt or model revision)"
    )
    parser.add_argument("--timeout", type=_seconds, help="seconds each case's run may take")
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 also when any case does not pass"
    )
    parser.set_defaults(handler=_eval_command)


def _serve_command(args: argparse.Namespace) -> int:
    try:
        from fevex.http.serving import serve
    except ImportError as error:
        raise FevexConfigurationError("MISSING_EXTRA", str(error)) from None

    _check_store(args)
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


def _port(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number, not {text!r}") from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"must be from 0 to 65535, not {text}")
    return number


def _add_serve_command(registry: CommandRegistry) -> None:
    parser = registry.add_command(
        "serve",
        help="Serve the run protocol (fevex.http) with uvicorn, and continue runs whose "
        "process died and due wake-ups beside it, until SIGINT or SIGTERM.",
    )
    parser.add_argument(
        "--app",
        required=True,
        type=_app_reference,
        help="module:attribute of an app of fevex.http.create_http_app (its authenticate is "
        "used), of a fevex app (served to anonymous callers, on a loopback address only), "
        "or of a function returning either",
    )
    _add_store_arguments(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=8000, help="port to bind (default 8000)")
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
        type=_positive_int,
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
    parser.set_defaults(handler=_serve_command)


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
        type=_app_reference,
        help="module:attribute of your fevex app (or of a function returning it); recovery "
        "needs your agents, tools and models to continue a run",
    )
    _add_store_arguments(recover)
    recover.add_argument(
        "--limit", type=_positive_int, help="recover at most this many runs per pass"
    )
    recover.add_argument("--actor", default="fevex-recover", help="actor id recorded in events")
    recover.add_argument(
        "--interval",
        type=_interval,
        help=f"keep watching, one pass every INTERVAL seconds (at least {MIN_INTERVAL:g})",
    )
    recover.set_defaults(handler=_recover_command)
    worker = registry.add_command(
        "worker",
        help="Keep continuing runs whose lease expired and paused runs whose wake-up is due "
        "(a timer, the end of a child), until SIGINT or SIGTERM; several workers share the "
        "work and never claim one run twice.",
    )
    worker.add_argument(
        "--app", required=True, type=_app_reference, help="module:attribute of your fevex app"
    )
    _add_store_arguments(worker)
    worker.add_argument(
        "--concurrency", type=_positive_int, default=1, help="runs continued at once (default 1)"
    )
    worker.add_argument(
        "--interval",
        type=_interval,
        default=1.0,
        help=f"seconds between looks when idle (default 1, at least {MIN_INTERVAL:g})",
    )
    worker.add_argument("--actor", default="fevex-worker", help="actor id recorded in events")
    worker.add_argument("--json", action="store_true", help="one JSON object per line")
    worker.set_defaults(handler=_worker_command)
    _add_eval_command(registry)
    _add_serve_command(registry)
    add_plugin_commands(registry)
    # Present without store plugins too, so that it can say which plugin is missing.
    _add_db_command(subparsers, list(registry.store_commands))
    parser.set_defaults(store_commands=registry.store_commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
        if handler is None:
            parser.print_help()
            return 2
        return handler(args)
    except FevexError as error:
        print(f"fevex: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # Ctrl-C is how a user stops a watcher: one line and the shell's status for SIGINT.
        print("fevex: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of stdout went away (`fevex plugins | head`): nothing is wrong, and
        # nothing more can be written. Python's own flush at exit would fail again, so
        # stdout is pointed at /dev/null first; the status is the shell's for SIGPIPE.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    raise SystemExit(main())
