"""Following a run on PostgreSQL: commits announce themselves with NOTIFY, so a follower
waits on one listening connection instead of reading an idle run again and again."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from fevex import FevexRunError, create_fevex, define_agent
from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCommit, ExecutionCreate, RunLease
from fevex.runtime.run_store import NotifyingRunStore
from fevex.testing import FakeModel
from fevex_postgres import PostgresRunStore
from fevex_postgres.testing import libpq_url

pytestmark = pytest.mark.anyio
OpenStore = Callable[..., PostgresRunStore]

# Another process commits a run, one command from stdin at a time: "events N" commits N
# events at once, "end" completes the run; it answers "ok" once the commit is done.
WRITER = """
import asyncio, os, sys
from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCommit, ExecutionCreate
from fevex_postgres import PostgresRunStore

async def main(url):
    store = PostgresRunStore(url, pool_size=1)
    run_id = "run_" + os.urandom(8).hex()
    run = AgentRun(run_id, "ses_" + os.urandom(8).hex(), "a", "running", "hi", "t", "t", revision=1)
    sequence = revision = 1
    def event(kind):
        return RunEvent("evt_" + os.urandom(8).hex(), run_id, sequence, kind, "t", {})
    first = ExecutionCreate(run, None, (event("run.started"),), None, "writer", 600.0)
    lease = await store.create_execution(first)
    print(run_id, flush=True)
    for line in sys.stdin:
        command, _, count = line.strip().partition(" ")
        made = []
        for _ in range(int(count) if command == "events" else 1):
            sequence += 1
            made.append(event("tool.started" if command == "events" else "run.completed"))
        revision += 1
        done = command == "end"
        await store.commit_execution(ExecutionCommit(
            run_id, revision, "t", lease, events=tuple(made),
            changes={"status": "completed", "output": "ok"} if done else None,
            release_lease=done,
        ))
        print("ok", flush=True)
        if done:
            break
    await store.close()

asyncio.run(main(sys.argv[1]))
"""


class CountingStore(PostgresRunStore):
    """Counts the reads a follower makes."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.reads = 0

    async def list_events(self, run_id: str, **page: Any) -> Any:
        self.reads += 1
        return await super().list_events(run_id, **page)

    async def get_run(self, run_id: str) -> AgentRun | None:
        self.reads += 1
        return await super().get_run(run_id)


def follower_app(store: PostgresRunStore) -> Any:
    return create_fevex(
        models={"default": FakeModel()},
        agents=[define_agent(name="a", instructions="Follow.")],
        run_store=store,
    )


