"""The sessions a store last read or wrote, so that a turn on a long session neither reads
nor rebuilds its whole history again.

A snapshot stands for the stored row only while the row keeps its revision: every change of
a session, by any process, raises its revision, so one revision names one content. A
snapshot is kept only once the transaction that read or wrote it has committed.
"""

from __future__ import annotations

import threading
from typing import Any

from fevex.runtime import ExecutionCommit, ExecutionCreate, Session, changed_session

__all__ = ["SessionSnapshots"]


class SessionSnapshots:
    """The last known snapshot of at most ``size`` sessions, the oldest forgotten first."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._known: dict[str, Session] = {}
        self._lock = threading.Lock()

    def get(self, session_id: str) -> Session | None:
        with self._lock:
            return self._known.get(session_id)

    def keep(self, session: Session) -> None:
        with self._lock:
            self._known.pop(session.id, None)
            self._known[session.id] = session
            while len(self._known) > self._size:
                del self._known[next(iter(self._known))]

    def forget(self, session_id: str) -> None:
        with self._lock:
            self._known.pop(session_id, None)

    def reserved(self, create: ExecutionCreate) -> None:
        """``create`` committed: its session is held by its run, one revision on."""
        run = create.run
        if create.session_revision is None:
            self.keep(Session(run.session_id, run.created_at, run.created_at, (), None, run.id, 1))
            return
        known = self.get(run.session_id)
        # The create was checked against session_revision: the row had that revision.
        if known is None or known.revision != create.session_revision:
            self.forget(run.session_id)
            return
        self.keep(
            changed_session(
                known, active_run_id=run.id, revision=known.revision + 1, updated_at=run.created_at
            )
        )

    def ended(self, session_id: str, revision: int, commit: ExecutionCommit) -> None:
        """``commit`` committed the end of a turn, which left the session at ``revision``."""
        known = self.get(session_id)
        if known is None or known.revision != revision - 1:
            self.forget(session_id)
            return
        changes: dict[str, Any] = {"revision": revision, "updated_at": commit.updated_at}
        if commit.release_session:
            changes["active_run_id"] = None
        self.keep(changed_session(known, tuple(commit.history or ()), **changes))
