"""fevex.testing.check_record_store: what it passes, and that it names what a broken store
gets wrong."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from fevex.runtime import InMemoryRecordStore, StoredRecord
from fevex.testing import RecordStoreContractError, check_record_store

pytestmark = pytest.mark.anyio


async def test_the_in_memory_store_passes() -> None:
    store = InMemoryRecordStore()
    passed = await check_record_store(lambda: store)
    assert len(passed) == 9


class IgnoresRevisions(InMemoryRecordStore):
    """Writes whatever revision it is given: last writer wins."""

    async def compare_and_swap(
        self, namespace: str, key: str, expected_revision: int, value: Mapping[str, Any]
    ) -> bool:
        found = await self.read(namespace, key)
        return await super().compare_and_swap(namespace, key, found.revision if found else 0, value)


class SharesItsValue(InMemoryRecordStore):
    """Keeps the caller's object and hands it out again."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: dict[tuple[str, str], StoredRecord] = {}

    async def read(self, namespace: str, key: str) -> StoredRecord | None:
        return self.kept.get((namespace, key)) or await super().read(namespace, key)

    async def compare_and_swap(
        self, namespace: str, key: str, expected_revision: int, value: Mapping[str, Any]
    ) -> bool:
        if not await super().compare_and_swap(namespace, key, expected_revision, value):
            return False
        stored = await super().read(namespace, key)
        assert stored is not None
        self.kept[(namespace, key)] = StoredRecord(
            namespace,
            key,
            stored.revision,
            value,
            stored.updated_at,  # type: ignore[arg-type]
        )
        return True


class ForgetsOnClose(InMemoryRecordStore):
    pass


async def test_a_store_that_ignores_revisions_fails_by_name() -> None:
    store = IgnoresRevisions()
    with pytest.raises(RecordStoreContractError) as failed:
        await check_record_store(lambda: store)
    assert "refuses_a_stale_revision" in str(failed.value)
    assert "counts_revisions" in str(failed.value)
    assert "creates_and_reads_back" not in str(failed.value)


async def test_a_store_that_shares_the_callers_value_fails_by_name() -> None:
    store = SharesItsValue()
    with pytest.raises(RecordStoreContractError) as failed:
        await check_record_store(lambda: store)
    assert "keeps_copies" in str(failed.value)


async def test_a_store_that_forgets_on_reopening_fails_by_name() -> None:
    with pytest.raises(RecordStoreContractError) as failed:
        await check_record_store(ForgetsOnClose)
    assert "survives_reopening" in str(failed.value)
