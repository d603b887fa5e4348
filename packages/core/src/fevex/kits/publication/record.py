"""The one record a publication keeps in the app's record store, and how it is read.

Its JSON document holds the official set (``documents``: each document with the sources
it was published from), ``published_revision`` (which grows by one with every
publication, and only then) and the pending ``candidates``. The store's own revision
coordinates every write (a proposal, a publication, a rejection); ``published_revision``
says which official set a candidate was prepared against. Agents are only ever given
``documents``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fevex.errors import FevexError, FevexRunError
from fevex.kits.callbacks import json_copy
from fevex.kits.publication.documents import (
    KnowledgeDocument,
    SourceReference,
    document_from_json,
    sources_from_json,
)
from fevex.runtime.record_store import StoredRecord

__all__ = [
    "Candidate",
    "PublicationReceipt",
    "PublicationState",
    "PublishedDocument",
    "record_key",
    "state_from_record",
]

RECORD_FORMAT = 1


def record_key(name: str) -> str:
    """The record's key within the caller's namespace (a family and a publication of one
    name never share a record)."""
    return f"publication:{name}"


@dataclass(frozen=True, slots=True)
class Candidate:
    """A proposed replacement of one document, not yet official. ``base_published_revision``
    is the official set it was prepared against; it expires at ``expires_at`` (the
    retention after ``created_at``, never later than its earliest source's expiry)."""

    id: str
    document: KnowledgeDocument
    sources: tuple[SourceReference, ...]
    base_published_revision: int
    created_at: str
    expires_at: str
    proposed_by: Mapping[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "document": self.document.to_json(),
            "sources": [source.to_json() for source in self.sources],
            "base_published_revision": self.base_published_revision,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "proposed_by": json_copy(self.proposed_by),
        }


@dataclass(frozen=True, slots=True)
class PublishedDocument:
    """An official document, with the sources, candidate and publication it came from."""

    document: KnowledgeDocument
    sources: tuple[SourceReference, ...]
    candidate_id: str
    published_revision: int
    published_at: str
    published_by: Mapping[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return {
            "document": self.document.to_json(),
            "sources": [source.to_json() for source in self.sources],
            "candidate_id": self.candidate_id,
            "published_revision": self.published_revision,
            "published_at": self.published_at,
            "published_by": json_copy(self.published_by),
        }


@dataclass(frozen=True, slots=True)
class PublicationState:
    """A publication as read: the record's ``revision`` (``0`` before its first write), the
    official ``documents``, ``published_revision`` and the pending ``candidates``."""

    name: str
    namespace: str
    revision: int
    published_revision: int
    documents: tuple[PublishedDocument, ...]
    candidates: tuple[Candidate, ...]

    def official(self) -> list[KnowledgeDocument]:
        return [entry.document for entry in self.documents]

    def candidate(self, candidate_id: str) -> Candidate | None:
        return next((each for each in self.candidates if each.id == candidate_id), None)

    def to_json(self) -> dict[str, Any]:
        """The record's JSON document, as stored."""
        return {
            "format": RECORD_FORMAT,
            "publication": self.name,
            "published_revision": self.published_revision,
            "documents": [entry.to_json() for entry in self.documents],
            "candidates": [candidate.to_json() for candidate in self.candidates],
        }


@dataclass(frozen=True, slots=True)
class PublicationReceipt:
    """What a write did, given only once the store confirmed it: the record's new
    ``revision``, the ``published_revision`` after it, and the candidate it concerned."""

    action: str
    revision: int
    published_revision: int
    candidate_id: str
    expires_at: str | None = None


def state_from_record(name: str, namespace: str, stored: StoredRecord | None) -> PublicationState:
    """The publication ``stored`` holds (an empty one when there is no record yet);
    ``PUBLICATION_RECORD_INVALID`` for a record this kit did not write."""
    if stored is None:
        return PublicationState(name, namespace, 0, 0, (), ())
    value = stored.value
    try:
        if value.get("format") != RECORD_FORMAT or value.get("publication") != name:
            raise ValueError("it is not a publication record of this name and format")
        published_revision = value["published_revision"]
        if not isinstance(published_revision, int) or published_revision < 0:
            raise ValueError("published_revision is not a count")
        documents = tuple(_published(entry) for entry in value["documents"])
        candidates = tuple(_candidate(entry) for entry in value["candidates"])
    except (FevexError, KeyError, TypeError, ValueError, AttributeError) as error:
        raise FevexRunError(
            "PUBLICATION_RECORD_INVALID",
            f"The record of publication {name!r} in namespace {namespace!r} cannot be read "
            f"({getattr(error, 'message', error)}); nothing was changed.",
            details={"publication": name, "revision": stored.revision},
        ) from None
    return PublicationState(
        name, namespace, stored.revision, published_revision, documents, candidates
    )


def _published(entry: Mapping[str, Any]) -> PublishedDocument:
    return PublishedDocument(
        document_from_json(entry["document"]),
        sources_from_json(entry["sources"]),
        _text(entry["candidate_id"]),
        int(entry["published_revision"]),
        _text(entry["published_at"]),
        _actor(entry.get("published_by")),
    )


def _candidate(entry: Mapping[str, Any]) -> Candidate:
    return Candidate(
        _text(entry["id"]),
        document_from_json(entry["document"]),
        sources_from_json(entry["sources"]),
        int(entry["base_published_revision"]),
        _text(entry["created_at"]),
        _text(entry["expires_at"]),
        _actor(entry.get("proposed_by")),
    )


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not text")
    return value


def _actor(value: Any) -> Mapping[str, Any] | None:
    if value is not None and not isinstance(value, Mapping):
        raise TypeError("an actor is a mapping")
    return None if value is None else json_copy(dict(value))
