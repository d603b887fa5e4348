"""The one thread that runs a store's transactions: one trip to it per store operation.

Every operation of :class:`~fevex_sqlite.SQLiteRunStore` is a plain synchronous function
of a SQLAlchemy :class:`~sqlalchemy.Connection`. It runs whole on the store's own thread,
inside one transaction that begins and ends within the call, so awaiting an operation is
one hand-off to that thread and one back, however many statements it runs. (Over an async
driver each statement, fetch and commit was a hand-off of its own, and the hand-offs, not
SQLite, were most of the time.) The thread owns the store's one connection: it opens it on
first use and closes it on :meth:`TransactionThread.close`; no other thread touches it.

The operations of one store run one at a time, in the order they were submitted, from
whichever event loops or threads submit them. Stores in other threads and processes share
the file through SQLite's locks (:mod:`fevex_sqlite.engine`).

Cancellation: cancelling the task that awaits an operation does not interrupt it once the
thread has started it. The function runs to its end and its transaction commits or rolls
back there, on the thread, before the thread takes the next operation, so the write is
either stored whole or not at all, never in part: what a lost connection to a database
server leaves too. The cancelled caller does not learn which; the store's own checks make
that safe to find out later (a commit retried at the same revision is ``RUN_CONFLICT`` once
the first one landed; a lease is fenced by its generation). An operation cancelled before
the thread started it never runs. No transaction outlives its function, so a cancelled
caller cannot leave the connection inside one.

Failures: a refusal of the store (a :class:`~fevex.FevexRunError` the function raised)
passes as it is. A failure of SQLite (a busy lock, a full disk, a read-only file, an I/O
error) rolls the transaction back, ends the connection and becomes the fevex error of
:func:`fevex_sqlite.errors.store_failure`, named after the store operation that met it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from sqlalchemy import Connection

from fevex.errors import FevexRunError
from fevex_sqlite.engine import begin, connect, open_engine
from fevex_sqlite.errors import is_database_error, store_failure

__all__ = ["TransactionThread"]

P = ParamSpec("P")
T = TypeVar("T")

THREAD_NAME = "fevex-sqlite"


class _Worker:
    """A thread, and the connection that only it opens, uses and closes."""

    def __init__(self) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=THREAD_NAME)
        self.connection: Connection | None = None


class TransactionThread:
    """Runs functions of a connection to the file at ``path``, each in one transaction, on
    one thread started on first use. A closed one starts a new thread if used again."""

    def __init__(self, path: Path, *, busy_timeout: float) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self._engine = open_engine(path, busy_timeout=busy_timeout)
        # Guards _worker only: submitting and closing may happen on any thread.
        self._lock = threading.Lock()
        self._worker: _Worker | None = None

    async def read(
        self,
        operation: str,
        work: Callable[Concatenate[Connection, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``work(connection, *args, **kwargs)`` in a ``DEFERRED`` transaction; a failure
        of SQLite is reported as one of the store's ``operation``."""
        return await self._run(
            operation, False, lambda connection: work(connection, *args, **kwargs)
        )

    async def write(
        self,
        operation: str,
        work: Callable[Concatenate[Connection, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``work(connection, *args, **kwargs)`` in an ``IMMEDIATE`` transaction, which
        commits when it returns and rolls back when it raises."""
        return await self._run(
            operation, True, lambda connection: work(connection, *args, **kwargs)
        )

    async def _run(self, operation: str, writes: bool, work: Callable[[Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._worker is None:
                self._worker = _Worker()
            worker = self._worker
            done: Future[T] = worker.executor.submit(
                self._transaction, worker, operation, writes, work
            )
        return await asyncio.wrap_future(done, loop=loop)

    def _transaction(
        self, worker: _Worker, operation: str, writes: bool, work: Callable[[Connection], T]
    ) -> T:
        # On the worker's thread.
        try:
            connection = worker.connection
            if connection is None:
                connection = worker.connection = connect(self._engine)
            with begin(connection, writes=writes):
                return work(connection)
        except FevexRunError:
            # A refusal (conflict, lost lease, bad argument): raised by the work before it
            # wrote, and rolled back; the connection is as good as before.
            raise
        except BaseException as error:
            # A busy lock, a full disk, an interrupted statement: whatever state the
            # connection was left in, the next operation gets a new one. An error in
            # closing it would only hide this one.
            with contextlib.suppress(Exception):
                _close_connection(worker)
            if is_database_error(error):
                raise self._failure(operation, error) from error
            raise

    def _failure(self, operation: str, error: BaseException) -> FevexRunError:
        return store_failure(operation, error, path=self.path, busy_timeout=self.busy_timeout)

    async def close(self) -> None:
        """Let the operations already submitted finish, close the connection and end the
        thread; safe to call more than once."""
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is None:
            return
        closed = worker.executor.submit(_close_connection, worker)
        worker.executor.shutdown(wait=False)
        try:
            await asyncio.wrap_future(closed, loop=asyncio.get_running_loop())
        except Exception as error:
            if is_database_error(error):
                raise self._failure("close", error) from error
            raise
        # The thread has nothing left but the shutdown: joining it does not wait.
        worker.executor.shutdown(wait=True)


def _close_connection(worker: _Worker) -> None:
    # Closing rolls back whatever transaction is left, then closes the SQLite connection.
    connection, worker.connection = worker.connection, None
    if connection is not None:
        connection.close()
