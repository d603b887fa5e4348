"""Knowledge publication (``fevex.kits.publication``) on the in-memory store, SQLite and
PostgreSQL: candidates are written beside the official set and never read by agents; a
publication re-authorizes, re-reads, verifies its sources, compiles the whole set and
checks every deadline after each await, then replaces the official set in one
compare-and-swap; a swap under way is awaited to its receipt; callbacks get copies."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest

from fevex import Fevex, create_fevex, define_agent
from fevex.errors import FevexConfigurationError, FevexRunError
from fevex.kits.publication import (
    KnowledgePublication,
    RequiredRead,
    define_knowledge_publication,
)
from fevex.kits.publication import commit as commit_module
from fevex.kits.publication import definition as definition_module
from fevex.kits.publication.compiler import CompileCache
from fevex.models import ModelInput
from fevex.runtime import ExecutionContext, InMemoryRecordStore, RecordStore, StoredRecord
from fevex.testing import FunctionModel

pytestmark = pytest.mark.anyio

# Rebound for each test by _own_namespace.
NAMESPACE = "acme"
EDITOR = ExecutionContext(actor={"id": "ana", "type": "editor"}, namespace=NAMESPACE)
READER = ExecutionContext(actor={"id": "bob", "type": "reader"}, namespace=NAMESPACE)
SOURCE = {"id": "handbook", "version": "3"}
GUIDE = "# Guide\nShip within two days.\n## Refunds\nRefunds within 30 days.\n## Returns\nBy mail."


@pytest.fixture(autouse=True)
def _own_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test publishes in a namespace of its own: one PostgreSQL database serves the
    whole session."""
    namespace = f"acme-{uuid.uuid4().hex[:8]}"
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "NAMESPACE", namespace)
    for name, actor in (("EDITOR", EDITOR.actor), ("READER", READER.actor)):
        monkeypatch.setattr(module, name, ExecutionContext(actor=actor, namespace=namespace))


class Calls:
    """What the callbacks were asked, outside fevex."""

    def __init__(self) -> None:
        self.authorized: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        self.verified: list[list[dict[str, Any]]] = []
        self.verify_delay = 0.0
        self.refuse_source: str | None = None


def _publication(calls: Calls, **options: Any) -> KnowledgePublication:
    def authorize(action: str, request: dict[str, Any], context: ExecutionContext) -> None:
        calls.authorized.append((action, request, context.to_json()))
        actor = context.actor or {}
        if action in {"publish", "reject"} and actor.get("type") != "editor":
            raise PermissionError("only editors publish")

    async def verify_sources(sources: list[dict[str, Any]], context: ExecutionContext) -> None:
        calls.verified.append(sources)
        if calls.verify_delay:
            await asyncio.sleep(calls.verify_delay)
        for source in sources:
            if source["id"] == calls.refuse_source:
                raise LookupError(f"{source['id']} has a newer version")

    settings: dict[str, Any] = {
        "name": "handbook",
        "authorize": authorize,
        "verify_sources": verify_sources,
        "required_reads": [RequiredRead("guide", section="Refunds")],
        "max_read_chars": 2_000,
    }
    return define_knowledge_publication(**(settings | options))


def _guide(revision: int, body: str = GUIDE, **fields: Any) -> dict[str, Any]:
    return {"id": "guide", "revision": revision, "body": body, "title": "Guide", **fields}


def _app(url: str | None, model: Any = None, provider: Any = None) -> Fevex:
    agent = define_agent(name="support", instructions="Answer.", context=["handbook"])
    app = create_fevex(
        models={"default": model or FunctionModel(lambda model_input: "ok")},
        agents=[agent] if provider else [],
        context_providers=[provider] if provider else [],
        run_store=url,
    )
    return app


async def _published(pub: KnowledgePublication, app: Fevex, body: str = GUIDE) -> Any:
    state = await pub.get(app, context=EDITOR)
    proposal = await pub.propose(
        app,
        revision=state.revision,
        document=_guide(_next_revision(state), body),
        sources=[SOURCE],
        context=EDITOR,
    )
    return await pub.publish(
        app, revision=proposal.revision, candidate_id=proposal.candidate_id, context=EDITOR
    )


