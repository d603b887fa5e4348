"""The rules of a write: validity against the clock and the snapshot a swap writes.

Deadlines (a candidate's ``expires_at``, each source's, the operation's ``timeout``) are
checked again after every await before a swap; none is checked during one. A swap that has
started (:func:`fevex.kits.record_swap.swap_record`) decides the outcome: its ``True`` is a
receipt even when a deadline passed while it ran, its ``False`` means nothing was written,
and a store that fails during it, or answers anything else, leaves the outcome unknown
(``RECORD_COMMIT_UNCERTAIN``), never a rollback claimed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from fevex._ground.clock import utc_now
from fevex.errors import FevexRunError
from fevex.kits.publication.documents import SourceReference, instant
from fevex.kits.publication.record import Candidate, PublicationState
from fevex.runtime.record_store import check_record_swap

__all__ = ["Deadline", "check_sources_valid", "prepare_snapshot"]


class Deadline:
    """An operation's optional ``timeout`` (seconds on the loop's clock) and the validity
    of what it writes, checked with :meth:`check` after every await before the swap; used
    as ``async with`` around those awaits."""

    def __init__(self, timeout: float | None, operation: str) -> None:
        if timeout is not None and (
            not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0
        ):
            raise FevexRunError(
                "KIT_REQUEST_INVALID",
                "timeout must be a positive number of seconds or None.",
                details={"field": "timeout"},
            )
        loop = asyncio.get_running_loop()
        self.operation = operation
        self.timeout = timeout
        self.at = None if timeout is None else loop.time() + timeout
        self._scope = asyncio.timeout_at(self.at)
        self.candidate: Candidate | None = None
        self.sources: tuple[SourceReference, ...] = ()

    async def __aenter__(self) -> Deadline:
        # The timeout stops the awaits before the swap (callbacks, reads); never the swap,
        # which is awaited outside this scope.
        await self._scope.__aenter__()
        return self

    async def __aexit__(self, kind: Any, error: Any, traceback: Any) -> None:
        try:
            await self._scope.__aexit__(kind, error, traceback)
        except TimeoutError:
            raise timed_out(self.operation, self.timeout, "an await") from None

    def check(self, after: str) -> None:
        """``PUBLICATION_TIMEOUT``, ``PUBLICATION_SOURCE_EXPIRED`` or
        ``PUBLICATION_CANDIDATE_EXPIRED`` once its instant has passed; ``after`` names the
        await just finished, for the message."""
        if self.at is not None and asyncio.get_running_loop().time() >= self.at:
            raise timed_out(self.operation, self.timeout, after)
        now = utc_now()
        check_sources_valid(self.sources, now, after)
        candidate = self.candidate
        if candidate is not None and instant(candidate.expires_at) <= instant(now):
            raise FevexRunError(
                "PUBLICATION_CANDIDATE_EXPIRED",
                f"Candidate {candidate.id} expired at {candidate.expires_at} (checked after "
                f"{after}); nothing was written. Propose it again.",
                details={"candidate_id": candidate.id, "expires_at": candidate.expires_at},
            )


def timed_out(operation: str, timeout: float | None, after: str) -> FevexRunError:
    return FevexRunError(
        "PUBLICATION_TIMEOUT",
        f"{operation} ran past its timeout of {timeout} seconds ({after}); nothing was written.",
        details={"operation": operation, "timeout": timeout},
    )


def check_sources_valid(sources: Iterable[SourceReference], now: str, after: str) -> None:
    """``PUBLICATION_SOURCE_EXPIRED`` when a source's validity has ended by ``now``."""
    for source in sources:
        if source.expires_at is not None and instant(source.expires_at) <= instant(now):
            raise FevexRunError(
                "PUBLICATION_SOURCE_EXPIRED",
                f"Source {source.id} (version {source.version}) expired at {source.expires_at} "
                f"(checked after {after}); nothing was written.",
                details={"source": source.id, "expires_at": source.expires_at},
            )


def prepare_snapshot(state: PublicationState) -> dict[str, Any]:
    """The record's next JSON document, checked as every record store checks it (JSON,
    size) so that the swap cannot refuse it once started."""
    value = state.to_json()
    try:
        check_record_swap(state.namespace, "snapshot", state.revision, value)
    except FevexRunError as error:
        raise FevexRunError(
            "PUBLICATION_INVALID",
            f"The publication's record would not be stored: {error.message}",
            details={"problem": "too_large"},
        ) from error
    return value