async def eventually(condition: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true in time"
        await asyncio.sleep(0.01)


async def on_database(url: str, sql: str, *values: object) -> tuple[Any, ...] | None:
    """Run one statement on its own connection; its first row, if it returns rows."""
    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as db:
        cursor = await db.execute(sql, values)
        return await cursor.fetchone() if cursor.description else None


async def listening_backends(url: str) -> set[int]:
    """The server processes of the connections to this test's database that listen for
    fevex's commits."""
    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as connection:
        cursor = await connection.execute(
            "SELECT pid FROM pg_stat_activity "
            "WHERE datname = current_database() AND query = 'LISTEN fevex_run_events'"
        )
        return {int(pid) for (pid,) in await cursor.fetchall()}


async def terminate(url: str, backends: set[int]) -> None:
    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as connection:
        for pid in backends:
            await connection.execute("SELECT pg_terminate_backend(%s)", (pid,))


class Writer:
    """A run committed by another store in another process."""

    def __init__(self, process: asyncio.subprocess.Process, run_id: str) -> None:
        self.process = process
        self.run_id = run_id

    @classmethod
    async def start(cls, url: str) -> Writer:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            WRITER,
            url,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None
        run_id = (await asyncio.wait_for(process.stdout.readline(), 30)).decode().strip()
        assert run_id.startswith("run_"), run_id
        return cls(process, run_id)

    async def send(self, command: str) -> None:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(f"{command}\n".encode())
        await self.process.stdin.drain()
        assert (await asyncio.wait_for(self.process.stdout.readline(), 30)) == b"ok\n"

    async def finish(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 30)
        finally:
            if self.process.returncode is None:
                self.process.kill()
                await self.process.wait()


async def test_a_follower_waits_for_commits_of_another_process_without_reading(
    database_url: str,
) -> None:
    writer = await Writer.start(database_url)
    store = CountingStore(database_url)
    app = follower_app(store)
    seen: list[RunEvent] = []

    async def follow() -> None:
        async for event in app.follow_events(writer.run_id, page_size=2):
            seen.append(event)

    async def idle_then(writer: Writer, commit: str, until: Callable[[], bool]) -> None:
        reads = store.reads
        # Idle: polling, every 0.2 s by default, would have read the run five times.
        await asyncio.sleep(1.0)
        assert store.reads == reads
        assert store.followers_waiting() == 1
        await writer.send(commit)
        # Far below the 30 s bound of a wait: the commit's notification woke it.
        await eventually(until)

    following = asyncio.create_task(follow())
    try:
        await eventually(lambda: len(seen) == 1)
        await idle_then(writer, "events 3", until=lambda: len(seen) == 4)
        await idle_then(writer, "events 1", until=lambda: len(seen) == 5)
        await writer.send("end")
        await asyncio.wait_for(following, 10)
    finally:
        following.cancel()
        await writer.finish()
        await store.close()
    assert writer.process.returncode == 0
    stored = await app.list_events(writer.run_id)
    assert [event.id for event in seen] == [event.id for event in stored]
    assert [event.sequence for event in seen] == [1, 2, 3, 4, 5, 6]
    assert seen[-1].type == "run.completed"
    await store.close()


async def start_run(store: PostgresRunStore) -> tuple[str, RunLease]:
    run_id = f"run_{os.urandom(8).hex()}"
    run = AgentRun(run_id, f"ses_{os.urandom(8).hex()}", "a", "running", "hi", "t", "t", revision=1)
    lease = await store.create_execution(
        ExecutionCreate(run, None, (event(run_id, 1),), None, "w", 600.0)
    )
    return run_id, lease


def event(run_id: str, sequence: int, kind: str = "tool.started") -> RunEvent:
    return RunEvent(f"evt_{os.urandom(8).hex()}", run_id, sequence, kind, "t", {})


async def commit_event(
    store: PostgresRunStore, run_id: str, lease: RunLease, sequence: int
) -> None:
    commit = ExecutionCommit(run_id, sequence, "t", lease, events=(event(run_id, sequence),))
    await store.commit_execution(commit)


async def test_wait_for_events_misses_no_commit(open_store: OpenStore) -> None:
    writer, follower = open_store(), open_store()
    assert isinstance(follower, NotifyingRunStore)
    run_id, lease = await start_run(writer)
    first = (await follower.list_events(run_id))[0]
    # Committed after the follower's read, before its wait: the wait ends at once.
    second = event(run_id, 2)
    await writer.commit_execution(ExecutionCommit(run_id, 2, "t", lease, events=(second,)))
    assert await follower.wait_for_events(run_id, after=first.id, timeout=30) is True
    assert await follower.wait_for_events(run_id, after=None, timeout=30) is True
    assert await follower.wait_for_events(run_id, after=second.id, timeout=0.2) is False
    # A commit from another store during the wait ends it.
    waiting = asyncio.create_task(follower.wait_for_events(run_id, after=second.id, timeout=30))
    await eventually(lambda: follower.followers_waiting() == 1)
    third = event(run_id, 3)
    await writer.commit_execution(ExecutionCommit(run_id, 3, "t", lease, events=(third,)))
    assert await asyncio.wait_for(waiting, 5) is True
    # An ended run and an unknown cursor end the wait too: the caller's read tells why.
    assert await follower.wait_for_events(run_id, after="evt_unknown", timeout=30) is True
    done = ExecutionCommit(
        run_id, 4, "t", lease, changes={"status": "completed"}, release_lease=True
    )
    await writer.commit_execution(done)
    assert await follower.wait_for_events(run_id, after=third.id, timeout=30) is True
    for timeout in (-1, "1", True):
        with pytest.raises(FevexRunError) as raised:
            await follower.wait_for_events(run_id, after=None, timeout=timeout)  # type: ignore[arg-type]
        assert raised.value.code == "INVALID_ARGUMENT"
    assert follower.followers_waiting() == 0


async def test_closing_a_follower_releases_its_wait(open_store: OpenStore) -> None:
    writer, store = open_store(), open_store()
    run_id, _ = await start_run(writer)
    follower = follower_app(store).follow_events(run_id)
    assert (await anext(follower)).sequence == 1
    waiting = asyncio.create_task(anext(follower))
    await eventually(lambda: store.followers_waiting() == 1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await follower.aclose()
    assert store.followers_waiting() == 0


async def test_a_wait_cancelled_while_its_connection_opens_leaves_no_connection_open(
    open_store: OpenStore,
) -> None:
    """Cancelled at any point of opening the listening connection (connect, then LISTEN), a
    follower's wait closes what it opened: a connection left to the garbage collector would
    warn (``ResourceWarning``, an error in this suite) and hold a server backend until then."""
    run_id, _ = await start_run(open_store())
    for step in range(40):
        store = open_store()
        follower = follower_app(store).follow_events(run_id)
        assert (await anext(follower)).sequence == 1
        waiting = asyncio.create_task(anext(follower))
        await asyncio.sleep(step * 0.0002)
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        await follower.aclose()
        await store.close()


async def test_followers_share_one_listening_connection_that_close_ends(
    open_store: OpenStore, database_url: str
) -> None:
    writer, store = open_store(), open_store()
    runs = [await start_run(writer) for _ in range(3)]
    app = follower_app(store)
    seen: dict[str, list[int]] = {run_id: [] for run_id, _ in runs}

    async def follow(run_id: str) -> None:
        async for followed in app.follow_events(run_id):
            seen[run_id].append(followed.sequence)

    followers = [asyncio.create_task(follow(run_id)) for run_id, _ in runs]
    await eventually(lambda: store.followers_waiting() == 3)
    first = await listening_backends(database_url)
    assert len(first) == 1
    # Only the followed run's waiter is woken; the others stay waiting.
    run_id, lease = runs[0]
    await commit_event(writer, run_id, lease, 2)
    await eventually(lambda: seen[run_id] == [1, 2] and store.followers_waiting() == 3)

    # A dropped connection wakes every follower; they read again, and their next wait
    # listens on a new connection, through which the next commit arrives.
    await terminate(database_url, first)
    deadline = time.monotonic() + 5
    while (second := await listening_backends(database_url)) in (set(), first):
        assert time.monotonic() < deadline, "the followers did not listen again"
        await asyncio.sleep(0.05)
    assert len(second) == 1
    await eventually(lambda: store.followers_waiting() == 3)
    run_id, lease = runs[1]
    await commit_event(writer, run_id, lease, 2)
    await eventually(lambda: seen[run_id] == [1, 2])

    for follower in followers:
        follower.cancel()
    await asyncio.gather(*followers, return_exceptions=True)
    assert store.followers_waiting() == 0
    await store.close()
    deadline = time.monotonic() + 5
    while await listening_backends(database_url):
        assert time.monotonic() < deadline, "store.close() left the LISTEN connection open"
        await asyncio.sleep(0.05)


async def followed_until(url: str, run_id: str) -> float | None:
    row = await on_database(url, "SELECT followed_until FROM fevex_runs WHERE id = %s", run_id)
    assert row is not None
    return None if row[0] is None else float(row[0])


async def test_only_the_commits_of_followed_runs_notify(
    open_store: OpenStore, database_url: str
) -> None:
    writer, follower = open_store(), open_store()
    unfollowed, unfollowed_lease = await start_run(writer)
    followed, followed_lease = await start_run(writer)
    assert await followed_until(database_url, followed) is None
    # A wait records the follower on the run's row, by the database's clock.
    assert await follower.wait_for_events(followed, after=None, timeout=30) is True
    registered = await followed_until(database_url, followed)
    assert registered is not None
    assert registered > time.time() + 30
    async with await psycopg.AsyncConnection.connect(
        libpq_url(database_url), autocommit=True
    ) as listening:
        await listening.execute("LISTEN fevex_run_events")
        await commit_event(writer, unfollowed, unfollowed_lease, 2)
        await commit_event(writer, followed, followed_lease, 2)
        # Notifications arrive in commit order: the first is the followed run's, so the
        # unfollowed run's commit, before it, sent none.
        notifies = listening.notifies()
        try:
            assert (await asyncio.wait_for(anext(notifies), 10)).payload == followed
        finally:
            await notifies.aclose()
    assert await followed_until(database_url, unfollowed) is None


async def test_a_wait_writes_only_when_no_registration_covers_it(
    open_store: OpenStore, database_url: str
) -> None:
    writer, follower = open_store(), open_store()
    run_id, lease = await start_run(writer)
    first = (await follower.list_events(run_id))[0]
    assert await follower.wait_for_events(run_id, after=first.id, timeout=0.1) is False
    registered = await followed_until(database_url, run_id)
    assert registered is not None
    # The next waits of the next minute find it and write nothing.
    for _ in range(3):
        assert await follower.wait_for_events(run_id, after=first.id, timeout=0.1) is False
        assert await followed_until(database_url, run_id) == registered
    # One that would outlast it registers again, and a commit during it is notified.
    await on_database(
        database_url,
        "UPDATE fevex_runs SET followed_until = extract(epoch FROM clock_timestamp()) + 1 "
        "WHERE id = %s",
        run_id,
    )
    waiting = asyncio.create_task(follower.wait_for_events(run_id, after=first.id, timeout=30))
    deadline = time.monotonic() + 5
    while (
        renewed := await followed_until(database_url, run_id)
    ) is None or renewed < time.time() + 30:
        assert time.monotonic() < deadline, "the wait did not register again"
        await asyncio.sleep(0.01)
    assert not waiting.done()
    await commit_event(writer, run_id, lease, 2)
    assert await asyncio.wait_for(waiting, 5) is True
    # A wait on an ended run reads that it ended and registers nothing.
    done = ExecutionCommit(
        run_id, 3, "t", lease, changes={"status": "completed"}, release_lease=True
    )
    await writer.commit_execution(done)
    await on_database(
        database_url, "UPDATE fevex_runs SET followed_until = NULL WHERE id = %s", run_id
    )
    assert await follower.wait_for_events(run_id, after=first.id, timeout=30) is True
    assert await followed_until(database_url, run_id) is None


async def test_a_wait_that_registers_behind_a_commit_sees_it(
    open_store: OpenStore, database_url: str
) -> None:
    """The commit holds the run row when the wait registers: whichever of the two takes
    the row first, the wait ends at once (it reads the commit, or is notified of it)."""
    writer, follower = open_store(), open_store()
    run_id, lease = await start_run(writer)
    first = (await follower.list_events(run_id))[0]
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as holder:
        await holder.execute("SELECT FROM fevex_runs WHERE id = %s FOR UPDATE", (run_id,))
        committing = asyncio.create_task(commit_event(writer, run_id, lease, 2))
        waiting = asyncio.create_task(follower.wait_for_events(run_id, after=first.id, timeout=30))
        await eventually(lambda: follower.followers_waiting() == 1)
        await asyncio.sleep(0.3)  # both statements now wait for the row
        assert not committing.done()
        assert not waiting.done()
        await holder.rollback()
    await asyncio.wait_for(committing, 5)
    assert await asyncio.wait_for(waiting, 5) is True


async def test_a_wait_longer_than_one_registration_is_several(
    open_store: OpenStore, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A registration ends, so that a follower that went away leaves its run unfollowed
    within a bound; a longer wait (an endless one here) registers span after span."""
    from fevex_postgres import postgres_run_store

    monkeypatch.setattr(postgres_run_store, "LONGEST_FOLLOW_SECONDS", 0.2)
    writer, follower = open_store(), open_store()
    run_id, lease = await start_run(writer)
    first = (await follower.list_events(run_id))[0]
    started = time.monotonic()
    assert await follower.wait_for_events(run_id, after=first.id, timeout=0.7) is False
    assert time.monotonic() - started >= 0.7
    waiting = asyncio.create_task(
        follower.wait_for_events(run_id, after=first.id, timeout=math.inf)
    )
    await asyncio.sleep(0.5)  # past the first spans
    assert not waiting.done()
    registered = await followed_until(database_url, run_id)
    assert registered is not None
    # One span and the minute every registration adds.
    assert registered < time.time() + 0.2 + 60 + 1
    await commit_event(writer, run_id, lease, 2)
    assert await asyncio.wait_for(waiting, 5) is True