def _next_revision(state: Any) -> int:
    found = [each.document.revision for each in state.documents if each.document.id == "guide"]
    return (found[0] if found else 0) + 1


async def _stored(app: Fevex) -> StoredRecord | None:
    return await app.record_store.read(NAMESPACE, "publication:handbook")


def _given_context(model_input: ModelInput) -> list[Any]:
    """The items of the handbook's data block the model was given."""
    for message in model_input.messages:
        if message.role == "user" and "context provider 'handbook'" in message.text:
            payload = message.text.split("<data>\n", 1)[1].rsplit("\n</data>", 1)[0]
            return list(json.loads(payload))
    return []


async def test_agents_read_published_documents_only_never_candidates(url: str | None) -> None:
    calls = Calls()
    pub = _publication(calls)
    seen: list[list[Any]] = []

    def model(model_input: ModelInput) -> str:
        seen.append(_given_context(model_input))
        return "ok"

    async with _app(url, FunctionModel(model), pub.context_provider()) as app:
        await app.run_agent("support", "Hello", context=READER)
        assert seen[-1] == []  # nothing published yet
        first = await _published(pub, app)
        assert (first.revision, first.published_revision) == (2, 1)
        candidate = await pub.propose(
            app,
            revision=first.revision,
            document=_guide(2, GUIDE.replace("30 days", "CANDIDATE 90 days")),
            sources=[SOURCE],
            context=EDITOR,
        )
        assert candidate.published_revision == 1
        await app.run_agent("support", "Hello", context=READER)
        catalog, refunds = seen[-1]
        assert catalog["id"] == "handbook:catalog"
        assert catalog["content"]["published_revision"] == 1
        assert catalog["content"]["documents"] == [{"id": "guide", "revision": 1, "title": "Guide"}]
        assert refunds["id"] == "handbook:guide@1#Refunds"
        assert refunds["content"]["text"] == "## Refunds\nRefunds within 30 days."
        assert "CANDIDATE" not in json.dumps(seen)
        # The candidate waits beside the official set, in the same record.
        state = await pub.get(app, context=READER)
        assert [each.id for each in state.candidates] == [candidate.candidate_id]
        await pub.publish(
            app, revision=candidate.revision, candidate_id=candidate.candidate_id, context=EDITOR
        )
        await app.run_agent("support", "Hello", context=READER)
        assert seen[-1][1]["content"]["text"] == "## Refunds\nRefunds within CANDIDATE 90 days."
        # Another namespace has a publication of its own, empty.
        await app.run_agent("support", "Hello", context=ExecutionContext(namespace="other"))
        assert seen[-1] == []
        stored = await _stored(app)
        assert stored is not None
        assert stored.revision == 4
    if url is not None:
        # Another app on the same database (another process, say) serves the same set.
        fresh = _publication(Calls())  # nothing cached
        async with _app(url, FunctionModel(model), fresh.context_provider()) as other:
            await other.run_agent("support", "Hello", context=READER)
            assert seen[-1][0]["content"]["published_revision"] == 2
            assert seen[-1][1]["content"]["text"].endswith("CANDIDATE 90 days.")
        assert stored.value["published_revision"] == 2
        assert stored.value["candidates"] == []


