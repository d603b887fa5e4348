"""The memory contract: facts kept across sessions, scoped by namespace.

Rules every store follows live here as plain functions, so that the in-memory, SQLite and
PostgreSQL stores agree: which words of a query are searched (:func:`search_terms`), what a
namespace and a memory's content may be (:func:`check_namespace`, :func:`check_content`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from fevex.errors import FevexRunError

__all__ = [
    "DEFAULT_NAMESPACE",
    "MAX_SEARCH_TERMS",
    "Memory",
    "MemoryAccess",
    "MemoryStore",
    "check_content",
    "check_namespace",
    "namespace_of",
    "search_terms",
]

# The namespace of runs whose ExecutionContext names none: memories written by such runs
# are shared by every other run without a namespace, and by no run that has one.
DEFAULT_NAMESPACE = "default"
MAX_SEARCH_TERMS = 32
MAX_CONTENT_CHARS = 10_000
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


def check_namespace(namespace: Any) -> str:
    if not isinstance(namespace, str) or not namespace or len(namespace) > 200:
        raise FevexRunError(
            "INVALID_ARGUMENT", "A memory namespace must be text of 1 to 200 characters."
        )
    return namespace


def check_content(content: Any) -> str:
    if not isinstance(content, str) or not content.strip() or "\x00" in content:
        raise FevexRunError(
            "INVALID_ARGUMENT", "A memory's content must be non-empty text without NUL."
        )
    if len(content) > MAX_CONTENT_CHARS:
        raise FevexRunError(
            "INVALID_ARGUMENT",
            f"A memory's content is limited to {MAX_CONTENT_CHARS} characters.",
        )
    return content


def namespace_of(context: Mapping[str, Any] | None) -> str:
    """The namespace of a run's stored context; ``DEFAULT_NAMESPACE`` when it has none."""
    namespace = None if context is None else context.get("namespace")
    return namespace if isinstance(namespace, str) and namespace else DEFAULT_NAMESPACE
