"""The memory contract: facts kept across sessions, scoped by namespace.

The in-memory, SQLite and PostgreSQL stores agree because they share their rules: which
words of a query are searched (:func:`search_terms`), what a new memory is
(:meth:`Memory.new`: its namespace, content and metadata checked, a new id and the time),
and what a namespace and a memory id may be (:mod:`fevex.runtime.memory_rules`, exported by
:mod:`fevex.runtime` with every store author's rules).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from fevex._ground.clock import new_id, utc_now
from fevex.runtime.memory_rules import (
    check_memory_content,
    check_memory_metadata,
    check_namespace,
)

__all__ = [
    "DEFAULT_NAMESPACE",
    "MAX_SEARCH_TERMS",
    "Memory",
    "MemoryAccess",
    "MemoryStore",
    "namespace_of",
    "search_terms",
]

# The namespace of runs whose ExecutionContext names none: memories written by such runs
# are shared by every other run without a namespace, and by no run that has one. It is the
# empty text because no ExecutionContext can name it (a context's namespace is None or
# non-empty), so no tenant's name can collide with it.
DEFAULT_NAMESPACE = ""
MAX_SEARCH_TERMS = 32
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Memory:
    """One kept fact: its id, the namespace it belongs to, its text and when it was kept
    (ISO 8601, UTC)."""

    id: str
    namespace: str
    content: str
    created_at: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def new(cls, namespace: Any, content: Any, metadata: Mapping[str, Any] | None = None) -> Memory:
        """The memory a store's ``add`` keeps, with a new id and the time: the one rule of
        every store's ``add``. ``INVALID_ARGUMENT`` when no store could keep its namespace,
        its content or its metadata (checked in that order), before any store is touched;
        the metadata is copied."""
        check_namespace(namespace)
        check_memory_content(content)
        kept = check_memory_metadata(metadata)
        return cls(new_id("mem"), namespace, content, utc_now(), kept)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "namespace": self.namespace,
            "content": self.content,
            "created_at": self.created_at,
            "metadata": dict(self.metadata),
        }


@dataclass(frozen=True, slots=True)
class MemoryAccess:
    """What an agent does with the app's memory store: ``read`` searches it with the run's
    input at the start of the run and gives the model what it finds (as data, at most
    ``limit`` memories); ``write`` gives the agent the ``remember`` tool."""

    read: bool = True
    write: bool = False
    limit: int = 5

    def check(self) -> None:
        if not isinstance(self.read, bool) or not isinstance(self.write, bool):
            raise ValueError("read and write must be True or False")
        if not isinstance(self.limit, int) or isinstance(self.limit, bool) or self.limit < 1:
            raise ValueError("limit must be a positive integer")


@runtime_checkable
class MemoryStore(Protocol):
    """Where memories are kept. Every method is scoped by ``namespace``: a store never
    returns or deletes a memory of another namespace."""

    async def add(
        self, namespace: str, content: str, *, metadata: Mapping[str, Any] | None = None
    ) -> Memory:
        """Keep ``content`` and return it as stored, with a new id."""
        ...

    async def search(self, namespace: str, query: str, *, limit: int = 5) -> Sequence[Memory]:
        """At most ``limit`` memories matching any of ``search_terms(query)``, best first;
        none for a query without terms. Query text is never interpreted as syntax."""
        ...

    async def delete(self, namespace: str, memory_id: str) -> bool:
        """Forget a memory; whether one of that id was in the namespace."""
        ...

    async def close(self) -> None: ...


def search_terms(query: str) -> list[str]:
    """The words a search looks for: lower-cased runs of letters and digits of 3 characters
    or more, each once, at most ``MAX_SEARCH_TERMS``. Punctuation and operators of any
    search syntax are never part of a term."""
    terms: list[str] = []
    for word in _WORD.findall(query.lower()):
        word = word.strip("_")
        if len(word) >= 3 and word not in terms:
            terms.append(word)
        if len(terms) == MAX_SEARCH_TERMS:
            break
    return terms


def namespace_of(context: Mapping[str, Any] | None) -> str:
    """The namespace of a run's stored context; ``DEFAULT_NAMESPACE`` when it has none."""
    namespace = None if context is None else context.get("namespace")
    return namespace if isinstance(namespace, str) and namespace else DEFAULT_NAMESPACE