async def test_propose_writes_only_a_candidate_after_compiling_the_whole_set(
    url: str | None,
) -> None:
    calls = Calls()
    pub = _publication(calls)
    async with _app(url) as app:
        # The first document must already hold the section every agent is given.
        with pytest.raises(FevexRunError) as caught:
            await pub.propose(
                app,
                revision=0,
                document=_guide(1, "# Guide\nNo refunds section."),
                sources=[SOURCE],
                context=EDITOR,
            )
        assert caught.value.code == "PUBLICATION_INVALID"
        assert caught.value.details["problem"] == "missing_section"
        with pytest.raises(FevexRunError) as caught:
            await pub.propose(
                app,
                revision=0,
                document={"id": "faq", "revision": 1, "body": "Q and A"},
                sources=[SOURCE],
                context=EDITOR,
            )
        assert caught.value.details["problem"] == "missing_document"
        assert await _stored(app) is None
        await _published(pub, app)
        # A document beside the guide: compiled with the official guide it would join.
        faq = await pub.propose(
            app,
            revision=2,
            document={"id": "faq", "revision": 1, "body": "Q and A", "metadata": {"lang": "en"}},
            sources=[SOURCE],
            context=EDITOR,
        )
        state = await pub.get(app, context=EDITOR)
        assert [each.document.id for each in state.documents] == ["guide"]
        assert state.published_revision == 1
        assert state.revision == 3
        assert state.candidates[0].id == faq.candidate_id
        assert state.candidates[0].document.metadata == {"lang": "en"}
        # Reads longer than max_read_chars are refused for the whole set.
        long = GUIDE.replace("30 days", "30 days " + "x" * 2_500)
        with pytest.raises(FevexRunError) as caught:
            await pub.propose(
                app, revision=3, document=_guide(2, long), sources=[SOURCE], context=EDITOR
            )
        assert caught.value.details["problem"] == "too_long"
        assert (await pub.get(app, context=EDITOR)).revision == 3


async def test_a_changed_body_or_metadata_needs_a_new_document_revision(url: str | None) -> None:
    pub = _publication(Calls())
    async with _app(url) as app:
        await _published(pub, app)
        for document in (
            _guide(1, GUIDE + "\nMore."),
            _guide(1, metadata={"lang": "fr"}),
            _guide(1),  # unchanged
        ):
            with pytest.raises(FevexRunError) as caught:
                await pub.propose(
                    app, revision=2, document=document, sources=[SOURCE], context=EDITOR
                )
            assert caught.value.code == "PUBLICATION_REVISION_REQUIRED"
        assert (await pub.get(app, context=EDITOR)).revision == 2
        accepted = await pub.propose(
            app,
            revision=2,
            document=_guide(2, metadata={"lang": "fr"}),
            sources=[SOURCE],
            context=EDITOR,
        )
        assert accepted.revision == 3


async def test_a_candidate_built_on_an_outdated_published_revision_is_stale(
    url: str | None,
) -> None:
    pub = _publication(Calls())
    async with _app(url) as app:
        await _published(pub, app)
        first = await pub.propose(
            app, revision=2, document=_guide(2), sources=[SOURCE], context=EDITOR
        )
        second = await pub.propose(
            app,
            revision=first.revision,
            document=_guide(3, GUIDE + "\nSecond."),
            sources=[SOURCE],
            context=EDITOR,
        )
        # A publish over a revision read before the second proposal: the record moved.
        with pytest.raises(FevexRunError) as caught:
            await pub.publish(
                app, revision=first.revision, candidate_id=first.candidate_id, context=EDITOR
            )
        assert caught.value.code == "PUBLICATION_CONFLICT"
        done = await pub.publish(
            app, revision=second.revision, candidate_id=second.candidate_id, context=EDITOR
        )
        with pytest.raises(FevexRunError) as caught:
            await pub.publish(
                app, revision=done.revision, candidate_id=first.candidate_id, context=EDITOR
            )
        assert caught.value.code == "PUBLICATION_STALE"
        assert caught.value.details["base_published_revision"] == 1
        state = await pub.get(app, context=EDITOR)
        assert state.revision == done.revision
        assert state.published_revision == 2
        assert state.documents[0].document.revision == 3
        rejected = await pub.reject(
            app, revision=done.revision, candidate_id=first.candidate_id, context=EDITOR
        )
        assert (await pub.get(app, context=EDITOR)).candidates == ()
        with pytest.raises(FevexRunError) as caught:
            await pub.publish(
                app, revision=rejected.revision, candidate_id=first.candidate_id, context=EDITOR
            )
        assert caught.value.code == "PUBLICATION_CANDIDATE_NOT_FOUND"


