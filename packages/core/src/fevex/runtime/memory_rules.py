"""What a memory store may keep: the checks every memory store applies to what it is given,
written once so that the in-memory, SQLite and PostgreSQL stores refuse the same values with
the same code.

Text a memory store keeps must be storable by every store, as a run store's is: no NUL
(PostgreSQL's text refuses it) and no lone surrogate (no UTF-8 encodes it); anything else
is refused with ``INVALID_ARGUMENT`` before a store is touched. A store checks a new memory
with :meth:`fevex.knowledge.Memory.new`, which applies these checks, and a search or a
deletion with :func:`check_namespace` and :func:`check_memory_id`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fevex._ground.storable_text import is_storable
from fevex.errors import FevexRunError
from fevex.schemas.schema import ensure_json

__all__ = [
    "FORMER_DEFAULT_NAMESPACE",
    "check_memory_content",
    "check_memory_id",
    "check_memory_metadata",
    "check_namespace",
]

# What the default namespace (fevex.knowledge.DEFAULT_NAMESPACE, "") was before: durable
# stores move their rows of it to the default namespace once, when they first open a table
# written by an older fevex (a run named "default" then shared them with the runs that name
# none).
FORMER_DEFAULT_NAMESPACE = "default"
MAX_MEMORY_CHARS = 10_000
_MAX_NAMESPACE_CHARS = 200


def check_namespace(namespace: Any) -> str:
    """The default namespace (``""``) or the text of a namespace, of at most 200 storable
    characters; ``INVALID_ARGUMENT`` for anything else."""
    if (
        not isinstance(namespace, str)
        or len(namespace) > _MAX_NAMESPACE_CHARS
        or not is_storable(namespace)
    ):
        raise _invalid(
            "A memory namespace must be text of at most 200 characters, without NUL or lone "
            "surrogates."
        )
    return namespace


def check_memory_content(content: Any) -> str:
    """Non-empty storable text of at most :data:`MAX_MEMORY_CHARS` characters."""
    if not isinstance(content, str) or not content.strip() or not is_storable(content):
        raise _invalid("A memory's content must be non-empty text without NUL or lone surrogates.")
    if len(content) > MAX_MEMORY_CHARS:
        raise _invalid(f"A memory's content is limited to {MAX_MEMORY_CHARS} characters.")
    return content


def check_memory_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The metadata to keep (a copy; ``{}`` for ``None``): a mapping of plain JSON whose
    text every store can keep."""
    if metadata is not None and not isinstance(metadata, Mapping):
        raise _invalid("A memory's metadata must be a mapping of JSON values.")
    kept = dict(metadata or {})
    try:
        ensure_json(kept)
    except TypeError as error:
        raise _invalid(f"A memory's metadata cannot be stored: {error}.") from None
    return kept


def check_memory_id(memory_id: Any) -> str:
    """A non-empty storable text."""
    if not isinstance(memory_id, str) or not memory_id or not is_storable(memory_id):
        raise _invalid("A memory id must be non-empty text without NUL or lone surrogates.")
    return memory_id


def _invalid(message: str) -> FevexRunError:
    return FevexRunError("INVALID_ARGUMENT", message)
