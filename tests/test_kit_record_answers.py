"""What the family and publication kits take from the app's record store and callbacks, on
the in-memory store, SQLite and PostgreSQL: only ``True`` (written) or ``False`` (refused)
answers a compare-and-swap, any other answer is the one stable code both kits raise and
nothing is reported as written; a rejecting callback whose exception cannot even be shown
as text is still the kit's own code."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from fevex import Fevex, create_fevex
from fevex.errors import FevexError
from fevex.kits.family import define_agent_family
from fevex.kits.publication import define_knowledge_publication
from fevex.runtime import ExecutionContext, RecordStore, StoredRecord

pytestmark = pytest.mark.anyio

ANA = ExecutionContext(actor={"id": "ana", "type": "editor"}, namespace="acme")


def _accept(*_: Any) -> None:
    return None


FAMILY = define_agent_family(name="goals", authorize=_accept)
PUBLICATION = define_knowledge_publication(
    name="handbook", authorize=_accept, verify_sources=_accept
)
GUIDE = {"id": "guide", "revision": 1, "body": "# Guide\nShip within two days."}
SOURCE = {"id": "handbook", "version": "3"}


class Answers:
    """A record store whose compare-and-swap writes nothing and answers ``answer``."""

    def __init__(self, inner: RecordStore, answer: Any) -> None:
        self.inner = inner
        self.answer = answer
        self.asked = 0

    async def read(self, namespace: str, key: str) -> StoredRecord | None:
        return await self.inner.read(namespace, key)

    async def compare_and_swap(
        self, namespace: str, key: str, expected_revision: int, value: Mapping[str, Any]
    ) -> Any:
        self.asked += 1
        return self.answer

    async def close(self) -> None:
        await self.inner.close()


def _app(url: str | None) -> Fevex:
    return create_fevex(run_store=url)


@pytest.mark.parametrize("answer", [1, 0, "yes", "no", {"written": True}, None])
async def test_a_swap_answer_that_is_not_a_receipt_is_the_same_code_in_both_kits(
    url: str | None, answer: Any
) -> None:
    async with _app(url) as app:
        inner = app.record_store
        answers = Answers(inner, answer)
        app.record_store = answers
        with pytest.raises(FevexError) as family:
            await FAMILY.create(app, {"goal": "refunds"}, family_id="fam-1", context=ANA)
        with pytest.raises(FevexError) as publication:
            await PUBLICATION.propose(
                app, revision=0, document=GUIDE, sources=[SOURCE], context=ANA
            )
        assert answers.asked == 2
        assert family.value.code == publication.value.code == "RECORD_COMMIT_UNCERTAIN"
        assert family.value.details["cause"] == type(answer).__name__
        app.record_store = inner
        with pytest.raises(FevexError) as missing:
            await FAMILY.get(app, "fam-1", context=ANA)
        assert missing.value.code == "FAMILY_NOT_FOUND"
        assert (await PUBLICATION.get(app, context=ANA)).revision == 0


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for this exception")


def _refuse(*_: Any) -> None:
    raise Unprintable


async def test_a_rejection_that_cannot_be_shown_as_text_is_still_the_kits_code(
    url: str | None,
) -> None:
    family = define_agent_family(name="goals", authorize=_refuse)
    publication = define_knowledge_publication(
        name="handbook", authorize=_refuse, verify_sources=_accept
    )
    async with _app(url) as app:
        with pytest.raises(FevexError) as refused:
            await family.create(app, {"goal": "refunds"}, family_id="fam-1", context=ANA)
        assert refused.value.code == "FAMILY_UNAUTHORIZED"
        assert isinstance(refused.value.__cause__, Unprintable)
        assert refused.value.details["cause"] == "Unprintable"
        with pytest.raises(FevexError) as missing:
            await FAMILY.get(app, "fam-1", context=ANA)
        assert missing.value.code == "FAMILY_NOT_FOUND"
        with pytest.raises(FevexError) as unauthorized:
            await publication.propose(
                app, revision=0, document=GUIDE, sources=[SOURCE], context=ANA
            )
        assert unauthorized.value.code == "PUBLICATION_UNAUTHORIZED"