async def test_publish_re_authorizes_and_re_verifies_the_sources(url: str | None) -> None:
    calls = Calls()
    pub = _publication(calls)
    async with _app(url) as app:
        proposal = await pub.propose(
            app, revision=0, document=_guide(1), sources=[SOURCE], context=READER
        )
        # Anyone may propose; only an editor publishes, and nothing is written otherwise.
        with pytest.raises(FevexRunError) as caught:
            await pub.publish(
                app, revision=proposal.revision, candidate_id=proposal.candidate_id, context=READER
            )
        assert caught.value.code == "PUBLICATION_UNAUTHORIZED"
        assert isinstance(caught.value.__cause__, PermissionError)
        calls.refuse_source = "handbook"
        with pytest.raises(FevexRunError) as caught:
            await pub.publish(
                app, revision=proposal.revision, candidate_id=proposal.candidate_id, context=EDITOR
            )
        assert caught.value.code == "PUBLICATION_SOURCES_REJECTED"
        assert calls.verified[-1] == [{"id": "handbook", "version": "3", "expires_at": None}]
        stored = await _stored(app)
        assert stored is not None
        assert stored.revision == 1
        assert stored.value["published_revision"] == 0
        assert stored.value["documents"] == []
        assert [action for action, _, _ in calls.authorized] == ["propose", "publish", "publish"]
        assert calls.authorized[1][1] == {
            "revision": 1,
            "candidate_id": proposal.candidate_id,
            "publication": "handbook",
            "namespace": NAMESPACE,
        }


@pytest.mark.parametrize("returned", [False, True, 0, {"ok": True}])
async def test_an_assertion_returning_a_value_is_a_broken_contract(
    url: str | None, returned: Any
) -> None:
    async def verify_sources(sources: list[dict[str, Any]], context: ExecutionContext) -> Any:
        return returned

    pub = _publication(Calls(), verify_sources=verify_sources)
    async with _app(url) as app:
        with pytest.raises(FevexRunError) as caught:
            await pub.propose(app, revision=0, document=_guide(1), sources=[SOURCE], context=EDITOR)
        assert caught.value.code == "KIT_CALLBACK_CONTRACT"
        assert caught.value.details["callback"] == "verify_sources"
        assert await _stored(app) is None


async def test_verify_sources_returning_false_at_publish_writes_nothing(url: str | None) -> None:
    answer: list[Any] = [None]

    def verify_sources(sources: list[dict[str, Any]], context: ExecutionContext) -> Any:
        return answer[0]

    pub = _publication(Calls(), verify_sources=verify_sources)
    async with _app(url) as app:
        proposal = await pub.propose(
            app, revision=0, document=_guide(1), sources=[SOURCE], context=EDITOR
        )
        answer[0] = False
        with pytest.raises(FevexRunError) as caught:
            await pub.publish(
                app, revision=proposal.revision, candidate_id=proposal.candidate_id, context=EDITOR
            )
        assert caught.value.code == "KIT_CALLBACK_CONTRACT"
        stored = await _stored(app)
        assert stored is not None
        assert stored.revision == 1
        assert stored.value["documents"] == []


