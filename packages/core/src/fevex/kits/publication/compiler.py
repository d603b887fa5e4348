"""The publication's compiler: a whole document set checked as agents would read it.

Compiling a set makes its catalog (every document's id, revision and title, by id) and
resolves its reads: the publication's ``required_reads``, or every document whole when it
names none. A read of a document or section the set lacks, or reads longer than
``max_read_chars`` together, is ``PUBLICATION_INVALID``. ``propose`` and ``publish`` compile
the set as it would be after the candidate replaces its document; the context provider
compiles the official set.

:class:`CompileCache` keeps the most recent results of one publication, keyed by the
record's revision, its ``published_revision`` and the full text of the set: a set whose
content changed under the same revision numbers (a record restored, rewritten or read
from another store) is compiled again, never taken from the cache.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fevex.errors import FevexRunError
from fevex.kits.publication.documents import KnowledgeDocument, RequiredRead

__all__ = ["CompileCache", "CompiledSet", "compile_documents", "set_text"]

MAX_DOCUMENTS = 500
_CACHED = 4
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")


@dataclass(frozen=True, slots=True)
class CompiledSet:
    """A compiled document set: its catalog and the text of each read, in order."""

    catalog: tuple[dict[str, Any], ...]
    reads: tuple[dict[str, Any], ...]
    read_chars: int


def set_text(documents: Sequence[KnowledgeDocument]) -> str:
    """The full content of a set as one text: what the cache compares."""
    return json.dumps(
        [document.to_json() for document in documents],
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )


def compile_documents(
    documents: Sequence[KnowledgeDocument],
    required_reads: Sequence[RequiredRead],
    max_read_chars: int,
) -> CompiledSet:
    """The catalog and reads of ``documents`` (sorted by id, ids unique);
    ``PUBLICATION_INVALID`` when the set cannot be read as the publication requires."""
    if len(documents) > MAX_DOCUMENTS:
        raise _invalid(f"a publication holds at most {MAX_DOCUMENTS} documents", "too_many")
    by_id: dict[str, KnowledgeDocument] = {}
    for document in documents:
        if document.id in by_id:
            raise _invalid(f"document {document.id!r} appears twice", "duplicate")
        by_id[document.id] = document
    reads = required_reads or [RequiredRead(document_id) for document_id in sorted(by_id)]
    resolved = []
    total = 0
    for read in reads:
        found = by_id.get(read.document_id)
        if found is None:
            raise _invalid(
                f"the required read of {read.document_id!r} names a document the set lacks",
                "missing_document",
            )
        document = found
        text = document.body if read.section is None else _section(document, read.section)
        total += len(text)
        resolved.append(
            {
                "document_id": document.id,
                "revision": document.revision,
                "title": document.title,
                "section": read.section,
                "text": text,
            }
        )
    if total > max_read_chars:
        raise _invalid(
            f"the reads come to {total} characters, more than max_read_chars ({max_read_chars})",
            "too_long",
        )
    catalog = tuple(
        {"id": document.id, "revision": document.revision, "title": document.title}
        for document in sorted(by_id.values(), key=lambda each: each.id)
    )
    return CompiledSet(catalog, tuple(resolved), total)


def _section(document: KnowledgeDocument, heading: str) -> str:
    """The lines under ``heading`` up to the next heading of its level or above (headings
    inside fenced code are text)."""
    lines = document.body.splitlines(keepends=True)
    start = level = None
    fenced = False
    for index, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        found = None if fenced else _HEADING.match(line.rstrip("\r\n"))
        if found is None:
            continue
        depth = len(found.group(1))
        if start is None:
            if found.group(2) == heading:
                start, level = index, depth
        elif level is not None and depth <= level:
            return "".join(lines[start:index]).strip()
    if start is None:
        raise _invalid(
            f"the required read of {document.id!r} names section {heading!r}, which revision "
            f"{document.revision} has no heading for",
            "missing_section",
        )
    return "".join(lines[start:]).strip()


class CompileCache:
    """The most recent compiled sets of one publication, by ``(revision,
    published_revision, full set text)``. It saves compiling again only: it never stands
    in for reading the store, authorizing, verifying sources or checking validity."""

    def __init__(self, required_reads: Sequence[RequiredRead], max_read_chars: int) -> None:
        self.required_reads = tuple(required_reads)
        self.max_read_chars = max_read_chars
        self.compilations = 0
        self._entries: OrderedDict[tuple[int, int, str], CompiledSet] = OrderedDict()
        # Compilations run in worker threads: the entries are touched under this lock.
        self._lock = threading.Lock()

    def compiled(
        self, revision: int, published_revision: int, documents: Sequence[KnowledgeDocument]
    ) -> CompiledSet:
        ordered = sorted(documents, key=lambda document: document.id)
        key = (revision, published_revision, set_text(ordered))
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found
            self.compilations += 1
        result = compile_documents(ordered, self.required_reads, self.max_read_chars)
        with self._lock:
            self._entries[key] = result
            while len(self._entries) > _CACHED:
                self._entries.popitem(last=False)
        return result


def _invalid(message: str, problem: str) -> FevexRunError:
    return FevexRunError(
        "PUBLICATION_INVALID",
        f"The document set cannot be published: {message}.",
        details={"problem": problem},
    )
