"""The memory contract: facts kept across sessions, scoped by namespace.

Rules every store follows live here as plain functions, so that the in-memory, SQLite and
PostgreSQL stores agree: which words of a query are searched (:func:`search_terms`), what a
new memory may hold (:func:`check_new_memory`: its namespace, content and metadata), what
a namespace and a memory id may be (:func:`check_namespace`, :func:`check_memory_id`).
Text a store keeps must be storable by every store, as run stores' text is: no NUL
(PostgreSQL's text refuses it) and no lone surrogate (no UTF-8 encodes it); anything else
is refused with ``INVALID_ARGUMENT`` before a store is touched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from fevex._ground.storable_text import UNSTORABLE_TEXT
from fevex.errors import FevexRunError
from fevex.schemas.schema import ensure_json

__all__ = [
    "DEFAULT_NAMESPACE",
    "MAX_SEARCH_TERMS",
    "Memory",
    "MemoryAccess",
    "MemoryStore",
    "FORMER_DEFAULT_NAMESPACE",
    "check_content",
    "check_memory_id",
    "check_namespace",
    "check_new_memory",
    "namespace_of",
    "search_terms",
]

# The namespace of runs whose ExecutionContext names none: memories written by such runs
# are shared by every other run without a namespace, and by no run that has one. It is the
# empty text because no ExecutionContext can name it (a context's namespace is None or
# non-empty), so no tenant's name can collide with it.
DEFAULT_NAMESPACE = ""
# What DEFAULT_NAMESPACE was before: durable stores move their rows of it to
# DEFAULT_NAMESPACE once, when they first open a table written by an older fevex (a run
# named "default" then shared them with the runs that name none).
FORMER_DEFAULT_NAMESPACE = "default"
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


def check_new_memory(
    namespace: Any, content: Any, metadata: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Refuse what no store could keep (``INVALID_ARGUMENT``); the metadata to keep."""
    check_namespace(namespace)
    check_content(content)
    if metadata is not None and not isinstance(metadata, Mapping):
        raise _invalid("A memory's metadata must be a mapping of JSON values.")
    kept = dict(metadata or {})
    try:
        ensure_json(kept)  # plain JSON whose text every store can keep
    except TypeError as error:
        raise _invalid(f"A memory's metadata cannot be stored: {error}.") from None
    return kept


def check_namespace(namespace: Any) -> str:
    """``DEFAULT_NAMESPACE`` (``""``) or the text of a namespace, of at most 200 storable
    characters."""
    if not isinstance(namespace, str) or len(namespace) > 200 or not _storable(namespace):
        raise _invalid(
            "A memory namespace must be text of at most 200 characters, without NUL or lone "
            "surrogates."
        )
    return namespace


def check_content(content: Any) -> str:
    if not isinstance(content, str) or not content.strip() or not _storable(content):
        raise _invalid("A memory's content must be non-empty text without NUL or lone surrogates.")
    if len(content) > MAX_CONTENT_CHARS:
        raise _invalid(f"A memory's content is limited to {MAX_CONTENT_CHARS} characters.")
    return content


def check_memory_id(memory_id: Any) -> str:
    if not isinstance(memory_id, str) or not memory_id or not _storable(memory_id):
        raise _invalid("A memory id must be non-empty text without NUL or lone surrogates.")
    return memory_id


def _storable(text: str) -> bool:
    return UNSTORABLE_TEXT.search(text) is None


def _invalid(message: str) -> FevexRunError:
    return FevexRunError("INVALID_ARGUMENT", message)


def namespace_of(context: Mapping[str, Any] | None) -> str:
    """The namespace of a run's stored context; ``DEFAULT_NAMESPACE`` when it has none."""
    namespace = None if context is None else context.get("namespace")
    return namespace if isinstance(namespace, str) and namespace else DEFAULT_NAMESPACE
