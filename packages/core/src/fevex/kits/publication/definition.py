"""``define_knowledge_publication``: official knowledge that changes only by an authorized
publication, and candidates that agents never read.

Every operation takes the app first and keeps the publication in ``app.record_store``, one
record per publication and namespace (the caller's ``ExecutionContext.namespace``), written
only by compare-and-swap against the record revision the caller decided on:

- ``propose`` writes a candidate: the whole set as it would be after the candidate
  replaces (or adds) its document is compiled with the required reads first.
- ``publish`` re-authorizes, re-reads, checks the candidate was prepared against the
  current ``published_revision``, verifies its sources, compiles again and checks every
  deadline after each of those awaits; then one swap replaces the official set and
  removes the candidate.
- ``reject`` removes a candidate.
- ``context_provider()`` gives agents the official set only, read at each run's start
  through the record store of the app running it (``ContextRequest.record_store``).

Requests are frozen before the first await, and every callback gets copies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from fevex._ground.clock import new_id, utc_now
from fevex._ground.names import is_valid_name
from fevex._ground.worker_threads import in_worker_thread
from fevex._internal.engine.thread_loop import run_sync
from fevex.errors import FevexConfigurationError, FevexRunError
from fevex.kits.callbacks import call_assertion, check_callable, frozen_json, json_copy
from fevex.kits.publication.commit import Deadline, prepare_snapshot
from fevex.kits.publication.compiler import CompileCache
from fevex.kits.publication.documents import (
    KnowledgeDocument,
    RequiredRead,
    SourceReference,
    document_from_json,
    instant,
    iso,
    sources_from_json,
)
from fevex.kits.publication.record import (
    Candidate,
    PublicationReceipt,
    PublicationState,
    PublishedDocument,
    record_key,
    state_from_record,
)
from fevex.kits.publication.rules import (
    PublicationApp,
    actor_of,
    as_json,
    check_document_revision,
    check_revision,
    checked_candidate_id,
    checked_revision,
    expired,
    listed,
    pending,
    record_store_of,
    set_with,
)
from fevex.kits.record_swap import swap_record
from fevex.knowledge.context_provider import (
    ContextItem,
    ContextProviderDefinition,
    ContextRequest,
    define_context_provider,
)
from fevex.knowledge.memory_store import DEFAULT_NAMESPACE
from fevex.runtime.context import ExecutionContext

__all__ = ["KnowledgePublication", "PublicationApp", "define_knowledge_publication"]

ContextArgument = ExecutionContext | Mapping[str, Any] | None


class KnowledgePublication:
    """A defined publication; see :func:`define_knowledge_publication`."""

    def __init__(
        self,
        name: str,
        authorize: Callable[..., Any],
        verify_sources: Callable[..., Any],
        max_candidates: int,
        candidate_retention: float,
        required_reads: tuple[RequiredRead, ...],
        max_read_chars: int,
    ) -> None:
        self.name = name
        self.max_candidates = max_candidates
        self.candidate_retention = candidate_retention
        self.required_reads = required_reads
        self.max_read_chars = max_read_chars
        self._authorize = authorize
        self._verify_sources = verify_sources
        self.cache = CompileCache(required_reads, max_read_chars)

    # -- reading --------------------------------------------------------------------

    async def get(
        self, app: PublicationApp, *, context: ContextArgument = None
    ) -> PublicationState:
        """The publication as stored for the caller's namespace, official set and
        candidates, after ``authorize("read", request, context)``."""
        request, caller = self._frozen({}, context)
        await self._authorized("read", request, caller)
        return await self._read(app, caller)

    def get_sync(self, app: PublicationApp, *, context: ContextArgument = None) -> PublicationState:
        """The blocking twin of :meth:`get`."""
        return run_sync(self.get(app, context=context))

    def context_provider(
        self, *, name: str | None = None, optional: bool = False
    ) -> ContextProviderDefinition:
        """A context provider (register it in ``create_fevex(context_providers=[...])``
        and name it in an agent's ``context=``) that gives a run the official set of the
        run's namespace: its catalog and the required reads, never a candidate. It reads
        through the record store of the app running the agent, at the run's start."""
        return define_context_provider(
            name=name or self.name,
            read=self._serve,
            optional=optional,
            description=f"The published documents of {self.name}.",
        )

    async def _serve(self, request: ContextRequest) -> list[ContextItem]:
        store = request.record_store
        if store is None:
            raise FevexRunError(
                "PUBLICATION_STORE_MISSING",
                f"The publication {self.name} was read with no record store: its provider "
                "is read by an app's agents, which give it the app's record store.",
            )
        namespace = request.context.namespace or DEFAULT_NAMESPACE
        state = state_from_record(
            self.name, namespace, await store.read(namespace, record_key(self.name))
        )
        if not state.documents:
            return []
        compiled = await in_worker_thread(
            self.cache.compiled, state.revision, state.published_revision, state.official()
        )
        catalog = {
            "publication": self.name,
            "published_revision": state.published_revision,
            "documents": json_copy(list(compiled.catalog)),
        }
        items = [ContextItem(f"{self.name}:catalog", catalog)]
        for read in compiled.reads:
            suffix = "" if read["section"] is None else f"#{read['section']}"
            item_id = f"{self.name}:{read['document_id']}@{read['revision']}{suffix}"
            items.append(ContextItem(item_id, json_copy(read)))
        return items

    # -- writing --------------------------------------------------------------------

    async def propose(
        self,
        app: PublicationApp,
        *,
        revision: int,
        document: KnowledgeDocument | Mapping[str, Any],
        sources: Sequence[SourceReference | Mapping[str, Any]],
        context: ContextArgument = None,
        timeout: float | None = None,
    ) -> PublicationReceipt:
        """Write a candidate replacing (or adding) ``document``, resting on ``sources``,
        over record revision ``revision`` (``0`` before the first write). Nothing official
        changes. See :func:`define_knowledge_publication` for the checks."""
        frozen, caller = self._frozen(
            {
                "revision": revision,
                "document": as_json(document),
                "sources": [as_json(source) for source in listed(sources)],
            },
            context,
        )
        expected = checked_revision(frozen["revision"])
        proposed = document_from_json(frozen["document"])
        references = sources_from_json(frozen["sources"])
        async with Deadline(timeout, "propose") as deadline:
            deadline.sources = references
            await self._authorized("propose", frozen, caller)
            deadline.check("authorize")
            state = await self._read(app, caller)
            deadline.check("reading the record")
            check_revision(state, expected)
            check_document_revision(state, proposed)
            await self._verified(references, caller)
            deadline.check("verify_sources")
            replaced = set_with(state.official(), proposed)
            await in_worker_thread(
                self.cache.compiled, state.revision, state.published_revision, replaced
            )
            deadline.check("compiling the document set")
            now = utc_now()
            live = [each for each in state.candidates if not expired(each, now)]
            if len(live) >= self.max_candidates:
                raise FevexRunError(
                    "PUBLICATION_CANDIDATES_FULL",
                    f"Publication {self.name} holds {len(live)} candidates, its max_candidates; "
                    "publish or reject one first. Nothing was written.",
                    details={"max_candidates": self.max_candidates},
                )
            candidate = Candidate(
                new_id("candidate"),
                proposed,
                references,
                state.published_revision,
                now,
                self._expiry(now, references),
                actor_of(caller),
            )
            following = dataclasses.replace(state, candidates=(*live, candidate))
            value = await in_worker_thread(prepare_snapshot, following)
            deadline.check("preparing the commit")
        await self._written(app, state, value)
        return PublicationReceipt(
            "propose",
            state.revision + 1,
            state.published_revision,
            candidate.id,
            candidate.expires_at,
        )

    def propose_sync(
        self,
        app: PublicationApp,
        *,
        revision: int,
        document: KnowledgeDocument | Mapping[str, Any],
        sources: Sequence[SourceReference | Mapping[str, Any]],
        context: ContextArgument = None,
        timeout: float | None = None,
    ) -> PublicationReceipt:
        """The blocking twin of :meth:`propose`."""
        return run_sync(
            self.propose(
                app,
                revision=revision,
                document=document,
                sources=sources,
                context=context,
                timeout=timeout,
            )
        )

    async def publish(
        self,
        app: PublicationApp,
        *,
        revision: int,
        candidate_id: str,
        context: ContextArgument = None,
        timeout: float | None = None,
    ) -> PublicationReceipt:
        """Make candidate ``candidate_id`` official, over record revision ``revision``:
        one swap replaces its document in the official set, grows ``published_revision``
        and removes the candidate. The receipt comes only from the store."""
        frozen, caller = self._frozen({"revision": revision, "candidate_id": candidate_id}, context)
        expected = checked_revision(frozen["revision"])
        wanted = checked_candidate_id(frozen["candidate_id"])
        async with Deadline(timeout, "publish") as deadline:
            await self._authorized("publish", frozen, caller)
            deadline.check("authorize")
            state = await self._read(app, caller)
            check_revision(state, expected)
            candidate = pending(state, wanted)
            deadline.candidate, deadline.sources = candidate, candidate.sources
            deadline.check("reading the record")
            if candidate.base_published_revision != state.published_revision:
                raise FevexRunError(
                    "PUBLICATION_STALE",
                    f"Candidate {candidate.id} was prepared against published revision "
                    f"{candidate.base_published_revision}; the official set is at "
                    f"{state.published_revision}. Propose it again against the current set.",
                    details={
                        "candidate_id": candidate.id,
                        "base_published_revision": candidate.base_published_revision,
                        "published_revision": state.published_revision,
                    },
                )
            check_document_revision(state, candidate.document)
            await self._verified(candidate.sources, caller)
            deadline.check("verify_sources")
            replaced = set_with(state.official(), candidate.document)
            await in_worker_thread(
                self.cache.compiled, state.revision, state.published_revision, replaced
            )
            deadline.check("compiling the document set")
            following = self._published(state, candidate, caller)
            value = await in_worker_thread(prepare_snapshot, following)
            deadline.check("preparing the commit")
        await self._written(app, state, value)
        return PublicationReceipt(
            "publish", state.revision + 1, following.published_revision, candidate.id
        )

    def publish_sync(
        self,
        app: PublicationApp,
        *,
        revision: int,
        candidate_id: str,
        context: ContextArgument = None,
        timeout: float | None = None,
    ) -> PublicationReceipt:
        """The blocking twin of :meth:`publish`."""
        return run_sync(
            self.publish(
                app, revision=revision, candidate_id=candidate_id, context=context, timeout=timeout
            )
        )

    async def reject(
        self,
        app: PublicationApp,
        *,
        revision: int,
        candidate_id: str,
        context: ContextArgument = None,
        timeout: float | None = None,
    ) -> PublicationReceipt:
        """Remove candidate ``candidate_id``, over record revision ``revision``."""
        frozen, caller = self._frozen({"revision": revision, "candidate_id": candidate_id}, context)
        expected = checked_revision(frozen["revision"])
        wanted = checked_candidate_id(frozen["candidate_id"])
        async with Deadline(timeout, "reject") as deadline:
            await self._authorized("reject", frozen, caller)
            deadline.check("authorize")
            state = await self._read(app, caller)
            deadline.check("reading the record")
            check_revision(state, expected)
            pending(state, wanted)
            now = utc_now()
            following = dataclasses.replace(
                state,
                candidates=tuple(
                    each
                    for each in state.candidates
                    if each.id != wanted and not expired(each, now)
                ),
            )
            value = await in_worker_thread(prepare_snapshot, following)
            deadline.check("preparing the commit")
        await self._written(app, state, value)
        return PublicationReceipt("reject", state.revision + 1, state.published_revision, wanted)

    def reject_sync(
        self,
        app: PublicationApp,
        *,
        revision: int,
        candidate_id: str,
        context: ContextArgument = None,
        timeout: float | None = None,
    ) -> PublicationReceipt:
        """The blocking twin of :meth:`reject`."""
        return run_sync(
            self.reject(
                app, revision=revision, candidate_id=candidate_id, context=context, timeout=timeout
            )
        )

    # -- the steps ------------------------------------------------------------------

    def _frozen(
        self, request: dict[str, Any], context: ContextArgument
    ) -> tuple[dict[str, Any], ExecutionContext]:
        """The request and the caller as plain JSON, copied before the first await."""
        caller = ExecutionContext.of(context)
        frozen = frozen_json(request, "request")
        frozen_caller = frozen_json(caller.to_json(), "context")
        frozen["publication"] = self.name
        frozen["namespace"] = caller.namespace or DEFAULT_NAMESPACE
        return frozen, ExecutionContext.from_json(frozen_caller)

    async def _authorized(
        self, action: str, request: dict[str, Any], caller: ExecutionContext
    ) -> None:
        await call_assertion(
            "authorize",
            self._authorize,
            action,
            json_copy(request),
            ExecutionContext.from_json(caller.to_json()),
            rejected="PUBLICATION_UNAUTHORIZED",
        )

    async def _verified(self, sources: Sequence[SourceReference], caller: ExecutionContext) -> None:
        await call_assertion(
            "verify_sources",
            self._verify_sources,
            [source.to_json() for source in sources],
            ExecutionContext.from_json(caller.to_json()),
            rejected="PUBLICATION_SOURCES_REJECTED",
        )

    async def _read(self, app: PublicationApp, caller: ExecutionContext) -> PublicationState:
        namespace = caller.namespace or DEFAULT_NAMESPACE
        stored = await record_store_of(app).read(namespace, record_key(self.name))
        return state_from_record(self.name, namespace, stored)

    async def _written(
        self, app: PublicationApp, state: PublicationState, value: dict[str, Any]
    ) -> None:
        store, key = record_store_of(app), record_key(self.name)
        if not await swap_record(store, state.namespace, key, state.revision, value):
            raise FevexRunError(
                "PUBLICATION_CONFLICT",
                f"Publication {self.name} changed after revision {state.revision} was read "
                "(another proposal, publication or rejection came first); nothing was written. "
                "Read it again and decide on the new revision.",
                details={"publication": self.name, "revision": state.revision},
            )

    def _expiry(self, now: str, sources: Sequence[SourceReference]) -> str:
        """The retention after ``now``, never past a source's own expiry."""
        ends = [instant(source.expires_at) for source in sources if source.expires_at]
        return iso(min([instant(now) + timedelta(seconds=self.candidate_retention), *ends]))

    def _published(
        self, state: PublicationState, candidate: Candidate, caller: ExecutionContext
    ) -> PublicationState:
        now = utc_now()
        published_revision = state.published_revision + 1
        entry = PublishedDocument(
            candidate.document,
            candidate.sources,
            candidate.id,
            published_revision,
            now,
            actor_of(caller),
        )
        kept = [each for each in state.documents if each.document.id != candidate.document.id]
        return dataclasses.replace(
            state,
            published_revision=published_revision,
            documents=tuple(sorted([*kept, entry], key=lambda each: each.document.id)),
            candidates=tuple(
                each
                for each in state.candidates
                if each.id != candidate.id and not expired(each, now)
            ),
        )


def define_knowledge_publication(
    *,
    name: str,
    authorize: Callable[..., Any],
    verify_sources: Callable[..., Any],
    max_candidates: int = 32,
    candidate_retention: float = 7 * 86_400,
    required_reads: Sequence[RequiredRead | Mapping[str, Any]] = (),
    max_read_chars: int = 12_000,
) -> KnowledgePublication:
    """A publication of official knowledge named ``name``.

    ``authorize(action, request, context)`` is asked before every operation (``action``
    is ``"read"``, ``"propose"``, ``"publish"`` or ``"reject"``; ``request`` a copy of what
    was asked) and ``verify_sources(sources, context)`` before a candidate is written and
    again before it is published; both return ``None`` and raise to refuse.
    ``max_candidates`` bounds the live candidates, ``candidate_retention`` (seconds) how
    long one lives (never past its sources' ``expires_at``). ``required_reads`` are what
    agents are given (every document whole when empty), ``max_read_chars`` their total
    length. ``INVALID_PUBLICATION`` for a value out of range."""
    check_callable("authorize", authorize, required=True)
    check_callable("verify_sources", verify_sources, required=True)
    if not isinstance(name, str) or not is_valid_name(name):
        raise _invalid(f"name must match [A-Za-z0-9_-]{{1,64}}, not {name!r}.")
    for key, value in {"max_candidates": max_candidates, "max_read_chars": max_read_chars}.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise _invalid(f"{key} must be an integer of 1 or more, not {value!r}.")
    if (
        not isinstance(candidate_retention, int | float)
        or isinstance(candidate_retention, bool)
        or not 0 < candidate_retention <= 366 * 86_400
    ):
        raise _invalid(
            f"candidate_retention must be seconds above 0, at most a year, not "
            f"{candidate_retention!r}."
        )
    return KnowledgePublication(
        name,
        authorize,
        verify_sources,
        max_candidates,
        float(candidate_retention),
        _reads(required_reads),
        max_read_chars,
    )


def _reads(required_reads: Any) -> tuple[RequiredRead, ...]:
    if isinstance(required_reads, str | bytes | Mapping) or not isinstance(
        required_reads, Sequence
    ):
        raise _invalid("required_reads must be a list of RequiredRead.")
    reads = []
    for read in required_reads:
        if isinstance(read, Mapping):
            unknown = set(read) - {"document_id", "section"}
            if unknown:
                raise _invalid(f"a required read has unknown fields {sorted(unknown)}.")
            read = RequiredRead(read.get("document_id"), read.get("section"))  # type: ignore[arg-type]
        if (
            not isinstance(read, RequiredRead)
            or not isinstance(read.document_id, str)
            or not is_valid_name(read.document_id)
            or not (read.section is None or (isinstance(read.section, str) and read.section))
        ):
            raise _invalid(
                f"{read!r} is not a required read: RequiredRead(document_id, section=None)."
            )
        reads.append(read)
    return tuple(reads)


def _invalid(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("INVALID_PUBLICATION", message)