async def test_requests_are_frozen_and_callbacks_cannot_rewrite_what_is_stored(
    url: str | None,
) -> None:
    document = _guide(1)
    sources = [dict(SOURCE)]
    caller = {"actor": {"id": "ana", "type": "editor"}, "namespace": NAMESPACE}

    async def authorize(action: str, request: dict[str, Any], context: ExecutionContext) -> None:
        # The caller's own objects change while the kit awaits: the request was frozen.
        document["body"] = "# Guide\n## Refunds\nCHANGED BY CALLER"
        sources[0]["version"] = "99"
        caller["namespace"] = "elsewhere"
        request.setdefault("document", {})["body"] = "CHANGED BY AUTHORIZE"
        request["candidate_id"] = "candidate_forged"
        cast_context = context.to_json()
        cast_context["namespace"] = "elsewhere"

    def verify_sources(given: list[dict[str, Any]], context: ExecutionContext) -> None:
        # A copy of the stored candidate's sources: changing it changes nothing stored.
        given[0]["version"] = "forged"
        given.append({"id": "forged", "version": "1"})

    pub = _publication(Calls(), authorize=authorize, verify_sources=verify_sources)
    async with _app(url) as app:
        proposal = await pub.propose(
            app, revision=0, document=document, sources=sources, context=caller
        )
        assert caller["namespace"] == "elsewhere"
        await pub.publish(
            app, revision=proposal.revision, candidate_id=proposal.candidate_id, context=EDITOR
        )
        state = await pub.get(app, context=EDITOR)
        (entry,) = state.documents
        assert entry.document.body == GUIDE
        assert [source.to_json() for source in entry.sources] == [
            {"id": "handbook", "version": "3", "expires_at": None}
        ]
        assert entry.candidate_id == proposal.candidate_id
        assert (await app.record_store.read("elsewhere", "publication:handbook")) is None
        # What get returns is a copy too: changing it changes nothing stored.
        entry.document.metadata["forged"] = True  # type: ignore[index]
        again = await pub.get(app, context=EDITOR)
        assert again.documents[0].document.metadata == {}


async def test_source_expiry_is_never_extended_by_candidate_retention(url: str | None) -> None:
    calls = Calls()
    pub = _publication(calls, candidate_retention=3600)
    async with _app(url) as app:
        soon = time.time() + 0.6
        expiring = dict(SOURCE, expires_at=_iso(soon))
        proposal = await pub.propose(
            app, revision=0, document=_guide(1), sources=[expiring], context=EDITOR
        )
        assert proposal.expires_at == _iso(soon)  # not an hour
        await asyncio.sleep(max(0.0, soon - time.time()) + 0.05)
        with pytest.raises(FevexRunError) as caught:
            await pub.publish(
                app, revision=proposal.revision, candidate_id=proposal.candidate_id, context=EDITOR
            )
        assert caught.value.code == "PUBLICATION_SOURCE_EXPIRED"
        with pytest.raises(FevexRunError) as caught:
            await pub.propose(
                app, revision=1, document=_guide(1), sources=[expiring], context=EDITOR
            )
        assert caught.value.code == "PUBLICATION_SOURCE_EXPIRED"
        stored = await _stored(app)
        assert stored is not None
        assert stored.revision == 1
        assert stored.value["documents"] == []


async def test_deadlines_are_checked_again_after_verification_compilation_and_snapshot(
    url: str | None,
) -> None:
    calls = Calls()
    pub = _publication(calls, candidate_retention=0.5)
    async with _app(url) as app:
        # Verification outlasts the candidate: expired, nothing written.
        proposal = await pub.propose(
            app, revision=0, document=_guide(1), sources=[SOURCE], context=EDITOR
        )
        calls.verify_delay = 0.7
        with pytest.raises(FevexRunError) as caught:
            await pub.publish(
                app, revision=proposal.revision, candidate_id=proposal.candidate_id, context=EDITOR
            )
        assert caught.value.code == "PUBLICATION_CANDIDATE_EXPIRED"
        assert "after verify_sources" in caught.value.message
        calls.verify_delay = 0.0
        original_compile = CompileCache.compiled
        original_snapshot = commit_module.prepare_snapshot

        def slow_compile(self: CompileCache, *args: Any) -> Any:
            time.sleep(0.7)  # runs in a worker thread
            return original_compile(self, *args)

        def slow_snapshot(state: Any) -> Any:
            time.sleep(0.7)
            return original_snapshot(state)

        slowed = (
            ("compiling", CompileCache, "compiled", slow_compile),
            ("preparing the commit", definition_module, "prepare_snapshot", slow_snapshot),
        )
        for after, owner, attribute, slow in slowed:
            state = await pub.get(app, context=EDITOR)
            fresh = await pub.propose(
                app, revision=state.revision, document=_guide(1), sources=[SOURCE], context=EDITOR
            )
            with pytest.MonkeyPatch.context() as patching:
                patching.setattr(owner, attribute, slow)
                with pytest.raises(FevexRunError) as caught:
                    await pub.publish(
                        app,
                        revision=fresh.revision,
                        candidate_id=fresh.candidate_id,
                        context=EDITOR,
                    )
            assert caught.value.code == "PUBLICATION_CANDIDATE_EXPIRED", after
            assert f"after {after}" in caught.value.message
            stored = await _stored(app)
            assert stored is not None
            assert stored.revision == fresh.revision
            assert stored.value["documents"] == []
        # The operation's own timeout stops a verification that hangs.
        state = await pub.get(app, context=EDITOR)
        fresh = await pub.propose(
            app,
            revision=state.revision,
            document=_guide(1),
            sources=[SOURCE],
            context=EDITOR,
        )
        calls.verify_delay = 5.0
        started = time.monotonic()
        with pytest.raises(FevexRunError) as caught:
            await pub.publish(
                app,
                revision=fresh.revision,
                candidate_id=fresh.candidate_id,
                context=EDITOR,
                timeout=0.2,
            )
        assert caught.value.code == "PUBLICATION_TIMEOUT"
        assert time.monotonic() - started < 2.0
        assert (await pub.get(app, context=EDITOR)).published_revision == 0


