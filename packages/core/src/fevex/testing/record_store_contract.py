"""The record-store contract as checks any :class:`~fevex.runtime.RecordStore` can be run
against::

    from fevex.testing import check_record_store

    async def test_the_store_keeps_the_record_contract(tmp_path):
        await check_record_store(lambda: open_acme_records(f"acme:///{tmp_path}/records"))

``factory`` takes no argument and returns a store, or an awaitable of one; each call must
give a new handle on the same storage, and every check closes the handle it opened. A store
that lives only in memory passes ``lambda: store``, whose ``close`` keeps its records.
Every check writes in a namespace of its own, so the storage may hold other records.

A store passes when a record reads back as written (also through a handle opened after
the writer's was closed), at revision 1 and one more per swap;
a swap against any other revision is refused with ``False`` and writes nothing; what a
caller keeps (the value it passed, the value it read) is a copy; records of one namespace
never meet another's; text of any script is kept exactly, up to
:data:`~fevex.runtime.MAX_RECORD_CHARS` characters of JSON; and arguments no store can
keep are refused with ``INVALID_ARGUMENT`` and the message of the shared rules
(:func:`~fevex.runtime.check_record_swap`), the first bad argument named first, before the
storage is touched.
"""

from __future__ import annotations

import copy
import inspect
import math
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from fevex.errors import FevexRunError
from fevex.runtime.record_store import MAX_RECORD_CHARS, RecordStore, StoredRecord

__all__ = ["RecordStoreContractError", "RecordStoreFactory", "check_record_store"]

RecordStoreFactory = Callable[[], RecordStore | Awaitable[RecordStore]]
_Check = Callable[[RecordStore, str], Awaitable[None]]


class RecordStoreContractError(AssertionError):
    """Names each check a store failed."""


async def check_record_store(factory: RecordStoreFactory) -> list[str]:
    """Run every check on a store of ``factory`` (a new handle per check, closed after it);
    raise :class:`RecordStoreContractError` naming each failed one, or return the names of
    the checks that passed."""
    passed: list[str] = []
    failures: dict[str, BaseException] = {}
    for check in _CHECKS:
        namespace = f"contract-{uuid.uuid4().hex}"
        try:
            store = await _open(factory)
            try:
                await check(store, namespace)
            finally:
                await store.close()
        except Exception as error:
            failures[check.__name__] = error
        else:
            passed.append(check.__name__)
    try:
        await survives_reopening(factory, f"contract-{uuid.uuid4().hex}")
    except Exception as error:
        failures[survives_reopening.__name__] = error
    else:
        passed.append(survives_reopening.__name__)
    if failures:
        described = "; ".join(f"{name}: {error!r}" for name, error in failures.items())
        raise RecordStoreContractError(f"The record store failed: {described}")
    return passed


async def _open(factory: RecordStoreFactory) -> RecordStore:
    opened = factory()
    store: RecordStore = await opened if inspect.isawaitable(opened) else opened
    return store


async def creates_and_reads_back(store: RecordStore, namespace: str) -> None:
    assert await store.read(namespace, "family") is None
    value = {"versions": [{"id": "v1", "state": {"tone": "calm"}}], "active_id": None}
    assert await store.compare_and_swap(namespace, "family", 0, value) is True
    record = await store.read(namespace, "family")
    assert record is not None
    assert (record.namespace, record.key, record.revision) == (namespace, "family", 1), record
    assert record.value == value, record.value
    assert record.updated_at.endswith("Z"), record.updated_at
    datetime.fromisoformat(record.updated_at)


async def refuses_a_stale_revision(store: RecordStore, namespace: str) -> None:
    assert await store.compare_and_swap(namespace, "doc", 0, {"n": 1}) is True
    for stale in (0, 2, 7):
        assert await store.compare_and_swap(namespace, "doc", stale, {"n": stale}) is False
    record = await store.read(namespace, "doc")
    _expect(record, 1, {"n": 1})
    # A key that does not exist is at revision 0: a swap at any other is refused.
    assert await store.compare_and_swap(namespace, "absent", 1, {"n": 1}) is False
    assert await store.read(namespace, "absent") is None


async def counts_revisions(store: RecordStore, namespace: str) -> None:
    for revision in range(5):
        assert await store.compare_and_swap(namespace, "seq", revision, {"n": revision + 1})
        record = await store.read(namespace, "seq")
        assert record is not None
        assert (record.revision, record.value) == (revision + 1, {"n": revision + 1}), record
    assert await store.compare_and_swap(namespace, "seq", 4, {"n": "late"}) is False
    record = await store.read(namespace, "seq")
    _expect(record, 5, {"n": 5})


async def keeps_copies(store: RecordStore, namespace: str) -> None:
    value: dict[str, Any] = {"items": [{"name": "a"}], "meta": {"count": 1}}
    kept = copy.deepcopy(value)
    assert await store.compare_and_swap(namespace, "copy", 0, value)
    value["items"][0]["name"] = "changed after the swap"
    value["meta"]["extra"] = True
    first = await store.read(namespace, "copy")
    _expect(first, 1, kept)
    assert first is not None
    first.value["items"].append({"name": "changed after the read"})
    first.value["meta"]["count"] = 99
    second = await store.read(namespace, "copy")
    _expect(second, 1, kept)
    assert second is not None
    assert second.value is not first.value


