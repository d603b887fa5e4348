"""The store's own thread: one trip per operation, cancellation, event loops, closing."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event

from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCommit, ExecutionCreate, RunLease
from fevex_sqlite import SQLiteRunStore

NOW = "2030-01-01T00:00:00.000000Z"


def new_run(run_id: str = "run-1", session_id: str = "ses-1") -> AgentRun:
    return AgentRun(run_id, session_id, "support", "running", {"text": "hi"}, NOW, NOW, revision=1)


def event_of(run_id: str, sequence: int) -> RunEvent:
    return RunEvent(f"{run_id}-evt-{sequence}", run_id, sequence, "model.started", NOW, {})


async def create(store: SQLiteRunStore, run: AgentRun | None = None) -> RunLease:
    run = run or new_run()
    return await store.create_execution(
        ExecutionCreate(run, None, (event_of(run.id, 1),), {"step": 1}, "worker-a", 30.0)
    )


def commit(run_id: str, revision: int, lease: RunLease, **fields: Any) -> ExecutionCommit:
    return ExecutionCommit(run_id, revision, NOW, lease, (event_of(run_id, revision),), **fields)


def store_threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name.startswith("fevex-sqlite")}


@contextmanager
def statement_threads() -> Iterator[list[threading.Thread]]:
    """The thread of every statement any engine sends to SQLite within the block."""
    seen: list[threading.Thread] = []

    def record(*args: Any) -> None:
        seen.append(threading.current_thread())

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", record)


@contextmanager
def trips_back_to(loop: asyncio.AbstractEventLoop) -> Iterator[list[int]]:
    """Count the hand-offs from other threads to ``loop`` within the block."""
    trips = [0]
    original = loop.call_soon_threadsafe

    def counting(*args: Any, **kwargs: Any) -> Any:
        trips[0] += 1
        return original(*args, **kwargs)

    loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
    try:
        yield trips
    finally:
        del loop.call_soon_threadsafe


@pytest.mark.anyio
async def test_each_operation_is_one_trip_to_one_thread(store: SQLiteRunStore) -> None:
    with statement_threads() as threads, trips_back_to(asyncio.get_running_loop()) as trips:
        lease = await create(store)
        lease = await store.renew_lease("run-1", lease, 60.0)
        await store.commit_execution(
            commit("run-1", 2, lease, history=({"role": "user"},), release_session=True)
        )
        await store.get_run("run-1")
        await store.get_checkpoint("run-1")
        await store.get_session("ses-1")
        await store.list_events("run-1", after="run-1-evt-1", limit=5)
        await store.claim_expired_run("worker-b", 30.0)
        # Each of the 8 operations came back once, however many statements it ran.
        assert trips[0] == 8
    assert len(threads) > 8
    assert len(set(threads)) == 1
    (thread,) = set(threads)
    assert thread is not threading.current_thread()
    assert thread.name.startswith("fevex-sqlite")


@pytest.mark.anyio
async def test_a_cancelled_write_is_stored_whole_or_not_at_all(
    store: SQLiteRunStore, database: Path
) -> None:
    lease = await create(store)
    other = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
    with closing(other):
        other.execute("BEGIN IMMEDIATE")
        # This commit reaches the store's thread and waits there for the write lock...
        started = asyncio.ensure_future(
            store.commit_execution(commit("run-1", 2, lease, checkpoint={"step": 2}))
        )
        await asyncio.sleep(0.3)
        # ...and this creation waits behind it, not yet started.
        queued = asyncio.ensure_future(create(store, new_run("run-2", "ses-2")))
        await asyncio.sleep(0.05)
        for task in (started, queued):
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        other.execute("ROLLBACK")
    # The started commit ran to its end once it had the lock: stored whole.
    run = await store.get_run("run-1")
    assert run is not None
    assert run.revision == 2
    assert await store.get_checkpoint("run-1") == {"step": 2}
    assert [e.sequence for e in await store.list_events("run-1")] == [1, 2]
    # The queued creation never ran.
    assert await store.get_run("run-2") is None
    assert await store.get_session("ses-2") is None
    # No transaction was left open: another connection takes the write lock at once.
    with closing(sqlite3.connect(database, isolation_level=None, timeout=0)) as third:
        third.execute("BEGIN IMMEDIATE")
        third.execute("ROLLBACK")
    # And the store carries on with the lease it holds.
    await store.commit_execution(commit("run-1", 3, lease))


@pytest.mark.anyio
async def test_a_cancelled_refused_write_writes_nothing(
    store: SQLiteRunStore, database: Path
) -> None:
    lease = await create(store)
    other = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
    with closing(other):
        other.execute("BEGIN IMMEDIATE")
        stale = asyncio.ensure_future(store.commit_execution(commit("run-1", 5, lease)))
        await asyncio.sleep(0.3)
        stale.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stale
        other.execute("ROLLBACK")
    run = await store.get_run("run-1")
    assert run is not None
    assert run.revision == 1
    assert [e.sequence for e in await store.list_events("run-1")] == [1]


def test_one_store_serves_several_event_loops_and_threads(database: Path) -> None:
    store = SQLiteRunStore(database)
    try:
        asyncio.run(create(store))

        async def read_back() -> AgentRun | None:
            return await store.get_run("run-1")

        assert asyncio.run(read_back()) == new_run()
        errors: list[BaseException] = []

        def work(worker: int) -> None:
            async def runs() -> None:
                for i in range(5):
                    run = new_run(f"run-{worker}-{i}", f"ses-{worker}-{i}")
                    lease = await create(store, run)
                    await store.commit_execution(
                        commit(run.id, 2, lease, changes={"status": "completed"})
                    )

            try:
                asyncio.run(runs())
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
    finally:
        asyncio.run(store.close())
    with closing(sqlite3.connect(database)) as raw:
        assert raw.execute(
            "SELECT COUNT(*) FROM fevex_runs WHERE status = 'completed'"
        ).fetchone() == (15,)


@pytest.mark.anyio
async def test_close_ends_the_thread_and_a_closed_store_opens_again(database: Path) -> None:
    before = store_threads()
    store = SQLiteRunStore(database)
    assert store_threads() == before  # started on first use, not on open
    await create(store)
    started = store_threads() - before
    assert len(started) == 1
    await store.close()
    assert not any(thread.is_alive() for thread in started)
    assert store_threads() == before
    assert await store.get_run("run-1") == new_run()
    await store.close()
    await store.close()
    assert store_threads() == before


@pytest.mark.anyio
async def test_history_reads_another_writers_turn_rows_in_any_spacing(
    store: SQLiteRunStore, database: Path
) -> None:
    spacings = ((" [ ]\n", ()), ('[ {"role": "system"} ] ', ({"role": "system"},)))
    for number, (stored, kept) in enumerate(spacings):
        run = new_run(f"run-{number}", f"ses-{number}")
        lease = await create(store, run)
        # Another writer's text: like every writer of a session, it raises the revision
        # (the store trusts a session it read at a revision it still has).
        with closing(sqlite3.connect(database)) as raw, raw:
            raw.execute(
                "INSERT INTO fevex_session_turns (session_id, position, messages) VALUES (?, 0, ?)",
                (run.session_id, stored),
            )
            raw.execute(
                "UPDATE fevex_sessions SET revision = revision + 1 WHERE id = ?", (run.session_id,)
            )
        turn = ({"role": "user", "content": "é"}, {"role": "assistant"})
        await store.commit_execution(commit(run.id, 2, lease, history=turn))
        session = await store.get_session(run.session_id)
        assert session is not None
        assert session.history == (*kept, *turn)
