"""The memory-store contract as checks any store can be run against.

A store passes when it keeps and finds memories by their words, never lets one namespace
see or delete another's (the default namespace included), honours ``limit``, treats query
text as words (never as search syntax), keeps what it was given exactly, and refuses text
no store can keep with ``INVALID_ARGUMENT``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from fevex.errors import FevexError
from fevex.knowledge import DEFAULT_NAMESPACE, MemoryStore
from fevex.runtime import FORMER_DEFAULT_NAMESPACE

__all__ = ["MemoryStoreContractError", "check_memory_store"]


class MemoryStoreContractError(AssertionError):
    """Names each check a store failed."""


async def check_memory_store(store: MemoryStore) -> list[str]:
    """Run every check on ``store`` (in namespaces of their own, so a store holding other
    memories can be checked; the one check that writes to ``DEFAULT_NAMESPACE`` deletes
    what it wrote); raise :class:`MemoryStoreContractError` naming each failed
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


async def keeps_the_default_namespace_to_itself(store: MemoryStore, namespace: str) -> None:
    # A word of this check only, so that memories already in the shared namespace match
    # nothing here.
    word = f"sharedcheck{namespace.rpartition('-')[2]}"
    kept = await store.add(DEFAULT_NAMESPACE, f"A note for runs without a namespace: {word}.")
    try:
        assert kept.namespace == DEFAULT_NAMESPACE, kept
        assert [m.id for m in await store.search(DEFAULT_NAMESPACE, word)] == [kept.id]
        # The name the default namespace had before is an ordinary namespace now.
        assert list(await store.search(FORMER_DEFAULT_NAMESPACE, word)) == []
        assert await store.delete(FORMER_DEFAULT_NAMESPACE, kept.id) is False
        theirs = await store.add(FORMER_DEFAULT_NAMESPACE, f"A tenant named default: {word}.")
        assert [m.id for m in await store.search(DEFAULT_NAMESPACE, word)] == [kept.id]
        assert await store.delete(FORMER_DEFAULT_NAMESPACE, theirs.id) is True
    finally:
        await store.delete(DEFAULT_NAMESPACE, kept.id)


async def refuses_text_no_store_can_keep(store: MemoryStore, namespace: str) -> None:
    for bad in ("lone \ud800 surrogate", "a NUL \x00 inside", "\udcff"):
        attempts: dict[str, Callable[[], Awaitable[Any]]] = {
            "content": partial(store.add, namespace, f"Unstorable {bad} text"),
            "namespace": partial(store.add, f"{namespace}{bad}", "Unstorable namespace"),
            "metadata value": partial(
                store.add, namespace, "Unstorable metadata", metadata={"note": [{"deep": bad}]}
            ),
            "metadata key": partial(store.add, namespace, "Unstorable key", metadata={bad: 1}),
            "search namespace": partial(store.search, f"{namespace}{bad}", "unstorable"),
            "delete namespace": partial(store.delete, f"{namespace}{bad}", "mem_x"),
            "delete id": partial(store.delete, namespace, f"mem_{bad}"),
        }
        for what, attempt in attempts.items():
            code = await _code_of(attempt)
            assert code == "INVALID_ARGUMENT", (what, bad, code)
    assert list(await store.search(namespace, "unstorable namespace metadata key")) == []


async def _code_of(attempt: Callable[[], Awaitable[Any]]) -> str | None:
    """The fevex code ``attempt()`` failed with; ``None`` when it succeeded. Any other
    exception propagates, and fails the check."""
    try:
        await attempt()
    except FevexError as error:
        return error.code
    return None


_CHECKS: tuple[Callable[[MemoryStore, str], Awaitable[Any]], ...] = (
    finds_a_memory_by_its_words,
    does_not_find_what_no_word_matches,
    keeps_namespaces_apart,
    deletes_a_memory,
    honours_the_limit_and_ranks_more_matches_first,
    reads_query_text_as_words_only,
    keeps_content_exactly,
    keeps_the_default_namespace_to_itself,
    refuses_text_no_store_can_keep,
)