async def keeps_namespaces_apart(store: RecordStore, namespace: str) -> None:
    other = f"{namespace}-other"
    assert await store.compare_and_swap(namespace, "shared", 0, {"owner": "one"})
    assert await store.compare_and_swap(other, "shared", 0, {"owner": "two"})
    assert await store.compare_and_swap(other, "shared", 1, {"owner": "two again"})
    mine, theirs = await store.read(namespace, "shared"), await store.read(other, "shared")
    _expect(mine, 1, {"owner": "one"})
    _expect(theirs, 2, {"owner": "two again"})
    # Namespace and key are two values, never one joined text.
    assert await store.compare_and_swap(f"{namespace}:a", "b", 0, {"split": 1})
    assert await store.read(namespace, "a:b") is None
    assert await store.compare_and_swap(namespace, "a:b", 0, {"split": 2})
    joined = await store.read(f"{namespace}:a", "b")
    _expect(joined, 1, {"split": 1})


async def keeps_text_exactly(store: RecordStore, namespace: str) -> None:
    text = "Ünïcödé résumé 東京 — émoji 🎉 'single' \"double\" \\ back\nnew line\ttab"
    key = f"clé-{text[:12]}"
    value = {text: [text, {"nested": text}], "n": -1.5e300, "big": 2**62, "t": True}
    assert await store.compare_and_swap(f"{namespace}-名前", key, 0, value)
    record = await store.read(f"{namespace}-名前", key)
    _expect(record, 1, value)
    assert record is not None
    assert (record.namespace, record.key) == (f"{namespace}-名前", key), record


async def keeps_the_largest_record(store: RecordStore, namespace: str) -> None:
    # Compact JSON of {"text":"..."}: 11 characters around the text.
    largest = {"text": "é" * (MAX_RECORD_CHARS - 11)}
    assert await store.compare_and_swap(namespace, "large", 0, largest)
    record = await store.read(namespace, "large")
    _expect(record, 1, largest)
    too_large = {"text": "é" * (MAX_RECORD_CHARS - 10)}
    await _refused(store.compare_and_swap(namespace, "large", 1, too_large), "is limited to")
    _expect(await store.read(namespace, "large"), 1, largest)


async def refuses_arguments_no_store_can_keep(store: RecordStore, namespace: str) -> None:
    # Each with the words of the rule that refuses it: the first bad argument, in the order
    # of the arguments, whatever else is wrong after it.
    swaps: list[tuple[tuple[Any, Any, Any, Any], str]] = [
        ((None, "k", 0, {}), "namespace must be text"),
        (("n" * 201, "k", -1, None), "namespace must be text"),
        ((f"{namespace}\x00", "k", 0, {}), "cannot hold NUL"),
        ((f"{namespace}\ud800", "k", 0, {}), "cannot hold NUL"),
        ((namespace, "", 0, {}), "key must be non-empty"),
        ((namespace, None, -1, []), "key must be non-empty"),
        ((namespace, "k" * 201, 0, {}), "key must be non-empty"),
        ((namespace, "k\x00", 0, {}), "cannot hold NUL"),
        ((namespace, "k", -1, []), "expected revision"),
        ((namespace, "k", True, {}), "expected revision"),
        ((namespace, "k", 1.0, {}), "expected revision"),
        ((namespace, "k", "0", {}), "expected revision"),
        ((namespace, "k", 0, ["a list"]), "must be a mapping"),
        ((namespace, "k", 0, None), "must be a mapping"),
        ((namespace, "k", 0, {"x": math.nan}), "cannot be stored"),
        ((namespace, "k", 0, {"x": {1, 2}}), "cannot be stored"),
        ((namespace, "k", 0, {"x": object()}), "cannot be stored"),
        ((namespace, "k", 0, {1: "not a text key"}), "cannot be stored"),
        ((namespace, "k", 0, {"x": "NUL \x00"}), "cannot be stored"),
        ((namespace, "k", 0, {"lone \udcff": 1}), "cannot be stored"),
    ]
    for arguments, words in swaps:
        await _refused(store.compare_and_swap(*arguments), words, arguments)
    reads: list[tuple[tuple[Any, Any], str]] = [
        ((None, "k"), "namespace must be text"),
        ((namespace, ""), "key must be non-empty"),
        ((namespace, 7), "key must be non-empty"),
        ((namespace, "k\ud800"), "cannot hold NUL"),
    ]
    for read, words in reads:
        await _refused(store.read(*read), words, read)
    assert await store.read(namespace, "k") is None


async def survives_reopening(factory: RecordStoreFactory, namespace: str) -> None:
    writer = await _open(factory)
    try:
        assert await writer.compare_and_swap(namespace, "kept", 0, {"n": 1})
        assert await writer.compare_and_swap(namespace, "kept", 1, {"n": 2})
    finally:
        await writer.close()
    reader = await _open(factory)
    try:
        record = await reader.read(namespace, "kept")
        _expect(record, 2, {"n": 2})
        assert await reader.compare_and_swap(namespace, "kept", 1, {"n": "stale"}) is False
    finally:
        await reader.close()


def _expect(record: StoredRecord | None, revision: int, value: dict[str, Any]) -> None:
    if record is None:
        raise AssertionError(f"no record where revision {revision} was expected")
    if (record.revision, record.value) != (revision, value):
        raise AssertionError(f"revision {record.revision} instead of {revision}, or another value")


async def _refused(attempt: Awaitable[Any], words: str, what: object = None) -> None:
    try:
        await attempt
    except FevexRunError as error:
        if error.code != "INVALID_ARGUMENT" or words not in str(error):
            raise AssertionError(f"{what!r}: {error!r}, not INVALID_ARGUMENT {words!r}") from error
    else:
        raise AssertionError(f"{what!r} was not refused")


_CHECKS: tuple[_Check, ...] = (
    creates_and_reads_back,
    refuses_a_stale_revision,
    counts_revisions,
    keeps_copies,
    keeps_namespaces_apart,
    keeps_text_exactly,
    keeps_the_largest_record,
    refuses_arguments_no_store_can_keep,
)
