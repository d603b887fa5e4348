"""What a publication holds: documents, the sources a candidate rests on, and the reads
its agents are given, each checked from the plain JSON a request was frozen to.

A document is ``{"id", "revision", "body", "title", "metadata"}``; its ``revision`` is the
document's own number, which must grow whenever its body, title or metadata changes. A
source is ``{"id", "version", "expires_at"}``: what the app's ``verify_sources`` checks is
still current, with an optional end of validity (ISO 8601 UTC).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fevex._ground.names import is_valid_name
from fevex._ground.storable_text import is_storable
from fevex.errors import FevexRunError
from fevex.kits.callbacks import json_copy

__all__ = [
    "KnowledgeDocument",
    "RequiredRead",
    "SourceReference",
    "document_from_json",
    "instant",
    "sources_from_json",
]

MAX_BODY_CHARS = 200_000
MAX_METADATA_CHARS = 10_000
MAX_TITLE_CHARS = 200
MAX_SOURCES = 32
_MAX_TEXT_CHARS = 200


@dataclass(frozen=True, slots=True)
class KnowledgeDocument:
    """One document of a publication. ``metadata`` is plain JSON (a fresh copy)."""

    id: str
    revision: int
    body: str
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "revision": self.revision,
            "title": self.title,
            "body": self.body,
            "metadata": json_copy(dict(self.metadata)),
        }


@dataclass(frozen=True, slots=True)
class SourceReference:
    """A source a candidate rests on: its id, the version it was read at, and the instant
    its validity ends (``None``: it does not expire)."""

    id: str
    version: str
    expires_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "version": self.version, "expires_at": self.expires_at}


@dataclass(frozen=True, slots=True)
class RequiredRead:
    """A read every agent of the publication is given: a document whole, or the section
    under one of its Markdown headings (``section="Refunds"`` for ``## Refunds``)."""

    document_id: str
    section: str | None = None


def document_from_json(value: Any, field_name: str = "document") -> KnowledgeDocument:
    """The document a frozen request holds; ``KIT_REQUEST_INVALID`` for one of another
    shape. A :class:`KnowledgeDocument` is taken as its JSON."""
    if isinstance(value, KnowledgeDocument):
        value = value.to_json()
    if not isinstance(value, Mapping):
        raise _request(field_name, "must be a mapping with id, revision and body")
    unknown = set(value) - {"id", "revision", "body", "title", "metadata"}
    if unknown:
        raise _request(field_name, f"has unknown fields {sorted(unknown)}")
    document_id = value.get("id")
    if not isinstance(document_id, str) or not is_valid_name(document_id):
        raise _request(f"{field_name}.id", "must match [A-Za-z0-9_-]{1,64}")
    revision = value.get("revision")
    if not isinstance(revision, int) or isinstance(revision, bool) or revision < 1:
        raise _request(f"{field_name}.revision", "must be an integer of 1 or more")
    body = value.get("body")
    if not isinstance(body, str) or not body.strip() or len(body) > MAX_BODY_CHARS:
        raise _request(f"{field_name}.body", f"must be text of 1 to {MAX_BODY_CHARS} characters")
    title = value.get("title", "")
    if not isinstance(title, str) or len(title) > MAX_TITLE_CHARS:
        raise _request(f"{field_name}.title", f"must be text of at most {MAX_TITLE_CHARS} chars")
    metadata = value.get("metadata", {})
    if not isinstance(metadata, Mapping):
        raise _request(f"{field_name}.metadata", "must be a mapping of JSON values")
    if len(json.dumps(metadata, ensure_ascii=False)) > MAX_METADATA_CHARS:
        raise _request(f"{field_name}.metadata", f"is limited to {MAX_METADATA_CHARS} characters")
    if not is_storable(body) or not is_storable(title) or not is_storable(json.dumps(metadata)):
        raise _request(field_name, "cannot hold NUL or lone surrogates")
    return KnowledgeDocument(document_id, revision, body, title, json_copy(dict(metadata)))


def sources_from_json(value: Any) -> tuple[SourceReference, ...]:
    """The sources of a frozen request: 1 to 32 references with no missing entry and no id
    twice; ``KIT_REQUEST_INVALID`` otherwise. Expiry instants come back in fevex's form."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, list | tuple):
        raise _request("sources", "must be a list of source references")
    if not 1 <= len(value) <= MAX_SOURCES:
        raise _request("sources", f"must hold 1 to {MAX_SOURCES} references")
    sources = []
    for index, entry in enumerate(value):
        where = f"sources[{index}]"
        if isinstance(entry, SourceReference):
            entry = entry.to_json()
        if not isinstance(entry, Mapping):
            raise _request(where, "is missing: every entry is a mapping with id and version")
        unknown = set(entry) - {"id", "version", "expires_at"}
        if unknown:
            raise _request(where, f"has unknown fields {sorted(unknown)}")
        for key in ("id", "version"):
            text = entry.get(key)
            if (
                not isinstance(text, str)
                or not text.strip()
                or len(text) > _MAX_TEXT_CHARS
                or not is_storable(text)
            ):
                raise _request(f"{where}.{key}", f"must be text of 1 to {_MAX_TEXT_CHARS} chars")
        expires_at = entry.get("expires_at")
        if expires_at is not None:
            expires_at = _normalized_instant(expires_at, f"{where}.expires_at")
        sources.append(SourceReference(entry["id"], entry["version"], expires_at))
    ids = [source.id for source in sources]
    if len(set(ids)) != len(ids):
        raise _request("sources", "names a source twice")
    return tuple(sources)


def instant(text: str) -> datetime:
    """A stored ISO 8601 UTC instant as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def iso(moment: datetime) -> str:
    """``moment`` in fevex's time-stamp form (UTC, microseconds, ``Z``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _normalized_instant(value: Any, where: str) -> str:
    if not isinstance(value, str) or len(value) > 64:
        raise _request(where, "must be an ISO 8601 instant with its UTC offset")
    try:
        moment = instant(value)
    except ValueError:
        raise _request(where, "must be an ISO 8601 instant with its UTC offset") from None
    if moment.tzinfo is None:
        raise _request(where, "must carry its UTC offset (for example 2026-12-01T00:00:00Z)")
    return iso(moment)


def _request(field_name: str, problem: str) -> FevexRunError:
    return FevexRunError(
        "KIT_REQUEST_INVALID", f"{field_name} {problem}.", details={"field": field_name}
    )
