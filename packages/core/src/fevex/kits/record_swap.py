"""A kit's compare-and-swap of its record (an agent family's, a publication's), awaited to
its receipt.

Only ``True`` is a receipt and only ``False`` a refusal (the record contract, see
:mod:`fevex.runtime.record_store`); any other answer (``1``, ``"yes"``, a dict, ``None``)
and a store failing during the swap leave the outcome unknown: ``RECORD_COMMIT_UNCERTAIN``,
never a success or a rollback claimed. A swap that has started is awaited to its answer
whatever happens meanwhile: a cancellation is raised once the store has answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from typing import Any

from fevex.errors import FevexError, FevexRunError
from fevex.runtime.record_store import RecordStore

__all__ = ["swap_record"]


async def swap_record(
    store: RecordStore,
    namespace: str,
    key: str,
    expected_revision: int,
    value: Mapping[str, Any],
) -> bool:
    """``store.compare_and_swap(...)`` awaited to its receipt: ``True`` written, ``False``
    refused (another writer came first); neither a cancellation nor a deadline abandons a
    swap under way. A cancellation that came meanwhile is raised once the store has
    answered (read the record to learn what it said)."""
    commit: asyncio.Future[bool] = asyncio.ensure_future(
        _receipt(store.compare_and_swap(namespace, key, expected_revision, value))
    )
    cancelled: asyncio.CancelledError | None = None
    while not commit.done():
        try:
            await asyncio.shield(commit)
        except asyncio.CancelledError as error:
            cancelled = error
        except Exception:
            break  # the commit's own failure, raised by result() below
    if cancelled is not None:
        if not commit.cancelled():
            commit.exception()  # retrieved: the caller stopped waiting for it
        raise cancelled
    return commit.result()


async def _receipt(write: Awaitable[Any]) -> bool:
    try:
        written = await write
    except asyncio.CancelledError:
        raise
    except Exception as error:
        code = error.code if isinstance(error, FevexError) else type(error).__name__
        raise FevexRunError(
            "RECORD_COMMIT_UNCERTAIN",
            f"The record store failed during the commit ({code}); whether it was written is "
            "unknown: read the record before trying again.",
            details={"cause": code},
        ) from error
    if not isinstance(written, bool):
        raise FevexRunError(
            "RECORD_COMMIT_UNCERTAIN",
            f"The record store answered {type(written).__name__} to compare_and_swap, not a "
            "receipt (True or False); whether it was written is unknown: read the record "
            "before trying again.",
            details={"cause": type(written).__name__},
        )
    return written
