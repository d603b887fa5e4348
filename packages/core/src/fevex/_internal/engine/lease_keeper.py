"""Keeps a running run's lease alive, and stops the run the moment it cannot.

Renewal happens every third of the lease. A recoverable store error (busy, timed out) is
retried every tenth of the lease while the lease runs. A renewal that fails otherwise, or
that does not finish before the lease would expire (a blocked store), marks the lease
lost: the run stops its local work and writes nothing more under that lease; the store
keeps the run for recovery.

A renewal failing with anything but the store's own ``LEASE_LOST`` stops the run with a
``LEASE_LOST`` caused by that failure: the store's exception is its ``__cause__``, and its
type and code (never its text, which may hold what the store was given) are
``details["cause"]``.

A renewal the store refuses with ``RUN_CANCEL_REQUESTED`` (another process called
``cancel_run``) renews nothing: the keeper tells the run, which cancels itself within what
is left of its lease, and keeps its schedule; should the run still be running when the
lease has expired, the next renewal finds it lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from fevex.errors import FevexError, FevexRunError
from fevex.runtime.run_store import RunLease, RunStore


class LeaseKeeper:
    __slots__ = (
        "_handle",
        "_on_cancel_requested",
        "_on_lost",
        "_renewing",
        "_run_id",
        "_seconds",
        "_store",
        "lease",
    )

    def __init__(
        self,
        store: RunStore,
        run_id: str,
        lease: RunLease,
        seconds: float,
        on_lost: Callable[[FevexError], None],
        on_cancel_requested: Callable[[], None],
    ) -> None:
        self._store = store
        self._run_id = run_id
        self.lease = lease
        self._seconds = seconds
        self._on_lost = on_lost
        self._on_cancel_requested = on_cancel_requested
        self._renewing: asyncio.Task[None] | None = None
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._schedule()

    async def stop(self) -> None:
        """Stop renewing; a renewal in flight is cancelled and awaited, so no task of the
        run outlives it (and none is left holding the store's connection)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        renewing = self._renewing
        if renewing is not None:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing

    def _schedule(self, delay: float | None = None) -> None:
        # A timer rather than a task per run: most runs end before the first renewal.
        loop = asyncio.get_running_loop()
        self._handle = loop.call_later(
            self._seconds / 3 if delay is None else delay, self._renew_soon
        )

    def _renew_soon(self) -> None:
        self._handle = None
        self._renewing = asyncio.get_running_loop().create_task(self._renew())

    async def _renew(self) -> None:
        remaining = self.lease.expires_at - time.time()
        try:
            async with asyncio.timeout(max(remaining, 0.001)):
                self.lease = await self._store.renew_lease(self._run_id, self.lease, self._seconds)
        except FevexError as error:
            if error.code == "RUN_CANCEL_REQUESTED":
                # Not renewed: the rest of the lease is the run's time to cancel itself.
                self._on_cancel_requested()
                self._schedule()
                return
            if error.recoverable and error.code != "LEASE_LOST" and remaining > self._seconds / 10:
                # A busy or briefly failing store is not a lost lease: try again while the
                # lease still runs.
                self._schedule(self._seconds / 10)
                return
            # The store's own LEASE_LOST says it all; any other failure is the cause of one.
            self._on_lost(error if error.code == "LEASE_LOST" else self._lost(error, "failed"))
            return
        except TimeoutError as error:
            self._on_lost(self._lost(error, "did not finish before it expired"))
            return
        except Exception as error:
            self._on_lost(self._lost(error, "failed"))
            return
        finally:
            self._renewing = None
        self._schedule()

    def _lost(self, error: Exception, what: str) -> FevexRunError:
        """``LEASE_LOST`` caused by the renewal's ``error``, described by its type and, for
        a fevex error, its code: never its text, which may hold what the store was given."""
        cause = {"type": type(error).__name__}
        if isinstance(error, FevexError):
            cause["code"] = error.code
        named = cause.get("code", cause["type"])
        lost = FevexRunError(
            "LEASE_LOST",
            f"Renewing the lease of run {self._run_id} {what} ({named}).",
            category="store",
            details={"run_id": self._run_id, "cause": cause},
        )
        lost.__cause__ = error
        return lost
