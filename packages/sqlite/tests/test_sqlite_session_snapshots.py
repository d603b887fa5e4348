"""A store keeps the sessions it last read or wrote, and still sees every other writer's
change: two stores on one file (as two processes would open it) take turns on a session."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fevex import Fevex, create_fevex, define_agent
from fevex.models import Completed, ModelInput, ModelResult, ModelStreamEvent, OutputDelta, Usage
from fevex.runtime import Session
from fevex_sqlite import SQLiteRunStore

pytestmark = pytest.mark.anyio


class SeenModel:
    """Answers with what it was sent: the texts of the session's messages."""

    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        answer = "|".join(message.text for message in input.messages[1:])
        yield OutputDelta(delta=answer)
        usage = Usage(input_tokens=1, output_tokens=1, total_tokens=2)
        yield Completed(result=ModelResult(output=answer, usage=usage))


def app_on(path: Path) -> Fevex:
    return create_fevex(
        models={"default": SeenModel()},
        agents=[define_agent(name="notes", instructions="Keep notes.")],
        run_store=SQLiteRunStore(path),
    )


async def test_a_store_sees_the_turns_and_replacements_of_another_store(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    first, second = app_on(path), app_on(path)
    try:
        one = await first.run_agent("notes", input="a")
        session_id = one.session_id
        assert one.output == "a"
        two = await second.run_agent("notes", input="b", session_id=session_id)
        assert two.output == "a|a|b"
        # The first store's snapshot of the session is two revisions old: it reads again.
        three = await first.run_agent("notes", input="c", session_id=session_id)
        assert three.output == "a|a|b|a|a|b|c"
        read = await first.run_store.get_session(session_id)
        assert read is not None
        assert [m.text for m in read.messages()][-2:] == ["c", "a|a|b|a|a|b|c"]

        # The second store replaces the history (a summary, say); the first follows.
        stale = await second.run_store.get_session(session_id)
        assert stale is not None
        short = Session(stale.id, stale.created_at, stale.updated_at, stale.history[-2:])
        await second.run_store.save_session(short, expected_revision=stale.revision)
        four = await first.run_agent("notes", input="d", session_id=session_id)
        assert four.output == "c|a|a|b|a|a|b|c|d"
        again = await second.run_store.get_session(session_id)
        assert again is not None
        assert len(again.history) == 4
        assert again == await first.run_store.get_session(session_id)
    finally:
        await first.close()
        await second.close()
