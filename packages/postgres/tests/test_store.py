"""PostgresRunStore on a real server: the run-store contract, with several handles and
connections at once, and what is particular to PostgreSQL (the database's clock, pooled
connections, URLs, messages without passwords)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from fevex import FevexConfigurationError, FevexError, FevexRunError
from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCommit, ExecutionCreate, RunLease, RunStore
from fevex_postgres import PostgresRunStore, create_postgres_run_store
from fevex_postgres.testing import libpq_url

pytestmark = pytest.mark.anyio

OpenStore = Callable[..., PostgresRunStore]


def new_id(prefix: str) -> str:
    return f"{prefix}_{os.urandom(8).hex()}"


def new_run(session_id: str | None = None) -> AgentRun:
    return AgentRun(
        new_id("run"),
        session_id or new_id("ses"),
        "support",
        "running",
        {"text": "héllo", "parts": [1, 2.5, True, None]},
        "2024-05-01T10:00:00.000001Z",
        "2024-05-01T10:00:00.000001Z",
        revision=1,
    )


def event(run_id: str, sequence: int, **payload: Any) -> RunEvent:
    return RunEvent(
        new_id("evt"), run_id, sequence, "model.started", "2024-05-01T10:00:01Z", payload
    )


async def create(
    store: RunStore,
    run: AgentRun | None = None,
    *,
    session_revision: int | None = None,
    owner: str = "worker-a",
    seconds: float = 60.0,
    checkpoint: dict[str, Any] | None = None,
) -> tuple[AgentRun, RunLease]:
    run = run or new_run()
    started = event(run.id, 1, step=0)
    lease = await store.create_execution(
        ExecutionCreate(run, session_revision, (started,), checkpoint, owner, seconds)
    )
    return run, lease


def commit(run: AgentRun, revision: int, lease: RunLease, *events: RunEvent, **fields: Any) -> Any:
    return ExecutionCommit(run.id, revision, "2024-05-01T10:00:02Z", lease, events, **fields)


async def code_of(attempt: Any) -> str:
    with pytest.raises(FevexRunError) as raised:
        await attempt
    return raised.value.code


async def database_epoch(url: str) -> float:
    async with await psycopg.AsyncConnection.connect(libpq_url(url)) as connection:
        cursor = await connection.execute("SELECT extract(epoch from clock_timestamp())::float8")
        row = await cursor.fetchone()
        assert row is not None
        return float(row[0])


async def test_a_run_reads_back_as_plain_json(open_store: OpenStore) -> None:
    store = open_store()
    run, lease = await create(store, checkpoint={"messages": [{"role": "user"}], "ratio": 0.5})
    assert await store.get_run(run.id) == run
    assert await store.get_checkpoint(run.id) == {"messages": [{"role": "user"}], "ratio": 0.5}
    session = await store.get_session(run.session_id)
    assert session is not None
    assert (session.active_run_id, session.revision, session.created_at) == (
        run.id,
        1,
        run.created_at,
    )

    history = ({"role": "user", "content": [{"type": "text", "text": "hé"}]},)
    output = {"answer": "Account 42 is active.", "scores": [1, 0.25]}
    await store.commit_execution(
        commit(
            run,
            2,
            lease,
            event(run.id, 2, done=True),
            changes={"status": "completed", "output": output, "usage": {"total_tokens": 3}},
            checkpoint={"step": 1},
            history=history,
            release_session=True,
            release_lease=True,
        )
    )
    stored = await store.get_run(run.id)
    assert stored == dataclasses.replace(
        run,
        status="completed",
        output=output,
        usage={"total_tokens": 3},
        revision=2,
        updated_at="2024-05-01T10:00:02Z",
    )
    freed = await store.get_session(run.session_id)
    assert freed is not None
    assert (freed.active_run_id, freed.revision, freed.history) == (None, 2, history)
    events = await store.list_events(run.id)
    assert [e.sequence for e in events] == [1, 2]
    assert events[1].payload == {"done": True}
    assert type(events[1].payload) is dict


async def test_a_second_handle_sees_what_the_first_wrote(open_store: OpenStore) -> None:
    first, second = open_store(), open_store()
    run, lease = await create(first)
    await first.commit_execution(commit(run, 2, lease, event(run.id, 2), checkpoint={"n": 2}))
    assert (await second.get_run(run.id)) == dataclasses.replace(
        run, revision=2, updated_at="2024-05-01T10:00:02Z"
    )
    assert await second.get_checkpoint(run.id) == {"n": 2}
    # The lease is in the database, not in the handle that created the run.
    await second.commit_execution(commit(run, 3, lease, event(run.id, 3)))
    assert len(await first.list_events(run.id)) == 3


async def test_refused_commits_write_nothing(open_store: OpenStore) -> None:
    store = open_store()
    run, lease = await create(store, checkpoint={"step": 0})
    refused = {
        "stale revision": commit(run, 3, lease, event(run.id, 2), checkpoint={"step": 9}),
        "other owner": commit(
            run, 2, dataclasses.replace(lease, owner="worker-b"), event(run.id, 2)
        ),
        "other generation": commit(
            run, 2, dataclasses.replace(lease, generation=lease.generation + 1), event(run.id, 2)
        ),
        "sequence gap": commit(run, 2, lease, event(run.id, 3), checkpoint={"step": 9}),
        "another run's event": commit(run, 2, lease, event(new_id("run"), 2)),
    }
    codes = {name: await code_of(store.commit_execution(c)) for name, c in refused.items()}
    assert codes == {
        "stale revision": "RUN_CONFLICT",
        "other owner": "LEASE_LOST",
        "other generation": "LEASE_LOST",
        "sequence gap": "RUN_CONFLICT",
        "another run's event": "INVALID_ARGUMENT",
    }
    bad_field = commit(run, 2, lease, changes={"agent_name": "x"})
    assert await code_of(store.commit_execution(bad_field)) == "INVALID_ARGUMENT"
    missing = commit(new_run(), 2, lease)
    assert await code_of(store.commit_execution(missing)) == "RUN_NOT_FOUND"
    assert await store.get_run(run.id) == run
    assert await store.get_checkpoint(run.id) == {"step": 0}
    assert len(await store.list_events(run.id)) == 1


async def test_a_value_that_is_not_json_is_refused_before_the_server(
    open_store: OpenStore,
) -> None:
    # The SQLite store's code for the same fault; NaN and infinities are not JSON either.
    store = open_store()
    run, lease = await create(store, checkpoint={"step": 0})
    for bad in ({"when": object()}, float("nan"), [float("inf")]):
        refused = commit(run, 2, lease, event(run.id, 2), changes={"output": bad})
        assert await code_of(store.commit_execution(refused)) == "INVALID_ARGUMENT"
        refused = commit(run, 2, lease, event(run.id, 2), checkpoint={"bad": bad})
        assert await code_of(store.commit_execution(refused)) == "INVALID_ARGUMENT"
    assert await store.get_run(run.id) == run
    assert await store.get_checkpoint(run.id) == {"step": 0}
    assert len(await store.list_events(run.id)) == 1
    await store.commit_execution(commit(run, 2, lease, event(run.id, 2)))


async def test_the_database_clock_decides_lease_expiry(
    open_store: OpenStore, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store()
    before = await database_epoch(database_url)
    run, lease = await create(store, seconds=30.0)
    after = await database_epoch(database_url)
    assert before + 30.0 <= lease.expires_at <= after + 30.0
    # A worker whose clock runs an hour ahead still agrees that the lease is live.
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 3600.0)
    await store.commit_execution(commit(run, 2, lease, event(run.id, 2)))
    renewed = await store.renew_lease(run.id, lease, 10.0)
    assert renewed.expires_at < real_time() + 3600.0

    short, short_lease = await create(store, seconds=0.2)
    await asyncio.sleep(0.4)
    assert await code_of(store.renew_lease(short.id, short_lease, 60.0)) == "LEASE_LOST"
    late = commit(short, 2, short_lease, event(short.id, 2))
    assert await code_of(store.commit_execution(late)) == "LEASE_LOST"


async def test_release_keeps_the_generation_and_acquire_advances_it(
    open_store: OpenStore,
) -> None:
    store = open_store()
    run, lease = await create(store, owner="worker-a")
    assert await code_of(store.acquire_lease(run.id, "worker-b", 60.0)) == "RUN_CONFLICT"
    await store.commit_execution(commit(run, 2, lease, release_lease=True))
    assert await code_of(store.renew_lease(run.id, lease, 60.0)) == "LEASE_LOST"
    assert await code_of(store.acquire_lease(run.id, "x", 60.0, status="paused")) == "RUN_CONFLICT"
    again = await store.acquire_lease(run.id, "worker-a", 60.0)
    assert (again.owner, again.generation) == ("worker-a", lease.generation + 1)
    # The old lease, although it names the same owner, is fenced out by its generation.
    assert await code_of(store.commit_execution(commit(run, 3, lease))) == "LEASE_LOST"
    await store.commit_execution(commit(run, 3, again))
    assert await code_of(store.acquire_lease(new_id("run"), "x", 1.0)) == "RUN_NOT_FOUND"
    assert await code_of(store.renew_lease(new_id("run"), lease, 1.0)) == "RUN_NOT_FOUND"


async def test_one_of_many_concurrent_creators_gets_a_new_session(open_store: OpenStore) -> None:
    stores = [open_store() for _ in range(4)]
    session_id = new_id("ses")
    runs = [new_run(session_id) for _ in range(100)]
    outcomes = await asyncio.gather(
        *(create(stores[index % 4], run) for index, run in enumerate(runs)),
        return_exceptions=True,
    )
    winners = [run for run, outcome in zip(runs, outcomes, strict=True) if type(outcome) is tuple]
    failures = {
        outcome.code if isinstance(outcome, FevexRunError) else repr(outcome)
        for outcome in outcomes
        if isinstance(outcome, BaseException)
    }
    assert len(winners) == 1
    assert failures == {"RUN_CONFLICT"}
    session = await stores[0].get_session(session_id)
    assert session is not None
    assert (session.active_run_id, session.revision) == (winners[0].id, 1)
    stored = await asyncio.gather(*(stores[1].get_run(run.id) for run in runs))
    assert [run.id for run in stored if run is not None] == [winners[0].id]


async def test_an_existing_run_id_or_a_vanished_session_is_a_conflict(
    open_store: OpenStore,
) -> None:
    store = open_store()
    run, _ = await create(store)
    twin = dataclasses.replace(run, session_id=new_id("ses"))
    assert await code_of(create(store, twin)) == "RUN_CONFLICT"
    assert await store.get_session(twin.session_id) is None
    assert await code_of(create(store, session_revision=3)) == "RUN_CONFLICT"


async def test_operations_do_not_wait_for_each_other(
    open_store: OpenStore, database_url: str
) -> None:
    store = open_store()
    blocked_run, lease = await create(store)
    other_run, _ = await create(store)
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as locker:
        await locker.execute("SELECT 1 FROM fevex_runs WHERE id = %s FOR UPDATE", (blocked_run.id,))
        waiting = asyncio.create_task(
            store.commit_execution(commit(blocked_run, 2, lease, event(blocked_run.id, 2)))
        )
        await asyncio.sleep(0.2)
        assert not waiting.done()
        # The waiting commit holds one pooled connection; the store serves others meanwhile.
        assert await store.get_run(other_run.id) == other_run
        assert len(await store.list_events(other_run.id)) == 1
        await locker.rollback()
    await waiting
    assert len(await store.list_events(blocked_run.id)) == 2


async def test_event_pages_follow_the_cursor(open_store: OpenStore) -> None:
    store = open_store()
    run, lease = await create(store)
    await store.commit_execution(
        commit(run, 2, lease, *(event(run.id, n, n=n) for n in range(2, 8)))
    )
    other, _ = await create(store)
    events = await store.list_events(run.id)
    assert [e.sequence for e in events] == list(range(1, 8))
    cursor = events[2].id
    page = await store.list_events(run.id, after=cursor, limit=2)
    assert [e.sequence for e in page] == [4, 5]
    newest_first = await store.list_events(run.id, after=cursor, order="desc")
    assert [e.sequence for e in newest_first] == [7, 6, 5, 4]
    assert [e.sequence for e in await store.list_events(run.id, order="desc", limit=1)] == [7]
    assert await store.list_events(run.id, after=events[-1].id) == []
    assert await code_of(store.list_events(run.id, limit=0)) == "INVALID_ARGUMENT"
    assert await store.list_events(new_id("run")) == []
    foreign = (await store.list_events(other.id))[0].id
    assert await code_of(store.list_events(run.id, after=foreign)) == "INVALID_CURSOR"
    assert await code_of(store.list_events(run.id, after="evt_unknown")) == "INVALID_CURSOR"


async def test_saving_a_session_checks_its_revision_and_that_it_is_free(
    open_store: OpenStore,
) -> None:
    store = open_store()
    run, lease = await create(store)
    held = await store.get_session(run.session_id)
    assert held is not None
    assert await code_of(store.save_session(held, expected_revision=held.revision)) == (
        "RUN_CONFLICT"
    )
    await store.commit_execution(
        commit(run, 2, lease, history=({"role": "user"},), release_session=True)
    )
    free = await store.get_session(run.session_id)
    assert free is not None
    compacted = dataclasses.replace(free, history=(), summary="Account 42 is active.")
    stale = store.save_session(compacted, expected_revision=free.revision - 1)
    assert await code_of(stale) == "SESSION_CONFLICT"
    saved = await store.save_session(compacted, expected_revision=free.revision)
    assert saved.revision == free.revision + 1
    assert await store.get_session(run.session_id) == saved
    unknown = dataclasses.replace(free, id=new_id("ses"))
    assert await code_of(store.save_session(unknown, expected_revision=0)) == ("SESSION_NOT_FOUND")


async def test_concurrent_claimers_never_share_a_run(open_store: OpenStore) -> None:
    creator = open_store()
    orphans = [(await create(creator, seconds=0.0))[0].id for _ in range(30)]
    live, _ = await create(creator, seconds=60.0)
    paused, paused_lease = await create(creator, seconds=60.0)
    await creator.commit_execution(
        commit(paused, 2, paused_lease, changes={"status": "paused"}, release_lease=True)
    )
    claimers = [open_store() for _ in range(6)]

    async def claim_all(store: PostgresRunStore, owner: str) -> list[tuple[str, RunLease]]:
        claimed = []
        while (claim := await store.claim_expired_run(owner, 60.0)) is not None:
            claimed.append(claim)
        return claimed

    results = await asyncio.gather(
        *(claim_all(store, f"recovery-{n}") for n, store in enumerate(claimers))
    )
    claimed = [claim for result in results for claim in result]
    assert sorted(run_id for run_id, _ in claimed) == sorted(orphans)
    assert {lease.generation for _, lease in claimed} == {2}
    assert sum(1 for result in results if result) > 1
    # Each claim is a live lease its owner can write under.
    run_id, lease = claimed[0]
    stored = await creator.get_run(run_id)
    assert stored is not None
    await creator.commit_execution(
        ExecutionCommit(run_id, stored.revision + 1, "2024-05-01T10:00:03Z", lease)
    )
    assert live.id not in {run_id for run_id, _ in claimed}


async def test_pool_options_come_from_arguments_or_the_url(database_url: str) -> None:
    from_url = PostgresRunStore(f"{database_url}?pool_size=2&max_overflow=0&pool_timeout=0.5")
    from_arguments = create_postgres_run_store(database_url, pool_size=3, pool_pre_ping=False)
    try:
        assert from_url.pool_options["pool_size"] == 2
        assert from_arguments.pool_options["pool_size"] == 3
        assert from_arguments.pool_options["pool_pre_ping"] is False
        # Ten reads share the two pooled connections, each waiting its turn.
        run, _ = await create(from_url)
        results = await asyncio.gather(
            *(from_url.get_run(run.id) for _ in range(10)), return_exceptions=True
        )
        assert all(result == run for result in results)
    finally:
        await from_url.close()
        await from_arguments.close()


@pytest.mark.parametrize(
    ("url", "options"),
    [
        ("postgresql+asyncpg://user@localhost/db", {}),
        ("postgresql://user@localhost/db?pool_size=many", {}),
        ("postgresql://user@localhost/db", {"pool_sise": 3}),
        ("not a url at all", {}),
    ],
)
async def test_unusable_urls_and_options_are_configuration_errors(
    url: str, options: dict[str, Any]
) -> None:
    with pytest.raises(FevexConfigurationError) as raised:
        PostgresRunStore(url, **options)
    assert raised.value.code == "INVALID_CONFIG"


async def test_messages_never_show_the_password(empty_database_url: str) -> None:
    with_password = make_url(empty_database_url).set(password="s3cret-pw")
    url = with_password.update_query_dict({"sslpassword": "s3cret-pw"}).render_as_string(
        hide_password=False
    )
    # Trust authentication ignores the password, so the store connects.
    outdated = PostgresRunStore(url)
    unreachable = PostgresRunStore(
        with_password.set(host="127.0.0.1", port=1).render_as_string(hide_password=False)
    )
    try:
        for store in (outdated, unreachable):
            assert "s3cret-pw" not in repr(store)
            with pytest.raises(FevexError) as raised:
                await store.get_run("run_x")
            assert "s3cret-pw" not in str(raised.value)
            assert "s3cret-pw" not in repr(raised.value)
        assert outdated.url.startswith("postgresql+psycopg://postgres@")
    finally:
        await outdated.close()
        await unreachable.close()


async def test_an_unreachable_server_is_a_recoverable_store_error() -> None:
    store = PostgresRunStore("postgresql://postgres@127.0.0.1:1/fevex")
    try:
        with pytest.raises(FevexRunError) as raised:
            await store.get_run("run_x")
    finally:
        await store.close()
    assert raised.value.code == "STORE_UNAVAILABLE"
    assert raised.value.recoverable
    assert "127.0.0.1:1" in raised.value.message
