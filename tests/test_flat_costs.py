"""What a page, a search or a turn costs does not grow with what the store holds.

Costs are counted, not timed, so that the machine's load cannot move them: the function
calls the interpreter makes (``sys.setprofile``: Python and C calls, on every thread the call
uses) and the memory allocated at the peak (``tracemalloc``), both the same on every run. A
scan of the whole store shows in one of them: a copied tail of events in the memory, a
filter tried on every run or a message rebuilt per history entry in the calls. What SQLite
does below the driver is not a Python call: a turn's cost there is counted in the bytes the
process writes (``wchar`` in ``/proc/self/io``), where a history rewritten whole by every
turn shows. The CPU ratios at the issue's sizes are measured by ``benchmarks/flat_costs.py``.
"""

from __future__ import annotations

import sys
import threading
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from fevex import Fevex, create_fevex, define_agent
from fevex.events import RunEvent
from fevex.knowledge import InMemoryMemoryStore
from fevex.models import Completed, ModelInput, ModelResult, ModelStreamEvent, OutputDelta, Usage
from fevex.runtime import (
    AgentRun,
    ExecutionCommit,
    ExecutionCreate,
    InMemoryRunStore,
    RunStore,
    Session,
)
from fevex_sqlite import SQLiteRunStore

pytestmark = pytest.mark.anyio

CREATED = "2026-01-01T00:00:00.000000Z"
SMALL, LARGE = 1_000, 100_000


PROC_IO = Path("/proc/self/io")
HAS_PROC_IO = PROC_IO.exists()


def bytes_written() -> int:
    """The bytes this process has passed to ``write`` and its kin so far (Linux)."""
    with PROC_IO.open(encoding="ascii") as counters:
        for line in counters:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    raise AssertionError("/proc/self/io has no wchar line")


