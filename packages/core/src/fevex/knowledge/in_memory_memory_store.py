"""The development memory store: memories in this process, found by substring.

A search term holds only word characters, so it is a substring of a memory's lower-cased
content exactly when it is a substring of one of its words (its runs of word characters).
Each namespace therefore keeps, for each word, the memories holding it, and, for each
three-character piece of a word, the words holding that piece: a term's candidate words
are those holding its rarest piece, and a search touches the words and memories that can
match, never every memory of the namespace.
"""

from __future__ import annotations

import asyncio
import heapq
import re
from collections.abc import Mapping, Sequence
from typing import Any

from fevex.knowledge.memory_store import Memory, search_terms
from fevex.runtime.memory_rules import check_memory_id, check_namespace

__all__ = ["InMemoryMemoryStore"]

# The runs search_terms takes terms from; a term is at least _PIECE characters long.
_WORD = re.compile(r"\w+", re.UNICODE)
_PIECE = 3


class InMemoryMemoryStore:
    """Memories kept in a dict, lost with the process. A memory matches a query when one
    of the query's search terms is a case-insensitive substring of its content; more terms
    matched rank first, then newer. No embeddings, no durability."""

    def __init__(self) -> None:
        self._namespaces: dict[str, _Namespace] = {}
        self._lock = asyncio.Lock()

    async def add(
        self, namespace: str, content: str, *, metadata: Mapping[str, Any] | None = None
    ) -> Memory:
        memory = Memory.new(namespace, content, metadata)
        async with self._lock:
            self._namespaces.setdefault(namespace, _Namespace()).add(memory)
        return memory

    async def search(self, namespace: str, query: str, *, limit: int = 5) -> Sequence[Memory]:
        check_namespace(namespace)
        terms = search_terms(query)
        kept = self._namespaces.get(namespace)
        if not terms or limit < 1 or kept is None:
            return []
        return kept.search(terms, limit)

    async def delete(self, namespace: str, memory_id: str) -> bool:
        check_namespace(namespace)
        check_memory_id(memory_id)
        async with self._lock:
            kept = self._namespaces.get(namespace)
            return kept is not None and kept.delete(memory_id)

    async def close(self) -> None:
        return None


class _Namespace:
    """One namespace's memories by the order they were added in, and its word index."""

    def __init__(self) -> None:
        self._added = 0
        self._memories: dict[int, Memory] = {}
        self._order_of: dict[str, int] = {}
        self._holding: dict[str, set[int]] = {}  # word -> orders of memories holding it
        self._words_with: dict[str, set[str]] = {}  # piece -> words holding it

    def add(self, memory: Memory) -> None:
        order = self._added
        self._added += 1
        self._memories[order] = memory
        self._order_of[memory.id] = order
        for word in _words(memory.content):
            holding = self._holding.get(word)
            if holding is None:
                holding = self._holding[word] = set()
                for piece in _pieces(word):
                    self._words_with.setdefault(piece, set()).add(word)
            holding.add(order)

    def delete(self, memory_id: str) -> bool:
        order = self._order_of.pop(memory_id, None)
        if order is None:
            return False
        memory = self._memories.pop(order)
        for word in _words(memory.content):
            holding = self._holding[word]
            holding.discard(order)
            if holding:
                continue
            del self._holding[word]
            for piece in _pieces(word):
                words = self._words_with[piece]
                words.discard(word)
                if not words:
                    del self._words_with[piece]
        return True

    def search(self, terms: Sequence[str], limit: int) -> list[Memory]:
        hits: dict[int, int] = {}
        for term in terms:
            matched: set[int] = set()
            for word in self._words_containing(term):
                matched |= self._holding[word]
            for order in matched:
                hits[order] = hits.get(order, 0) + 1
        best = heapq.nsmallest(limit, hits.items(), key=lambda item: (-item[1], -item[0]))
        return [self._memories[order] for order, _ in best]

    def _words_containing(self, term: str) -> list[str]:
        candidates: set[str] | None = None
        for piece in _pieces(term):
            words = self._words_with.get(piece)
            if words is None:
                return []
            if candidates is None or len(words) < len(candidates):
                candidates = words
        return [word for word in candidates or () if term in word]


def _words(content: str) -> set[str]:
    """The distinct words of ``content`` (lower-cased) long enough to hold a term."""
    return {word for word in _WORD.findall(content.lower()) if len(word) >= _PIECE}


def _pieces(word: str) -> set[str]:
    return {word[start : start + _PIECE] for start in range(len(word) - _PIECE + 1)}
