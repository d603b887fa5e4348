"""The development memory store: memories in this process, found by substring."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from fevex.knowledge.memory_store import Memory, search_terms
from fevex.runtime.memory_rules import check_memory_id, check_namespace

__all__ = ["InMemoryMemoryStore"]


class InMemoryMemoryStore:
    """Memories kept in a dict, lost with the process. A memory matches a query when one
    of the query's search terms is a case-insensitive substring of its content; more terms
    matched rank first, then newer. No embeddings, no durability."""

    def __init__(self) -> None:
        self._memories: dict[str, list[Memory]] = {}
        self._lock = asyncio.Lock()

    async def add(
        self, namespace: str, content: str, *, metadata: Mapping[str, Any] | None = None
    ) -> Memory:
        memory = Memory.new(namespace, content, metadata)
        async with self._lock:
            self._memories.setdefault(namespace, []).append(memory)
        return memory

    async def search(self, namespace: str, query: str, *, limit: int = 5) -> Sequence[Memory]:
        check_namespace(namespace)
        terms = search_terms(query)
        if not terms or limit < 1:
            return []
        scored = []
        for order, memory in enumerate(self._memories.get(namespace, ())):
            text = memory.content.lower()
            hits = sum(1 for term in terms if term in text)
            if hits:
                scored.append((-hits, -order, memory))
        scored.sort(key=lambda entry: entry[:2])
        return [memory for _, _, memory in scored[:limit]]

    async def delete(self, namespace: str, memory_id: str) -> bool:
        check_namespace(namespace)
        check_memory_id(memory_id)
        async with self._lock:
            kept = self._memories.get(namespace, [])
            remaining = [memory for memory in kept if memory.id != memory_id]
            self._memories[namespace] = remaining
            return len(remaining) != len(kept)

    async def close(self) -> None:
        return None
