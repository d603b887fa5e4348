"""The one path every run event takes: numbered, committed to the store, then observed.

The engine yields each committed event to its consumer before observers see it, so the
order is store, consumer, observers. Observers are best-effort: their exceptions and
failed coroutines are logged and never reach the run.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Sequence
from typing import Any

from fevex._internal.clock import new_id, utc_now
from fevex.errors import FevexError
from fevex.events import RunEvent
from fevex.runtime.records import AgentRun
from fevex.runtime.run_store import ExecutionCommit, RunLease, RunStore

logger = logging.getLogger("fevex")

EventObserver = Callable[[RunEvent], Any]


class EventSink:
    __slots__ = (
        "_background",
        "lease",
        "lost",
        "observers",
        "revision",
        "run",
        "sequence",
        "store",
    )

    def __init__(
        self,
        store: RunStore,
        run: AgentRun,
        observers: Sequence[EventObserver],
        sequence: int = 0,
    ) -> None:
        self.store = store
        self.run = run
        self.lease: RunLease | None = None
        # Set when the lease is lost: from then on this process writes nothing for the run.
        self.lost: FevexError | None = None
        self.revision = run.revision
        self.observers = observers
        self.sequence = sequence
        self._background: set[asyncio.Future[Any]] = set()

    def event(self, type: str, payload: dict[str, Any], occurred_at: str | None = None) -> RunEvent:
        self.sequence += 1
        return RunEvent(
            new_id("evt"),
            self.run.id,
            self.sequence,
            type,
            occurred_at or utc_now(),
            payload,
        )

    async def emit(
        self,
        type: str,
        payload: dict[str, Any],
        *,
        checkpoint: dict[str, Any] | None = None,
        history: tuple[dict[str, Any], ...] | None = None,
        release_session: bool = False,
        release_lease: bool = False,
        **run_changes: Any,
    ) -> RunEvent:
        """Commit one event under the run's lease with the run's next revision, with any
        run field changes and a new checkpoint."""
        assert self.lease is not None, "a run is written only under its lease"
        if self.lost is not None:
            raise self.lost
        now = utc_now()
        event = self.event(type, payload, now)
        revision = self.revision + 1
        try:
            await self.store.commit_execution(
                ExecutionCommit(
                    self.run.id,
                    revision,
                    now,
                    self.lease,
                    (event,),
                    run_changes or None,
                    checkpoint,
                    history,
                    release_session,
                    release_lease,
                )
            )
        except BaseException as error:
            self.sequence -= 1
            if isinstance(error, FevexError) and error.code == "LEASE_LOST":
                self.lost = error
            raise
        self.revision = revision
        return event

    def observe(self, event: RunEvent) -> None:
        for observer in self.observers:
            try:
                result = observer(event)
            except Exception:
                logger.warning("on_event observer %r failed", observer, exc_info=True)
                continue
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                self._background.add(task)
                task.add_done_callback(self._settled)

    def _settled(self, task: asyncio.Future[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("on_event observer failed", exc_info=task.exception())
