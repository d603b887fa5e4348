"""What the server refuses reaches the caller as a FevexRunError with a stable code and a
message free of SQL and of the values being written, the driver's error kept as its
``__cause__``.

(A full disk, SQLSTATE 53100, is mapped to ``STORE_FULL`` like a read-only transaction is to
``STORE_READ_ONLY``, but a test server cannot be made to run out of disk reliably, so only
the read-only case is produced here.)
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

import psycopg
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError

from fevex import FevexRunError
from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCommit, ExecutionCreate
from fevex.runtime.store_rules import event_id_taken
from fevex_postgres import PostgresRunStore

pytestmark = pytest.mark.anyio

OpenStore = Callable[..., PostgresRunStore]
NOW = "2024-05-01T10:00:00Z"
SECRET = "value-3d8f21"  # written by the refused operations: never in a message
SQL_WORDS = ("INSERT", "UPDATE", "SELECT")


def new_run() -> AgentRun:
    run_id = f"run_{os.urandom(8).hex()}"
    session_id = f"ses_{os.urandom(8).hex()}"
    return AgentRun(run_id, session_id, "a", "running", SECRET, NOW, NOW, revision=1)


def creation(run: AgentRun) -> ExecutionCreate:
    started = RunEvent(f"evt_{os.urandom(8).hex()}", run.id, 1, "run.started", NOW, {})
    return ExecutionCreate(run, None, (started,), {"note": SECRET}, "worker-a", 60.0)


def assert_no_sql_and_no_values(error: FevexRunError) -> None:
    for shown in (str(error), repr(error), str(error.details)):
        for word in SQL_WORDS:
            assert word not in shown.upper(), shown
        assert SECRET not in shown, shown


async def refused(code: str, attempt: Awaitable[object]) -> FevexRunError:
    with pytest.raises(FevexRunError) as raised:
        await attempt
    assert raised.value.code == code, raised.value
    assert_no_sql_and_no_values(raised.value)
    # The driver's error stays the cause: psycopg's own on the one-statement writes,
    # SQLAlchemy's wrapper of it elsewhere.
    cause = raised.value.__cause__
    assert isinstance(cause, DBAPIError | psycopg.Error), repr(cause)
    return raised.value


async def test_a_read_only_database_refuses_writes_with_store_read_only(
    open_store: OpenStore, database_url: str
) -> None:
    writer = open_store()
    run = new_run()
    lease = await writer.create_execution(creation(run))
    await writer.close()
    name = make_url(database_url).database
    libpq = (
        make_url(database_url)
        .set(drivername="postgresql", database="postgres")
        .render_as_string(hide_password=False)
    )  # the server's maintenance database, which stays writable
    with psycopg.connect(libpq, autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on".encode())
    try:
        store = open_store()  # new connections: read-only transactions
        commit = ExecutionCommit(run.id, 2, NOW, lease, changes={"output": SECRET})
        error = await refused("STORE_READ_ONLY", store.commit_execution(commit))
        assert error.category == "store"
        assert error.details == {"operation": "commit_execution"}
        cause = error.__cause__
        assert isinstance(cause, DBAPIError | psycopg.Error)
        assert getattr(getattr(cause, "orig", cause), "sqlstate", None) == "25006"
        await refused("STORE_READ_ONLY", store.create_execution(creation(new_run())))
        await refused("STORE_READ_ONLY", store.renew_lease(run.id, lease, 60.0))
        # Reads go on, and show that nothing was written.
        assert await store.get_run(run.id) == run
        assert await store.expired_run_ids() == []
    finally:
        with psycopg.connect(libpq, autocommit=True) as admin:
            admin.execute(f"ALTER DATABASE {name} RESET default_transaction_read_only".encode())


async def test_a_value_the_server_rejects_is_store_error_without_its_text(
    open_store: OpenStore,
) -> None:
    store = open_store()
    run = new_run()
    lease = await store.create_execution(creation(run))
    # JSONB cannot hold U+0000: the server rejects the statement carrying it.
    commit = ExecutionCommit(run.id, 2, NOW, lease, checkpoint={"note": f"{SECRET}\x00"})
    error = await refused("STORE_ERROR", store.commit_execution(commit))
    assert error.details == {"operation": "commit_execution"}
    assert "Unicode" not in error.message  # the driver's text stays in __cause__
    assert await store.get_checkpoint(run.id) == {"note": SECRET}


async def test_a_reused_event_id_is_a_conflict_quoting_nothing_stored(
    open_store: OpenStore,
) -> None:
    store = open_store()
    first = new_run()
    await store.create_execution(creation(first))
    second = new_run()
    reused = creation(second)
    event = RunEvent(
        (await store.list_events(first.id))[0].id, second.id, 1, "run.started", NOW, {}
    )
    attempt = store.create_execution(
        ExecutionCreate(second, None, (event,), reused.checkpoint, "worker-a", 60.0)
    )
    error = await refused("RUN_CONFLICT", attempt)
    # The core's one message for this fault; the driver's text (the key's value) stays
    # in __cause__.
    assert error.message == event_id_taken(second.id).message
    assert event.id not in error.message
    assert isinstance(error.__cause__, IntegrityError | psycopg.IntegrityError)
    assert await store.get_run(second.id) is None
