"""A run whose model streams a million one-character deltas completes on every store,
holding its lease all along (a lease far shorter than the stream: a keeper the stream
starved would lose it), and keeps a few events rather than one per character."""

from __future__ import annotations

import string
import time
from collections.abc import AsyncIterator

import pytest

from fevex import RunCancelledError, create_fevex, define_agent
from fevex.models import Completed, ModelInput, ModelResult, ModelStreamEvent, OutputDelta, Usage

pytestmark = pytest.mark.anyio

DELTAS = 1_000_000
# Renewed every third of it; the stream lasts STREAM_LEASES of them: a keeper the stream
# starved would lose it. Two seconds: with one, a renewal on a machine running the suite's
# four workers on two cores sometimes took longer than the two thirds it had left.
LEASE = 2.0
STREAM_LEASES = 3
TEXT = (string.ascii_letters * (DELTAS // len(string.ascii_letters) + 1))[:DELTAS]


class CharacterStream:
    """Streams its answer one character per delta over STREAM_LEASES leases, never
    suspending: a model whose response is already buffered, read faster than it is paced."""

    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        started = time.monotonic()
        pace = STREAM_LEASES * LEASE / DELTAS
        for index, character in enumerate(TEXT):
            if index % 10_000 == 0:
                while time.monotonic() < started + index * pace:
                    pass  # busy, as parsing a buffered response is: no await
            yield OutputDelta(character)
        yield Completed(ModelResult(output=TEXT, usage=Usage(output_tokens=DELTAS)))


async def test_a_million_deltas_complete_with_the_lease_held(url: str | None) -> None:
    app = create_fevex(
        models={"default": CharacterStream()},
        agents=[define_agent(name="writer", instructions="Write.")],
        run_store=url,
        lease_seconds=LEASE,
    )
    try:
        started = time.monotonic()
        result = await app.run_agent("writer", "go", timeout=240)
        took = time.monotonic() - started
        assert took > (STREAM_LEASES - 1) * LEASE, "the stream must outlast its lease"
        assert result.output == TEXT
        run = await app.get_run(result.run_id)
        assert run.status == "completed", run.error
        stored = await app.list_events(result.run_id, limit=10_000)
        assert [e.id for e in stored] == [e.id for e in result.events]
        deltas = [e.payload["delta"] for e in stored if e.type == "model.output.delta"]
        assert "".join(deltas) == TEXT
        # The step's first thousand deltas as they came, the rest joined: not a million.
        assert deltas[:1000] == list(TEXT[:1000])
        assert len(deltas) < 1100
        sequences = [e.sequence for e in stored]
        assert sequences == list(range(1, len(stored) + 1))
    finally:
        await app.close()


async def test_the_deadline_still_stops_a_stream_that_never_suspends(url: str | None) -> None:
    class Endless:
        async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
            while True:
                yield OutputDelta("x")

    app = create_fevex(
        models={"default": Endless()},
        agents=[define_agent(name="writer", instructions="Write.")],
        run_store=url,
        lease_seconds=4 * LEASE,  # this one is about the deadline alone
    )
    try:
        started = time.monotonic()
        with pytest.raises(RunCancelledError) as caught:
            await app.run_agent("writer", "go", timeout=1.0)
        assert time.monotonic() - started < 10
        assert caught.value.reason == "timeout"
        assert caught.value.run_id is not None
        run = await app.get_run(caught.value.run_id)
        assert run.status == "cancelled"
    finally:
        await app.close()
