"""The memory-store contract as checks any store can be run against.

A store passes when it keeps and finds memories by their words, never lets one namespace
see or delete another's, honours ``limit``, treats query text as words (never as search
syntax), and keeps what it was given exactly.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from fevex.knowledge.memory_store import MemoryStore

__all__ = ["MemoryStoreContractError", "check_memory_store"]


class MemoryStoreContractError(AssertionError):
    """Names each check a store failed."""


async def check_memory_store(store: MemoryStore) -> list[str]:
    """Run every check on ``store`` (in namespaces of their own, so a store holding other
    memories can be checked); raise :class:`MemoryStoreContractError` naming each failed
    one, or return the names of the checks that passed."""
    passed: list[str] = []
    failures: dict[str, BaseException] = {}
    for check in _CHECKS:
        namespace = f"contract-{uuid.uuid4().hex}"
        try:
            await check(store, namespace)
        except Exception as error:
            failures[check.__name__] = error
        else:
            passed.append(check.__name__)
    if failures:
        described = "; ".join(f"{name}: {error!r}" for name, error in failures.items())
        raise MemoryStoreContractError(f"The memory store failed: {described}")
    return passed


async def finds_a_memory_by_its_words(store: MemoryStore, namespace: str) -> None:
    kept = await store.add(namespace, "The customer's favourite colour is teal.")
    assert kept.id, kept
    assert kept.namespace == namespace, kept
    found = await store.search(namespace, "Which colour do they like?")
    assert [memory.id for memory in found] == [kept.id], found
    assert found[0].content == "The customer's favourite colour is teal."
    assert not any(memory.id == kept.id for memory in await store.search(namespace, "zebra"))


async def does_not_find_what_no_word_matches(store: MemoryStore, namespace: str) -> None:
    await store.add(namespace, "Invoices are sent on the first Monday.")
    assert list(await store.search(namespace, "zebra giraffe")) == []
    assert list(await store.search(namespace, "")) == []
    assert list(await store.search(namespace, "a an ?")) == []


async def keeps_namespaces_apart(store: MemoryStore, namespace: str) -> None:
    other = f"{namespace}-other"
    mine = await store.add(namespace, "Tenant one uses the blue plan.")
    theirs = await store.add(other, "Tenant two uses the blue plan.")
    assert [m.id for m in await store.search(namespace, "blue plan")] == [mine.id]
    assert [m.id for m in await store.search(other, "blue plan")] == [theirs.id]
    assert await store.delete(namespace, theirs.id) is False
    assert [m.id for m in await store.search(other, "blue plan")] == [theirs.id]


async def deletes_a_memory(store: MemoryStore, namespace: str) -> None:
    kept = await store.add(namespace, "Delivery address is Harbour Street.")
    assert await store.delete(namespace, kept.id) is True
    assert list(await store.search(namespace, "harbour street")) == []
    assert await store.delete(namespace, kept.id) is False


async def honours_the_limit_and_ranks_more_matches_first(
    store: MemoryStore, namespace: str
) -> None:
    for number in range(5):
        await store.add(namespace, f"Order {number} shipped by courier.")
    best = await store.add(namespace, "Order refund approved; courier collected the parcel.")
    found = await store.search(namespace, "refund courier parcel", limit=3)
    assert len(found) == 3, found
    assert found[0].id == best.id, found


async def reads_query_text_as_words_only(store: MemoryStore, namespace: str) -> None:
    kept = await store.add(namespace, 'He said "refund" OR NOT; see NEAR(order) & more*')
    hostile = [
        '"refund',
        "refund OR",
        "NEAR(order",
        "refund & | ! :* ( ) ' \\ ; -- DROP TABLE",
        "content:refund",
        "*",
        "\x00refund",
    ]
    for query in hostile:
        found = await store.search(namespace, query)
        assert all(memory.namespace == namespace for memory in found), (query, found)
    assert kept.id in [m.id for m in await store.search(namespace, '"refund" OR')]


async def keeps_content_exactly(store: MemoryStore, namespace: str) -> None:
    text = "Ünïcödé résumé 東京 — émoji 🎉 and 'quotes' \"double\" \\ back"
    kept = await store.add(namespace, text, metadata={"source": "contract", "n": 1})
    (found,) = await store.search(namespace, "résumé")
    assert found.content == text, found
    assert dict(found.metadata) == {"source": "contract", "n": 1}, found.metadata
    assert found.id == kept.id


_CHECKS: tuple[Callable[[MemoryStore, str], Awaitable[Any]], ...] = (
    finds_a_memory_by_its_words,
    does_not_find_what_no_word_matches,
    keeps_namespaces_apart,
    deletes_a_memory,
    honours_the_limit_and_ranks_more_matches_first,
    reads_query_text_as_words_only,
    keeps_content_exactly,
)