class DelayedStore:
    """The app's record store, with a compare-and-swap that takes ``delay`` seconds
    after the real write (or, with ``before=True``, before it)."""

    def __init__(self, inner: RecordStore, delay: float, *, before: bool = False) -> None:
        self.inner = inner
        self.delay = delay
        self.before = before
        self.swaps: list[bool] = []
        self.started = asyncio.Event()

    async def read(self, namespace: str, key: str) -> StoredRecord | None:
        return await self.inner.read(namespace, key)

    async def compare_and_swap(
        self, namespace: str, key: str, expected_revision: int, value: Mapping[str, Any]
    ) -> bool:
        self.started.set()
        if self.before:
            await asyncio.sleep(self.delay)
        written = await self.inner.compare_and_swap(namespace, key, expected_revision, value)
        if not self.before:
            await asyncio.sleep(self.delay)
        self.swaps.append(written)
        return written

    async def close(self) -> None:
        await self.inner.close()


async def test_a_started_commit_waits_for_its_receipt_past_every_deadline(
    url: str | None,
) -> None:
    pub = _publication(Calls(), candidate_retention=0.4)
    async with _app(url) as app:
        proposal = await pub.propose(
            app, revision=0, document=_guide(1), sources=[SOURCE], context=EDITOR
        )
        app.record_store = DelayedStore(app.record_store, 0.8)
        # The swap outlasts both the operation's timeout and the candidate's expiry: the
        # store wrote it, so the publication happened and is reported as such.
        receipt = await pub.publish(
            app,
            revision=proposal.revision,
            candidate_id=proposal.candidate_id,
            context=EDITOR,
            timeout=0.3,
        )
        assert (receipt.revision, receipt.published_revision) == (2, 1)
        state = await pub.get(app, context=EDITOR)
        assert state.published_revision == 1
        assert state.candidates == ()


async def test_a_cancelled_publish_still_waits_for_the_swap_it_started(url: str | None) -> None:
    pub = _publication(Calls())
    async with _app(url) as app:
        proposal = await pub.propose(
            app, revision=0, document=_guide(1), sources=[SOURCE], context=EDITOR
        )
        delayed = DelayedStore(app.record_store, 0.5, before=True)
        app.record_store = delayed
        publishing = asyncio.ensure_future(
            pub.publish(
                app, revision=proposal.revision, candidate_id=proposal.candidate_id, context=EDITOR
            )
        )
        await delayed.started.wait()
        publishing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await publishing
        # The cancellation came while the swap ran: it was awaited, and it wrote.
        assert delayed.swaps == [True]
        assert (await pub.get(app, context=EDITOR)).published_revision == 1


