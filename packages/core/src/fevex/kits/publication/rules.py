"""The checks a publication applies to what it is asked and to the record it read, each
raising the kit's stable code; nothing here awaits or writes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from fevex.errors import FevexRunError
from fevex.kits.callbacks import json_copy
from fevex.kits.publication.documents import KnowledgeDocument, SourceReference, instant
from fevex.kits.publication.record import Candidate, PublicationState
from fevex.runtime.context import ExecutionContext
from fevex.runtime.record_store import RecordStore

__all__ = [
    "PublicationApp",
    "actor_of",
    "as_json",
    "check_document_revision",
    "check_revision",
    "checked_candidate_id",
    "checked_revision",
    "expired",
    "listed",
    "pending",
    "record_store_of",
    "set_with",
]


class PublicationApp(Protocol):
    """What the kit needs of an app: its record store."""

    record_store: RecordStore


def record_store_of(app: PublicationApp) -> RecordStore:
    store: RecordStore | None = getattr(app, "record_store", None)
    if store is None:
        raise FevexRunError(
            "PUBLICATION_STORE_MISSING",
            "The app given to the publication has no record_store; pass a fevex app.",
        )
    return store


def as_json(value: Any) -> Any:
    return value.to_json() if isinstance(value, KnowledgeDocument | SourceReference) else value


def listed(sources: Any) -> list[Any]:
    if isinstance(sources, str | bytes | Mapping) or not isinstance(sources, Sequence):
        raise FevexRunError(
            "KIT_REQUEST_INVALID",
            "sources must be a list of source references.",
            details={"field": "sources"},
        )
    return list(sources)


def checked_revision(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise FevexRunError(
            "KIT_REQUEST_INVALID",
            "revision must be the record revision read (an integer of 0 or more).",
            details={"field": "revision"},
        )
    return value


def checked_candidate_id(value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > 200:
        raise FevexRunError(
            "KIT_REQUEST_INVALID",
            "candidate_id must be the id of a candidate.",
            details={"field": "candidate_id"},
        )
    return value


def check_revision(state: PublicationState, expected: int) -> None:
    if state.revision != expected:
        raise FevexRunError(
            "PUBLICATION_CONFLICT",
            f"Publication {state.name} is at revision {state.revision}, not {expected}: it "
            "changed since it was read. Nothing was written; read it again.",
            details={"publication": state.name, "revision": state.revision},
        )


def check_document_revision(state: PublicationState, document: KnowledgeDocument) -> None:
    """A document's content changes only with a greater revision than the official one."""
    official = next((each for each in state.official() if each.id == document.id), None)
    if official is None or document.revision > official.revision:
        return
    same = official.to_json() == document.to_json()
    raise FevexRunError(
        "PUBLICATION_REVISION_REQUIRED",
        f"Document {document.id} is published at revision {official.revision}; "
        + (
            "the proposal changes nothing."
            if same
            else f"a changed body or metadata needs a revision above {official.revision}."
        ),
        details={"document": document.id, "published": official.revision},
    )


def pending(state: PublicationState, candidate_id: str) -> Candidate:
    candidate = state.candidate(candidate_id)
    if candidate is None:
        raise FevexRunError(
            "PUBLICATION_CANDIDATE_NOT_FOUND",
            f"Publication {state.name} has no candidate {candidate_id} (never proposed, "
            "published, rejected or expired and removed).",
            details={"candidate_id": candidate_id},
        )
    return candidate


def set_with(
    documents: Sequence[KnowledgeDocument], document: KnowledgeDocument
) -> list[KnowledgeDocument]:
    return [*(each for each in documents if each.id != document.id), document]


def expired(candidate: Candidate, now: str) -> bool:
    return instant(candidate.expires_at) <= instant(now)


def actor_of(caller: ExecutionContext) -> dict[str, Any] | None:
    return None if caller.actor is None else json_copy(dict(caller.actor))
