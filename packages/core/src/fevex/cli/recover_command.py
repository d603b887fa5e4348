"""``fevex recover``: one pass (or, with ``--interval``, a pass every so often) that
continues the running runs whose lease expired because their process died."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import TYPE_CHECKING

from fevex._internal.hosting.named_store import check_named_store
from fevex._internal.hosting.worker_lanes import describe_failure
from fevex.cli.app_option import app_reference, load_app
from fevex.cli.argument_types import MIN_INTERVAL, interval_seconds, positive_int
from fevex.cli.store_option import add_store_arguments, check_store
from fevex.plugins.commands import Command

if TYPE_CHECKING:
    from fevex.app import Fevex
    from fevex.runtime.records import AgentRun
    from fevex.runtime.recovery import RecoverySweep

__all__ = []


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--app",
        required=True,
        type=app_reference,
        help="module:attribute of your fevex app (or of a function returning it); recovery "
        "needs your agents, tools and models to continue a run",
    )
    add_store_arguments(parser)
    parser.add_argument(
        "--limit", type=positive_int, help="recover at most this many runs per pass"
    )
    parser.add_argument("--actor", default="fevex-recover", help="actor id recorded in events")
    parser.add_argument(
        "--interval",
        type=interval_seconds,
        help=f"keep watching, one pass every INTERVAL seconds (at least {MIN_INTERVAL:g})",
    )


def _recover(args: argparse.Namespace) -> int:
    check_store(args)
    app = load_app(args.app, args.store)
    check_named_store(args.store, app)
    actor = {"id": args.actor, "type": "service"}
    watching = args.interval is not None
    while True:
        try:
            sweep, leased = asyncio.run(_recovery_pass(app, actor, args.limit, watching))
        except Exception as error:
            # One failed pass (the store unreachable for a while) must not end a watcher.
            print(
                f"fevex: recovery pass failed: {describe_failure(error)}",
                file=sys.stderr,
                flush=True,
            )
            if args.interval is None:
                return 1
        else:
            _report(app, sweep, leased)
        if args.interval is None:
            return 0
        time.sleep(args.interval)


def _report(app: Fevex, sweep: RecoverySweep, leased: list[AgentRun]) -> None:
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


async def _recovery_pass(
    app: Fevex, actor: dict[str, str], limit: int | None, watching: bool
) -> tuple[RecoverySweep, list[AgentRun]]:
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


RECOVER = Command(
    name="recover",
    help="Find running runs whose lease expired (their worker died) and continue them.",
    handler=_recover,
    arguments=_arguments,
)