async def test_a_swap_that_loses_after_a_deadline_is_a_conflict_not_a_timeout(
    url: str | None,
) -> None:
    pub = _publication(Calls())
    async with _app(url) as app:
        proposal = await pub.propose(
            app, revision=0, document=_guide(1), sources=[SOURCE], context=EDITOR
        )
        inner = app.record_store
        delayed = DelayedStore(inner, 0.6, before=True)
        app.record_store = delayed
        publishing = asyncio.ensure_future(
            pub.publish(
                app,
                revision=proposal.revision,
                candidate_id=proposal.candidate_id,
                context=EDITOR,
                timeout=0.2,
            )
        )
        await delayed.started.wait()
        # Another writer moves the record while the first swap is on its way.
        other = _publication(Calls())
        rival = SimpleNamespace(record_store=inner)
        await other.reject(
            rival, revision=proposal.revision, candidate_id=proposal.candidate_id, context=EDITOR
        )
        with pytest.raises(FevexRunError) as caught:
            await publishing
        assert caught.value.code == "PUBLICATION_CONFLICT"
        assert delayed.swaps == [False]


class LostAnswerStore(DelayedStore):
    """A store whose compare-and-swap writes, then fails before answering (a connection
    lost after the commit)."""

    async def compare_and_swap(
        self, namespace: str, key: str, expected_revision: int, value: Mapping[str, Any]
    ) -> bool:
        self.swaps.append(
            await self.inner.compare_and_swap(namespace, key, expected_revision, value)
        )
        raise ConnectionResetError("the server went away")


async def test_a_store_failing_during_the_commit_is_uncertain_never_a_rollback(
    url: str | None,
) -> None:
    pub = _publication(Calls())
    async with _app(url) as app:
        proposal = await pub.propose(
            app, revision=0, document=_guide(1), sources=[SOURCE], context=EDITOR
        )
        inner = app.record_store
        app.record_store = LostAnswerStore(inner, 0.0)
        with pytest.raises(FevexRunError) as caught:
            await pub.publish(
                app, revision=proposal.revision, candidate_id=proposal.candidate_id, context=EDITOR
            )
        assert caught.value.code == "RECORD_COMMIT_UNCERTAIN"
        assert caught.value.details["cause"] == "ConnectionResetError"
        app.record_store = inner
        # It was written: the error said it might have been, not that it was undone.
        assert (await pub.get(app, context=EDITOR)).published_revision == 1


async def test_the_compile_cache_checks_a_changed_content_under_the_same_revision() -> None:
    pub = _publication(Calls())
    async with _app(None) as app:
        await _published(pub, app)
        stored = await _stored(app)
        assert stored is not None
        assert stored.revision == 2
        faq = {"id": "faq", "revision": 1, "body": "Q and A"}
        await pub.propose(app, revision=2, document=faq, sources=[SOURCE], context=EDITOR)
        compilations = pub.cache.compilations
        # The same record in another store, at the same revision and published revision,
        # but its official guide lost the Refunds section (a backup restored, say).
        other = SimpleNamespace(record_store=InMemoryRecordStore())
        broken = json.loads(json.dumps(stored.value))
        broken["documents"][0]["document"]["body"] = "# Guide\nNo section."
        assert await other.record_store.compare_and_swap(NAMESPACE, "publication:handbook", 0, {})
        assert await other.record_store.compare_and_swap(
            NAMESPACE, "publication:handbook", 1, broken
        )
        with pytest.raises(FevexRunError) as caught:
            await pub.propose(other, revision=2, document=faq, sources=[SOURCE], context=EDITOR)
        assert caught.value.code == "PUBLICATION_INVALID"
        assert pub.cache.compilations == compilations + 1
        # The same content under the same revisions is taken from the cache.
        healthy = SimpleNamespace(record_store=InMemoryRecordStore())
        assert await healthy.record_store.compare_and_swap(NAMESPACE, "publication:handbook", 0, {})
        assert await healthy.record_store.compare_and_swap(
            NAMESPACE, "publication:handbook", 1, stored.value
        )
        await pub.propose(healthy, revision=2, document=faq, sources=[SOURCE], context=EDITOR)
        assert pub.cache.compilations == compilations + 1


