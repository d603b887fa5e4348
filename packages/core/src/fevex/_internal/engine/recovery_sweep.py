"""One recovery pass: claim the expired runs a kernel can continue, one at a time, and
report what it did, left, or could not take; one wake-up pass: claim the paused runs whose
wake-up is due, and continue those whose wait is over. One bad run never stops a pass.

Each pass drives the runs it takes to their end or their next pause here; what they led to
is in the store, which is what the pass reports."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fevex._internal.engine.execution import Execution
from fevex._internal.engine.kernel import Kernel
from fevex.errors import FevexError, RunCancelledError
from fevex.runtime.records import TERMINAL_STATUSES, AgentRun
from fevex.runtime.recovery import RecoverySweep, SkippedRun, WakeSweep

logger = logging.getLogger("fevex")


async def sweep_expired_runs(
    kernel: Kernel, actor: Mapping[str, Any], limit: int | None
) -> RecoverySweep:
    store = kernel.store
    agents = kernel.names
    recovered: list[AgentRun] = []
    skipped: list[SkippedRun] = []
    handled: set[str] = set()
    while limit is None or len(recovered) + len(skipped) < limit:
        claimed = await store.claim_expired_run(kernel.owner, kernel.lease_seconds, names=agents)
        if claimed is None or claimed[0] in handled:
            # A run handled already came back because its lease ran out during this pass:
            # the next pass takes it.
            break
        run_id, lease = claimed
        handled.add(run_id)
        try:
            execution = await kernel.recover(run_id, actor, lease=lease)
        except Exception as error:
            if isinstance(error, FevexError) and error.code == "LEASE_LOST":
                continue  # as below: another worker took the run over
            run = await _settled_run(kernel, run_id)
            if run is not None and run.status in TERMINAL_STATUSES:
                if not isinstance(error, RunCancelledError):
                    logger.warning("recovery ended run %s as %s: %s", run_id, run.status, error)
                recovered.append(run)
            else:
                skipped.append(_skipped(run_id, error))
            continue
        try:
            await _drive(kernel, execution)
        except FevexError as error:
            if error.code == "LEASE_LOST":
                # Another worker took the run over (this pass stalled past its lease): the
                # run is that worker's to continue and to report, not this pass's.
                continue
            # Otherwise the run's outcome is in the store.
        except Exception:
            logger.warning("recovering run %s failed unexpectedly", run_id, exc_info=True)
        recovered.append(await kernel.get_run(run_id))
    try:
        # Plain reads, best-effort: the runs this pass took are done either way.
        mine = await store.expired_run_ids(limit=100, names=agents)
        every = await store.expired_run_ids(limit=100)
    except Exception:
        logger.warning("recovery could not list the expired runs it left", exc_info=True)
        mine = every = ()
    unclaimed = tuple(run_id for run_id in mine if run_id not in handled)
    if unclaimed:
        logger.warning(
            "recovery could not claim %d expired run(s), e.g. %s: a frozen worker may still "
            "hold them, or another sweep is taking them",
            len(unclaimed),
            unclaimed[0],
        )
    foreign = [run_id for run_id in every if run_id not in handled and run_id not in mine]
    if foreign:
        logger.warning(
            "recovery left %d expired run(s) of agents this app does not have, e.g. %s",
            len(foreign),
            foreign[0],
        )
        skipped += [await _left(kernel, run_id) for run_id in foreign]
    return RecoverySweep(tuple(recovered), tuple(skipped), unclaimed, len(handled))


async def _drive(kernel: Kernel, execution: Execution) -> None:
    """Drive ``execution`` to its end or its next pause; raises the run's error."""
    async for _ in kernel.events(execution):
        pass


async def _left(kernel: Kernel, run_id: str) -> SkippedRun:
    """Why this app leaves an expired run it cannot claim, as the run's kind says when asked
    to continue it: its definition is missing, or only an app call continues it (a durable
    task); ``AGENT_NOT_FOUND`` when the run cannot even be read."""
    try:
        run = await kernel.store.get_run(run_id)
        if run is not None:
            kernel.kind(run)
    except FevexError as error:
        return SkippedRun(run_id, error.code, error.message)
    except Exception:
        logger.warning("recovery could not read the expired run %s", run_id, exc_info=True)
    return SkippedRun(run_id, "AGENT_NOT_FOUND", "This app has no definition of this run.")


async def _settled_run(kernel: Kernel, run_id: str) -> AgentRun | None:
    try:
        return await kernel.store.get_run(run_id)
    except Exception:
        return None


def _skipped(run_id: str, error: Exception) -> SkippedRun:
    if isinstance(error, FevexError):
        logger.warning("recovery skipped run %s: %s", run_id, error)
        return SkippedRun(run_id, error.code, error.message)
    logger.warning("recovery skipped run %s", run_id, exc_info=True)
    return SkippedRun(
        run_id, "UNEXPECTED_ERROR", f"Continuing the run failed: {type(error).__name__}."
    )


async def wake_due_runs(kernel: Kernel, limit: int | None) -> WakeSweep:
    """Claim the paused runs whose wake-up is due (a timer, the end of a child) among those
    the kernel can continue, one at a time, and continue each whose wait is over."""
    woken: list[AgentRun] = []
    skipped: list[SkippedRun] = []
    handled: set[str] = set()
    while limit is None or len(handled) < limit:
        claimed = await kernel.store.claim_due_run(
            kernel.owner, kernel.lease_seconds, names=kernel.names
        )
        if claimed is None or claimed[0] in handled:
            break
        run_id, lease = claimed
        handled.add(run_id)
        try:
            execution = await kernel.wake(run_id, lease)
            if execution is None:
                continue  # early: paused again until its wake-up is due
            # Paused again or ended, the run's outcome is in the store.
            await _drive(kernel, execution)
        except FevexError as error:
            if error.code == "LEASE_LOST":
                continue
            # Ended or paused again, the run's outcome is in the store; otherwise it was left.
            run = await _settled_run(kernel, run_id)
            if run is None or run.status == "running":
                skipped.append(_skipped(run_id, error))
                continue
        except Exception as error:
            skipped.append(_skipped(run_id, error))
            continue
        woken.append(await kernel.get_run(run_id))
    return WakeSweep(tuple(woken), tuple(skipped), len(handled))
