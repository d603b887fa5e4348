"""The lanes of ``fevex worker``, which ``fevex serve`` also runs beside its server: each
lane claims one expired run or due wake-up at a time and continues it."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from fevex.errors import FevexError
from fevex.runtime.recovery import RecoverySweep, WakeSweep

__all__ = ["SweepingApp", "describe_failure", "work_lanes"]


class SweepingApp(Protocol):
    """What the lanes need of a fevex app: its recovery and wake-up passes."""

    async def recover_expired_runs(
        self, *, actor: Mapping[str, Any], limit: int | None = None
    ) -> RecoverySweep: ...

    async def wake_due_runs(self, *, limit: int | None = None) -> WakeSweep: ...


async def work_lanes(
    app: SweepingApp,
    actor: dict[str, str],
    concurrency: int,
    interval: float,
    report: Callable[[dict[str, Any]], None],
    stop: asyncio.Event,
) -> None:
    """What ``fevex worker`` (and ``fevex serve`` beside its server) does until the
    ``asyncio.Event`` ``stop`` is set: ``concurrency`` lanes, each claiming one expired run
    or due wake-up at a time and continuing it, looking again every ``interval`` seconds
    when idle. A failed pass is one line on stderr; the lanes go on."""
    # A run left for another worker is reported once, not on every pass.
    reported_skips: set[tuple[str, str]] = set()

    async def lane() -> None:
        while not stop.is_set():
            busy = False
            try:
                sweep = await app.recover_expired_runs(actor=actor, limit=1)
            except Exception as error:
                print(
                    f"fevex: recovery failed: {describe_failure(error)}",
                    file=sys.stderr,
                    flush=True,
                )
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
                print(
                    f"fevex: wake-up failed: {describe_failure(error)}",
                    file=sys.stderr,
                    flush=True,
                )
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


def describe_failure(error: Exception) -> str:
    """A failed pass in one line: a fevex error's message, written for the user, or the
    type of any other error."""
    return str(error) if isinstance(error, FevexError) else type(error).__name__
