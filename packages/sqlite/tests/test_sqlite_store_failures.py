"""When SQLite itself fails: a full disk, an immutable file, a writer stuck holding the lock.

Each failure reaches the caller as a FevexRunError with a stable code and a message free of
SQL and of the values being written, the driver's error kept as its ``__cause__``; the file
stays intact, and the run can go on once the cause is gone. The disk and the file are real:
a small tmpfs mounted for the test, a file made immutable with ``chattr +i``. Both need root
(``CAP_SYS_ADMIN``, ``CAP_LINUX_IMMUTABLE``): without it the test is skipped, naming what
was refused, except under ``CI``, where that is a failure.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import os
import sqlite3
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import BinaryIO, NoReturn

import pytest
from sqlalchemy.exc import DBAPIError

from fevex import FevexRunError, create_fevex, define_agent
from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCommit, ExecutionCreate, RunLease
from fevex.testing import FakeModel
from fevex_sqlite import SQLiteRunStore

pytestmark = pytest.mark.anyio

NOW = "2030-01-01T00:00:00Z"
# Values written by the failing operations: none may show up in an error message.
QUESTION = "question-7f3a9c"
ANSWER = "zebra-41d2 " * 40_000  # about 440 KB, three times over in one commit
SQL_WORDS = ("INSERT", "UPDATE", "SELECT")


def refused_or_skipped(what: str, completed: subprocess.CompletedProcess[str]) -> NoReturn:
    reason = f"{what} was refused ({completed.stderr.strip() or completed.returncode})"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI runs as root and must run this test.")
    pytest.skip(reason)


def run_command(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB file system of this test's own, unmounted afterwards."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = run_command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point))
    if mounted.returncode != 0:
        refused_or_skipped("mounting a tmpfs (needs CAP_SYS_ADMIN)", mounted)
    try:
        yield mount_point
    finally:
        unmounted = run_command("umount", str(mount_point))
        if unmounted.returncode != 0:
            # Something still holds a file there: detach the mount all the same, and say so.
            run_command("umount", "--lazy", str(mount_point))
            pytest.fail(f"the test left files open on its tmpfs: {unmounted.stderr.strip()}")


@pytest.fixture
def make_immutable() -> Iterator[Callable[[Path], None]]:
    """``make_immutable(path)`` sets the file's immutable flag, cleared afterwards."""
    flagged: list[Path] = []

    def flag(path: Path) -> None:
        done = run_command("chattr", "+i", str(path))
        if done.returncode != 0:
            refused_or_skipped(
                "chattr +i (needs CAP_LINUX_IMMUTABLE and a file system with the flag)", done
            )
        flagged.append(path)

    yield flag
    for path in flagged:
        run_command("chattr", "-i", str(path))


def fill(path: Path) -> None:
    """Write zeros to ``path`` until the file system has no block left."""
    with path.open("wb", buffering=0) as filler:
        for size in (64 * 1024, 4096, 512):
            while wrote(filler, size):
                pass


def wrote(file: BinaryIO, size: int) -> bool:
    try:
        file.write(bytes(size))
    except OSError as error:
        if error.errno != errno.ENOSPC:
            raise
        return False
    return True


def assert_no_sql_and_no_values(error: FevexRunError, *values: str) -> None:
    for shown in (str(error), repr(error), str(error.details)):
        for word in SQL_WORDS:
            assert word not in shown.upper(), shown
        for value in values:
            assert value not in shown, shown


def integrity(database: Path) -> str:
    with closing(sqlite3.connect(database)) as raw:
        result: str = raw.execute("PRAGMA integrity_check").fetchone()[0]
        return result


async def wait_until_listed(store: SQLiteRunStore) -> list[str]:
    # Polls the store: the lease runs out by its clock, and nothing signals that.
    for _ in range(150):
        expired = list(await store.expired_run_ids())
        if expired:
            return expired
        await asyncio.sleep(0.1)
    raise AssertionError("no run's lease expired within 15 s")


