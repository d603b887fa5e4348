"""The run-store contract on a real SQLite file, as InMemoryRunStore defines it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from fevex import FevexRunError
from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCommit, ExecutionCreate, RunLease, Session
from fevex_sqlite import SQLiteRunStore
from fevex_sqlite.statements import LIST_EVENTS_SQL

pytestmark = pytest.mark.anyio

NOW = "2030-01-01T00:00:00.000000Z"
LATER = "2030-01-01T00:00:01.000000Z"


def new_run(run_id: str = "run-1", session_id: str = "ses-1") -> AgentRun:
    run_input = {"text": "héllo ✓", "items": [1, 2.5, True, None]}
    return AgentRun(run_id, session_id, "support", "running", run_input, NOW, NOW, revision=1)


def event(run_id: str, sequence: int, **payload: Any) -> RunEvent:
    return RunEvent(f"{run_id}-evt-{sequence}", run_id, sequence, "model.started", NOW, payload)


async def create(
    store: SQLiteRunStore,
    run: AgentRun | None = None,
    *,
    session_revision: int | None = None,
    owner: str = "worker-a",
    seconds: float = 30.0,
    checkpoint: dict[str, Any] | None = None,
) -> RunLease:
    run = run or new_run()
    started = event(run.id, 1, step="start")
    return await store.create_execution(
        ExecutionCreate(run, session_revision, (started,), checkpoint, owner, seconds)
    )


def commit(
    run_id: str, revision: int, lease: RunLease, *, events: int = 1, **fields: Any
) -> ExecutionCommit:
    # Runs in these tests gain one event per revision, so the next sequence is the revision.
    new_events = tuple(event(run_id, revision + i, step=revision) for i in range(events))
    return ExecutionCommit(run_id, revision, LATER, lease, new_events, **fields)


async def snapshot(store: SQLiteRunStore, run_id: str = "run-1") -> dict[str, Any]:
    run = await store.get_run(run_id)
    assert run is not None
    session = await store.get_session(run.session_id)
    assert session is not None
    return {
        "run": run,
        "events": [e.id for e in await store.list_events(run_id)],
        "checkpoint": await store.get_checkpoint(run_id),
        "session": session,
    }


async def refused(code: str, attempt: Any) -> FevexRunError:
    with pytest.raises(FevexRunError) as raised:
        await attempt
    assert raised.value.code == code, raised.value
    return raised.value


# -- creation and reading back ---------------------------------------------------------


async def test_a_created_run_reads_back_as_written(store: SQLiteRunStore, clock: Any) -> None:
    run = new_run()
    events = (event(run.id, 1, note="ünïcode ✓"), event(run.id, 2, values=[0.5, None, {"k": "v"}]))
    checkpoint = {"step": 0, "messages": [{"role": "user", "content": []}]}
    lease = await store.create_execution(
        ExecutionCreate(run, None, events, checkpoint, "worker-a", 30.0)
    )
    assert lease == RunLease("worker-a", 1, clock.now + 30.0)
    assert await store.get_run(run.id) == run
    assert list(await store.list_events(run.id)) == list(events)
    assert await store.get_checkpoint(run.id) == checkpoint
    assert await store.get_session(run.session_id) == Session(
        run.session_id, NOW, NOW, (), None, active_run_id=run.id, revision=1
    )
    assert await store.get_run("run-unknown") is None
    assert await store.get_checkpoint("run-unknown") is None
    assert await store.get_session("ses-unknown") is None


async def test_a_terminal_commit_applies_changes_history_and_frees_the_session(
    store: SQLiteRunStore,
) -> None:
    lease = await create(store)
    history = ({"role": "user", "content": [{"type": "text", "text": "hi"}]},)
    output = {"answer": "Account 42 is active.", "score": 0.75}
    usage = {"input_tokens": 3, "output_tokens": 5, "total_tokens": 8}
    await store.commit_execution(
        commit(
            "run-1", 2, lease,
            changes={"status": "completed", "output": output, "usage": usage},
            checkpoint={"done": True}, history=history,
            release_session=True, release_lease=True,
        )
    )  # fmt: skip
    run = await store.get_run("run-1")
    assert run == dataclasses.replace(
        new_run(), status="completed", output=output, usage=usage, revision=2, updated_at=LATER
    )
    assert await store.get_checkpoint("run-1") == {"done": True}
    session = await store.get_session("ses-1")
    assert session == Session("ses-1", NOW, LATER, history, None, None, 2)


async def test_stored_columns_hold_plain_json_text(store: SQLiteRunStore, database: Path) -> None:
    await create(store, checkpoint={"step": 1})
    with closing(sqlite3.connect(database)) as raw:
        row = raw.execute(
            "SELECT input, output, usage, error, pause, checkpoint FROM fevex_runs"
        ).fetchone()
        payload = raw.execute("SELECT payload FROM fevex_events").fetchone()[0]
    assert [json.loads(value) for value in row] == [
        new_run().input,
        None,
        {},
        None,
        None,
        {"step": 1},
    ]
    assert json.loads(payload) == {"step": "start"}


async def test_a_value_that_is_not_json_is_refused_and_nothing_is_written(
    store: SQLiteRunStore,
) -> None:
    lease = await create(store)
    before = await snapshot(store)
    # NaN and infinities are not JSON either: the PostgreSQL store refuses them alike.
    for value in ({"when": object()}, float("nan"), [float("-inf")]):
        bad = commit("run-1", 2, lease, changes={"output": value})
        await refused("INVALID_ARGUMENT", store.commit_execution(bad))
    assert await snapshot(store) == before


# -- fenced commits --------------------------------------------------------------------


async def test_only_the_live_lease_writes(store: SQLiteRunStore, clock: Any) -> None:
    lease = await create(store, seconds=10.0)
    before = await snapshot(store)
    for stale in (
        dataclasses.replace(lease, owner="worker-b"),
        dataclasses.replace(lease, generation=2),
    ):
        await refused("LEASE_LOST", store.commit_execution(commit("run-1", 2, stale)))
        await refused("LEASE_LOST", store.renew_lease("run-1", stale, 10.0))
    clock.advance(10.0)  # expiry is inclusive: a lease is dead at its expires_at
    await refused("LEASE_LOST", store.commit_execution(commit("run-1", 2, lease)))
    await refused("LEASE_LOST", store.renew_lease("run-1", lease, 10.0))
    assert await snapshot(store) == before


async def test_a_stale_revision_is_refused_and_nothing_is_written(store: SQLiteRunStore) -> None:
    lease = await create(store, checkpoint={"step": 1})
    await store.commit_execution(commit("run-1", 2, lease, checkpoint={"step": 2}))
    before = await snapshot(store)
    for revision in (2, 4):
        attempt = ExecutionCommit(
            "run-1", revision, LATER, lease, (event("run-1", 3),),
            {"status": "completed"}, {"step": 99}, ({"role": "user"},), True, True,
        )  # fmt: skip
        await refused("RUN_CONFLICT", store.commit_execution(attempt))
    assert await snapshot(store) == before
    # Nor was the lease released: its holder carries on.
    await store.commit_execution(commit("run-1", 3, lease))


async def test_a_commit_fails_whole(store: SQLiteRunStore) -> None:
    lease = await create(store)
    before = await snapshot(store)
    out_of_order = ExecutionCommit(
        "run-1", 2, LATER, lease, (event("run-1", 2), event("run-1", 4)),
        {"status": "completed"}, {"step": 2}, None, True, True,
    )  # fmt: skip
    await refused("RUN_CONFLICT", store.commit_execution(out_of_order))
    reused_id = ExecutionCommit(
        "run-1", 2, LATER, lease, (dataclasses.replace(event("run-1", 2), id="run-1-evt-1"),)
    )
    await refused("RUN_CONFLICT", store.commit_execution(reused_id))
    forbidden = commit("run-1", 2, lease, changes={"status": "completed", "session_id": "x"})
    await refused("INVALID_ARGUMENT", store.commit_execution(forbidden))
    assert await snapshot(store) == before
    await refused("RUN_NOT_FOUND", store.commit_execution(commit("run-unknown", 2, lease)))


# -- sessions --------------------------------------------------------------------------


async def test_one_run_holds_a_session_at_a_time(store: SQLiteRunStore) -> None:
    lease = await create(store)
    held = await store.get_session("ses-1")
    assert held is not None
    second = new_run("run-2")
    error = await refused("RUN_CONFLICT", create(store, second, session_revision=held.revision))
    assert error.details == {"session_id": "ses-1", "active_run_id": "run-1"}
    await refused("RUN_CONFLICT", create(store, new_run("run-1", "ses-2")))  # existing run id
    assert await store.get_run("run-2") is None
    assert await store.get_session("ses-2") is None
    assert await store.get_session("ses-1") == held

    await store.commit_execution(
        commit("run-1", 2, lease, changes={"status": "failed"}, release_session=True)
    )
    freed = await store.get_session("ses-1")
    assert freed is not None
    assert freed.active_run_id is None
    assert freed.revision == 2
    await refused("RUN_CONFLICT", create(store, second, session_revision=held.revision))
    await refused("RUN_CONFLICT", create(store, second, session_revision=None))
    await refused("RUN_CONFLICT", create(store, new_run("run-3", "ses-3"), session_revision=1))
    await create(store, second, session_revision=freed.revision)
    reserved = await store.get_session("ses-1")
    assert reserved is not None
    assert (reserved.active_run_id, reserved.revision) == ("run-2", 3)


async def test_concurrent_creates_on_one_session_have_one_winner(store: SQLiteRunStore) -> None:
    racers = [new_run(f"run-{i}", "ses-shared") for i in range(30)]
    outcomes = await asyncio.gather(*(create(store, run) for run in racers), return_exceptions=True)
    winners = [
        run for run, outcome in zip(racers, outcomes, strict=True) if isinstance(outcome, RunLease)
    ]
    assert len(winners) == 1
    assert {o.code for o in outcomes if isinstance(o, FevexRunError)} == {"RUN_CONFLICT"}
    session = await store.get_session("ses-shared")
    assert session is not None
    assert session.active_run_id == winners[0].id


async def test_save_session_replaces_a_free_session_at_its_revision(store: SQLiteRunStore) -> None:
    lease = await create(store)
    session = await store.get_session("ses-1")
    assert session is not None
    compacted = dataclasses.replace(session, history=(), summary="short", updated_at=LATER)
    await refused("RUN_CONFLICT", store.save_session(compacted, expected_revision=1))
    await store.commit_execution(
        commit("run-1", 2, lease, history=({"role": "user"},), release_session=True)
    )
    await refused("SESSION_CONFLICT", store.save_session(compacted, expected_revision=1))
    saved = await store.save_session(compacted, expected_revision=2)
    assert saved == dataclasses.replace(compacted, active_run_id=None, revision=3)
    assert await store.get_session("ses-1") == saved
    missing = dataclasses.replace(compacted, id="ses-unknown")
    await refused("SESSION_NOT_FOUND", store.save_session(missing, expected_revision=0))


# -- leases ----------------------------------------------------------------------------


async def test_release_keeps_the_generation_and_acquire_advances_it(
    store: SQLiteRunStore, clock: Any
) -> None:
    lease = await create(store)
    await refused("RUN_CONFLICT", store.acquire_lease("run-1", "worker-b", 30.0))
    await store.commit_execution(commit("run-1", 2, lease, release_lease=True))
    await refused("LEASE_LOST", store.commit_execution(commit("run-1", 3, lease)))
    await refused("RUN_CONFLICT", store.acquire_lease("run-1", "worker-b", 30.0, status="paused"))
    taken = await store.acquire_lease("run-1", "worker-a", 30.0)  # the same owner id again
    assert taken == RunLease("worker-a", 2, clock.now + 30.0)
    await refused("LEASE_LOST", store.commit_execution(commit("run-1", 3, lease)))
    clock.advance(5.0)
    renewed = await store.renew_lease("run-1", taken, 60.0)
    assert renewed == RunLease("worker-a", 2, clock.now + 60.0)
    await store.commit_execution(commit("run-1", 3, renewed))
    await refused("RUN_NOT_FOUND", store.acquire_lease("run-unknown", "worker-b", 30.0))
    await refused("RUN_NOT_FOUND", store.renew_lease("run-unknown", renewed, 30.0))


async def test_claims_take_expired_running_runs_once_each(
    store: SQLiteRunStore, clock: Any
) -> None:
    leases = {}
    for i in range(6):
        leases[i] = await create(store, new_run(f"run-{i}", f"ses-{i}"), seconds=10.0)
    await create(store, new_run("run-live", "ses-live"), seconds=100.0)
    # run-4 paused and run-5 completed: both released their lease, neither may be claimed.
    await store.commit_execution(
        commit("run-4", 2, leases[4], changes={"status": "paused"}, release_lease=True)
    )
    await store.commit_execution(
        commit("run-5", 2, leases[5], changes={"status": "completed"}, release_lease=True)
    )
    assert await store.claim_expired_run("worker-b", 30.0) is None
    clock.advance(10.0)
    claims = await asyncio.gather(
        *(store.claim_expired_run(f"worker-{i}", 30.0) for i in range(12))
    )
    claimed = [claim for claim in claims if claim is not None]
    assert sorted(run_id for run_id, _ in claimed) == ["run-0", "run-1", "run-2", "run-3"]
    for run_id, lease in claimed:
        assert lease.generation == 2
        assert lease.expires_at == clock.now + 30.0
        await store.commit_execution(commit(run_id, 2, lease))
    assert await store.claim_expired_run("worker-b", 30.0) is None


async def test_claims_go_in_creation_order(store: SQLiteRunStore, clock: Any) -> None:
    for run_id in ("run-b", "run-a", "run-c"):
        await create(store, new_run(run_id, f"ses-{run_id}"), seconds=1.0)
    clock.advance(1.0)
    order = [await store.claim_expired_run("worker-b", 30.0) for _ in range(3)]
    assert [claim[0] for claim in order if claim] == ["run-b", "run-a", "run-c"]


# -- paged event reads -----------------------------------------------------------------


async def test_list_events_pages_by_cursor_limit_and_order(store: SQLiteRunStore) -> None:
    lease = await create(store)
    await store.commit_execution(commit("run-1", 2, lease, events=4))
    await create(store, new_run("run-other", "ses-other"))
    ids = [f"run-1-evt-{n}" for n in range(1, 6)]

    async def page(**options: Any) -> list[str]:
        return [e.id for e in await store.list_events("run-1", **options)]

    assert await page() == ids
    assert await page(order="desc") == ids[::-1]
    assert await page(after=ids[1]) == ids[2:]
    assert await page(after=ids[1], limit=2) == ids[2:4]
    assert await page(after=ids[1], order="desc") == ids[:1:-1]
    assert await page(after=ids[1], order="desc", limit=1) == [ids[-1]]
    assert await page(order="desc", limit=1) == [ids[-1]]
    assert await page(after=ids[-1]) == []
    assert list(await store.list_events("run-unknown")) == []
    for cursor in ("evt-unknown", "run-other-evt-1"):
        error = await refused("INVALID_CURSOR", store.list_events("run-1", after=cursor))
        assert error.details == {"run_id": "run-1"}
    for limit in (0, -1):
        await refused("INVALID_ARGUMENT", store.list_events("run-1", limit=limit))


async def test_a_page_never_reads_the_events_before_its_cursor(
    store: SQLiteRunStore, database: Path
) -> None:
    lease = await create(store)
    await store.commit_execution(commit("run-1", 2, lease, events=3))
    # Earlier payloads that json.loads would reject: reading them would raise.
    with closing(sqlite3.connect(database)) as raw, raw:
        raw.execute("UPDATE fevex_events SET payload = 'not json' WHERE sequence < 3")
    page = await store.list_events("run-1", after="run-1-evt-2", limit=10)
    assert [e.sequence for e in page] == [3, 4]
    with closing(sqlite3.connect(database)) as raw:
        for statement in LIST_EVENTS_SQL.values():
            plan = raw.execute(
                f"EXPLAIN QUERY PLAN {statement.text}", {"run_id": "run-1", "after": 2, "limit": 5}
            ).fetchall()
            details = " ".join(row[-1] for row in plan)
            assert "USING INDEX fevex_events_by_run_sequence (run_id=? AND sequence>?)" in details
            assert "TEMP B-TREE" not in details  # ordered by the index, not sorted


# -- transactions and files ------------------------------------------------------------


async def test_a_write_checks_under_the_write_lock(store: SQLiteRunStore, database: Path) -> None:
    lease = await create(store)
    # Another connection holds the write lock and has moved the run on, uncommitted.
    other = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
    with closing(other):
        other.execute("BEGIN IMMEDIATE")
        other.execute("UPDATE fevex_runs SET revision = 2 WHERE id = 'run-1'")
        attempt = asyncio.ensure_future(store.commit_execution(commit("run-1", 2, lease)))
        await asyncio.sleep(0.3)
        assert not attempt.done()  # waiting for the lock, not failing on a stale snapshot
        other.execute("COMMIT")
        # BEGIN IMMEDIATE made the commit read revision 2 only after it got the lock; a
        # lazily begun transaction would have checked revision 1 and failed to upgrade.
        await refused("RUN_CONFLICT", attempt)


async def test_a_write_gives_up_after_busy_timeout_and_reads_go_on(database: Path) -> None:
    store = SQLiteRunStore(database, busy_timeout=0.2)
    try:
        await create(store)
        other = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
        with closing(other):
            other.execute("BEGIN IMMEDIATE")
            error = await refused("STORE_BUSY", store.acquire_lease("run-1", "worker-b", 30.0))
            assert error.recoverable
            assert error.category == "store"
            assert (await store.get_run("run-1")) is not None  # WAL: readers never wait
            other.execute("ROLLBACK")
        await refused("RUN_CONFLICT", store.acquire_lease("run-1", "worker-b", 30.0))
    finally:
        await store.close()


async def test_everything_survives_close_and_reopen(database: Path, clock: Any) -> None:
    first = SQLiteRunStore(database, clock=clock)
    lease = await create(first, checkpoint={"step": 1})
    accepted = commit(
        "run-1", 2, lease, changes={"usage": {"total_tokens": 3}}, checkpoint={"step": 2}
    )
    await first.commit_execution(accepted)
    before = await snapshot(first)
    await first.close()
    await first.close()  # closing twice is harmless

    reopened = SQLiteRunStore(f"sqlite:///{database}", clock=clock)
    try:
        assert await snapshot(reopened) == before
        await refused("RUN_CONFLICT", reopened.commit_execution(accepted))
        assert await snapshot(reopened) == before
        await reopened.commit_execution(commit("run-1", 3, lease))  # the lease is durable too
    finally:
        await reopened.close()


async def test_stores_in_other_threads_share_the_file(database: Path) -> None:
    # Each thread runs its own event loop and store, as the blocking *_sync twins do.
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        async def main() -> None:
            store = SQLiteRunStore(database)
            try:
                for i in range(10):
                    run = new_run(f"run-{worker}-{i}", f"ses-{worker}-{i}")
                    lease = await create(store, run)
                    await store.commit_execution(
                        commit(
                            run.id, 2, lease, changes={"status": "completed"}, release_session=True
                        )
                    )
            finally:
                await store.close()

        try:
            asyncio.run(main())
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with closing(sqlite3.connect(database)) as raw:
        assert raw.execute(
            "SELECT COUNT(*), MIN(status), MAX(status) FROM fevex_runs"
        ).fetchone() == (
            40,
            "completed",
            "completed",
        )