async def calls_made(call: Callable[[], Awaitable[object]]) -> int:
    """How many Python and C function calls awaiting ``call()`` makes, on every thread."""
    made = 0

    def count(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal made
        if event in ("call", "c_call"):
            made += 1

    threading.setprofile(count)  # type: ignore[arg-type]
    sys.setprofile(count)  # type: ignore[arg-type]
    try:
        await call()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return made


async def peak_bytes(call: Callable[[], Awaitable[object]]) -> int:
    """The most memory awaiting ``call()`` held allocated at once."""
    tracemalloc.start()
    try:
        await call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def new_run(number: int, name: str = "pager") -> AgentRun:
    created = f"2026-01-01T00:00:00.{number:09d}Z"
    return AgentRun(
        f"run_{number:09d}", f"ses_{number:09d}", name, "running", "x", created, created
    )


async def events_store(size: int) -> InMemoryRunStore:
    store = InMemoryRunStore()
    run = new_run(0)
    events = tuple(
        RunEvent(f"evt_{n}", run.id, n, "model.output.delta", CREATED, {"delta": "x"})
        for n in range(1, size + 1)
    )
    await store.create_execution(ExecutionCreate(run, None, events, {}, "loader", 3600.0))
    return store


@pytest.mark.parametrize("order", ["asc", "desc"])
@pytest.mark.parametrize("where", ["first", "middle"])
async def test_a_page_of_events_costs_the_same_in_a_run_of_a_hundred_thousand(
    order: str, where: str
) -> None:
    costs = []
    for size in (SMALL, LARGE):
        store = await events_store(size)
        after = None if where == "first" else f"evt_{size // 2}"

        async def page(store: InMemoryRunStore = store, after: str | None = after) -> object:
            found = await store.list_events("run_000000000", after=after, limit=100, order=order)  # type: ignore[arg-type]
            assert len(found) == 100
            return found

        costs.append((await calls_made(page), await peak_bytes(page)))
    (small_calls, small_bytes), (large_calls, large_bytes) = costs
    assert large_calls <= small_calls * 1.5, costs
    # Copying the run's tail before taking a page held 8 bytes an event: 400 kB here.
    assert large_bytes <= small_bytes * 1.5 + 4_096, costs


async def runs_store(size: int) -> InMemoryRunStore:
    store = InMemoryRunStore()
    for number in range(size):
        run = new_run(number, f"agent-{number % 10}")
        await store.create_execution(ExecutionCreate(run, None, (), {}, "loader", 3600.0))
    return store


async def test_a_page_of_runs_costs_the_same_in_a_store_of_a_hundred_thousand() -> None:
    stores = [(size, await runs_store(size)) for size in (SMALL, LARGE)]
    for name in (None, "agent-3"):
        for where in ("first", "middle"):
            costs = []
            for size, store in stores:
                after = None if where == "first" else new_run(size // 2).id

                async def page(
                    store: InMemoryRunStore = store,
                    after: str | None = after,
                    name: str | None = name,
                ) -> None:
                    found = await store.list_runs(name=name, after=after, limit=50)
                    assert len(found) == 50
                    assert all(name in (None, run.name) for run in found)

                costs.append(await calls_made(page))
            small, large = costs
            assert large <= small * 1.5, (name, where, costs)


async def test_a_page_of_runs_follows_a_status_change() -> None:
    store = InMemoryRunStore()
    leases = []
    for number in range(30):
        create = ExecutionCreate(new_run(number), None, (), {}, "loader", 3600.0)
        leases.append(await store.create_execution(create))
    await store.commit_execution(
        ExecutionCommit(new_run(7).id, 1, CREATED, leases[7], (), {"status": "completed"})
    )
    completed = await store.list_runs(status="completed")
    assert [run.id for run in completed] == [new_run(7).id]
    running = await store.list_runs(status="running", limit=100)
    assert new_run(7).id not in [run.id for run in running]
    assert len(running) == 29


async def memories(size: int) -> InMemoryMemoryStore:
    store = InMemoryMemoryStore()
    for number in range(size):
        words = " ".join(f"w{(number * 7919 + i * 104729) % 4999:04d}x" for i in range(8))
        marked = " harbourmaster refundable parcel" if number % (size // 10) == 0 else ""
        await store.add("ns", f"Customer {number} said {words}.{marked}")
    return store


async def test_memory_search_costs_the_same_over_a_hundred_thousand_memories() -> None:
    costs = []
    for size in (SMALL, LARGE):
        store = await memories(size)

        async def search(store: InMemoryMemoryStore = store) -> None:
            # "refund" and "arcel" match inside words: the match is by substring.
            found = await store.search("ns", "harbourmaster refund arcel", limit=5)
            assert len(found) == 5
            assert all("harbourmaster refundable parcel" in memory.content for memory in found)

        costs.append(await calls_made(search))
    small, large = costs
    assert large <= small * 5, costs


class TurnModel:
    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        answer = f"{len(input.messages)} messages."
        yield OutputDelta(delta=answer)
        usage = Usage(input_tokens=1, output_tokens=1, total_tokens=2)
        yield Completed(result=ModelResult(output=answer, usage=usage))


def history(turns: int) -> tuple[dict[str, Any], ...]:
    messages = []
    for turn in range(turns):
        for role, text in (("user", f"Turn {turn}."), ("assistant", "Noted.")):
            messages.append({"role": role, "content": [{"type": "text", "text": text}]})
    return tuple(messages)


async def long_session(app: Fevex, turns: int) -> str:
    first = await app.run_agent("assistant", input="Hello.")
    session = await app.run_store.get_session(first.session_id)
    assert session is not None
    long = Session(session.id, session.created_at, session.updated_at, history(turns))
    await app.run_store.save_session(long, expected_revision=session.revision)
    return first.session_id


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_one_more_turn_costs_the_same_on_a_session_of_a_thousand_turns(
    kind: str, tmp_path: Path
) -> None:
    if kind == "sqlite" and not HAS_PROC_IO:
        pytest.skip("no /proc/self/io here to count the bytes a turn writes")
    costs, written = [], []
    for turns in (0, 1_000):
        store: RunStore = (
            InMemoryRunStore() if kind == "memory" else SQLiteRunStore(tmp_path / f"{turns}.db")
        )
        app = create_fevex(
            models={"default": TurnModel()},
            agents=[define_agent(name="assistant", instructions="Keep notes.")],
            run_store=store,
        )
        session_id = await long_session(app, turns)

        async def turn(app: Fevex = app, session_id: str = session_id) -> None:
            result = await app.run_agent("assistant", input="More.", session_id=session_id)
            assert str(result.output).endswith(" messages.")

        await turn()  # the first turn after save_session reads the history once
        before = bytes_written() if kind == "sqlite" else 0
        counted = sorted([await calls_made(turn) for _ in range(5)])
        costs.append(counted[2])
        if kind == "sqlite":
            written.append((bytes_written() - before) / 5)
        stored = await app.run_store.get_session(session_id)
        assert stored is not None
        # Every turn was kept, and the last one's model was sent the whole history.
        assert len(stored.messages()) == 2 * turns + 12
        assert stored.history[-1]["content"][0]["text"] == f"{2 * turns + 12} messages."
        await app.close()
    small, large = costs
    assert large <= small * 1.5, costs
    if kind == "sqlite":
        # Each turn writes its own messages and the session row's few fields to the file
        # (and its WAL), not the 2,000 messages before it.
        assert written[1] <= written[0] * 1.5, written