async def test_max_candidates_bounds_the_live_candidates(url: str | None) -> None:
    pub = _publication(Calls(), max_candidates=2, candidate_retention=0.5)
    async with _app(url) as app:
        revision = 0
        for number in (1, 2):
            receipt = await pub.propose(
                app,
                revision=revision,
                document=_guide(number),
                sources=[SOURCE],
                context=EDITOR,
            )
            revision = receipt.revision
        with pytest.raises(FevexRunError) as caught:
            await pub.propose(
                app, revision=revision, document=_guide(3), sources=[SOURCE], context=EDITOR
            )
        assert caught.value.code == "PUBLICATION_CANDIDATES_FULL"
        await asyncio.sleep(0.6)
        # Expired candidates no longer count, and are dropped by the next write.
        receipt = await pub.propose(
            app, revision=revision, document=_guide(3), sources=[SOURCE], context=EDITOR
        )
        state = await pub.get(app, context=EDITOR)
        assert [each.id for each in state.candidates] == [receipt.candidate_id]


def test_definitions_and_requests_are_checked() -> None:
    calls = Calls()
    with pytest.raises(FevexRunError) as raised:
        define_knowledge_publication(
            name="h",
            authorize=True,  # type: ignore[arg-type]
            verify_sources=lambda sources, context: None,
        )
    assert raised.value.code == "KIT_CALLBACK_CONTRACT"
    for bad in (
        {"name": "no spaces"},
        {"max_candidates": 0},
        {"candidate_retention": 0},
        {"max_read_chars": True},
        {"required_reads": [{"document": "guide"}]},
    ):
        with pytest.raises(FevexConfigurationError) as refused:
            _publication(calls, **bad)
        assert refused.value.code == "INVALID_PUBLICATION"
    pub = _publication(calls)
    app = _app(None)
    with app:
        malformed: list[tuple[Any, Any]] = [
            ({"id": "guide", "revision": 0, "body": "x"}, [SOURCE]),
            ({"id": "guide", "revision": 1, "body": ""}, [SOURCE]),
            (_guide(1), []),
            (_guide(1), [SOURCE, None]),
            (_guide(1), [{"id": "h", "version": "1", "expires_at": "2026-01-01T00:00:00"}]),
            (_guide(1), [{"id": "h", "version": "1", "extra": 1}]),
            ({"id": "guide", "revision": 1, "body": object()}, [SOURCE]),
        ]
        for document, sources in malformed:
            with pytest.raises(FevexRunError) as caught:
                pub.propose_sync(
                    app, revision=0, document=document, sources=sources, context=EDITOR
                )
            assert caught.value.code == "KIT_REQUEST_INVALID", (document, sources)
        assert calls.authorized == []  # refused before the first await
        receipt = pub.propose_sync(
            app, revision=0, document=_guide(1), sources=[SOURCE], context=EDITOR
        )
        published = pub.publish_sync(
            app, revision=receipt.revision, candidate_id=receipt.candidate_id, context=EDITOR
        )
        assert published.published_revision == 1
        assert pub.get_sync(app, context=EDITOR).documents[0].document.revision == 1


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + (
        f".{int((seconds % 1) * 1_000_000):06d}Z"
    )


async def test_a_record_that_would_grow_past_the_limit_is_refused_whole() -> None:
    pub = _publication(Calls(), max_candidates=64)
    async with _app(None) as app:
        big = GUIDE + "\n" + "x" * 190_000
        revision = 0
        with pytest.raises(FevexRunError) as caught:
            for number in range(1, 40):
                receipt = await pub.propose(
                    app,
                    revision=revision,
                    document=_guide(number, big),
                    sources=[SOURCE],
                    context=EDITOR,
                )
                revision = receipt.revision
        assert caught.value.code == "PUBLICATION_INVALID"
        assert caught.value.details["problem"] == "too_large"
        stored = await _stored(app)
        assert stored is not None
        assert stored.revision == revision
        assert 15 < revision < 40