async def test_a_full_disk_fails_the_run_with_store_full_and_the_run_recovers_later(
    small_disk: Path,
) -> None:
    database = small_disk / "runs.db"
    store = SQLiteRunStore(database)
    model = FakeModel({"output": ANSWER}, {"output": "recovered"})
    agents = [define_agent(name="support", instructions="Answer.")]
    app = create_fevex(models={"default": model}, agents=agents, run_store=store, lease_seconds=1.0)
    try:
        await store.get_session("ses-warm-up")  # the connection, its -wal and -shm files
        filler = small_disk / "filler"
        fill(filler)
        # Room for the run's first transaction, not for the commit carrying the answer.
        os.truncate(filler, filler.stat().st_size - 96 * 1024)

        with pytest.raises(FevexRunError) as raised:
            await asyncio.wait_for(app.run_agent("support", QUESTION), 30)
        error = raised.value
        assert error.code == "STORE_FULL", error
        assert error.category == "store"
        assert_no_sql_and_no_values(error, QUESTION, "zebra-41d2")
        cause = error.__cause__
        assert isinstance(cause, DBAPIError), repr(cause)
        assert isinstance(cause.orig, sqlite3.OperationalError)
        assert cause.orig.sqlite_errorcode & 0xFF == sqlite3.SQLITE_FULL

        # Nothing of the failed commit was written, and the file is intact.
        assert integrity(database) == "ok"
        with closing(sqlite3.connect(database)) as raw:
            stored = raw.execute("SELECT id, status, revision FROM fevex_runs").fetchall()
        assert [(status, revision) for _, status, revision in stored] == [("running", 1)]
        run_id = stored[0][0]

        filler.unlink()
        # The run's lease ran out with nobody to renew it: it is recovered where it stopped.
        assert await wait_until_listed(store) == [run_id]
        result = await asyncio.wait_for(app.recover_run(run_id, actor={"id": "ops"}), 30)
        assert result.output == "recovered"
        assert (await app.get_run(run_id)).status == "completed"
    finally:
        await store.close()
    assert integrity(database) == "ok"


async def test_an_immutable_file_fails_writes_with_store_read_only(
    database: Path, make_immutable: Callable[[Path], None]
) -> None:
    store = SQLiteRunStore(database)
    run = AgentRun("run-1", "ses-1", "support", "running", QUESTION, NOW, NOW, revision=1)
    started = RunEvent("evt-1", run.id, 1, "run.started", NOW, {})
    lease = await store.create_execution(
        ExecutionCreate(run, None, (started,), None, "worker-a", 60.0)
    )
    await store.close()  # the file alone, without a connection, -wal or -shm file
    make_immutable(database)
    try:
        step = RunEvent("evt-2", run.id, 2, "model.started", NOW, {"marker": "value-5e1b"})
        commit = ExecutionCommit(run.id, 2, NOW, lease, (step,), {"output": "value-5e1b"})
        other = dataclasses.replace(run, id="run-2", session_id="ses-2", input="value-5e1b")
        writes: list[Callable[[], Awaitable[object]]] = [
            lambda: store.commit_execution(commit),
            lambda: store.renew_lease(run.id, lease, 60.0),
            lambda: store.create_execution(ExecutionCreate(other, None)),
        ]
        for write in writes:
            with pytest.raises(FevexRunError) as raised:
                await write()
            assert raised.value.code == "STORE_READ_ONLY", raised.value
            assert_no_sql_and_no_values(raised.value, "value-5e1b", QUESTION)
            assert isinstance(raised.value.__cause__, DBAPIError | sqlite3.Error)
        # Reads go on, and show that nothing was written.
        assert await store.get_run(run.id) == run
        assert [event.id for event in await store.list_events(run.id)] == ["evt-1"]
    finally:
        await store.close()


async def test_expired_runs_are_listed_while_another_writer_holds_the_lock(
    database: Path,
) -> None:
    store = SQLiteRunStore(database, busy_timeout=0.2)
    try:
        for n in range(3):
            run = AgentRun(f"run-{n}", f"ses-{n}", "support", "running", "hi", NOW, NOW, revision=1)
            started = RunEvent(f"evt-{n}", run.id, 1, "run.started", NOW, {})
            await store.create_execution(
                ExecutionCreate(run, None, (started,), None, "gone", 0.0 if n < 2 else 60.0)
            )
        # A writer stopped inside its transaction, holding the file's write lock.
        frozen = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
        with closing(frozen):
            frozen.execute("BEGIN IMMEDIATE")
            with pytest.raises(FevexRunError) as raised:
                await store.claim_expired_run("recovery", 60.0)
            assert raised.value.code == "STORE_BUSY"
            listed = await asyncio.wait_for(store.expired_run_ids(), 5)
            assert sorted(listed) == ["run-0", "run-1"]
            assert await store.expired_run_ids(limit=1) == [listed[0]]
            frozen.execute("ROLLBACK")
        claimed = await store.claim_expired_run("recovery", 60.0)
        assert claimed is not None
        assert claimed[1] == RunLease("recovery", 2, claimed[1].expires_at)
        with pytest.raises(FevexRunError) as invalid:
            await store.expired_run_ids(limit=-1)
        assert invalid.value.code == "INVALID_ARGUMENT"
    finally:
        await store.close()
