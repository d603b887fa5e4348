"""The connections of the one-statement operations: psycopg connections in autocommit mode,
pooled by the store itself, one pool per event loop.

Every run's writes (``create_execution``, ``commit_execution``) and the claims are each one
statement in autocommit mode, on a psycopg connection. SQLAlchemy's pool would lend them
one through its greenlet bridge, reset it on return and switch its autocommit mode both
ways, which costs about as much client CPU as the statement itself; this pool lends a
connection that stays in autocommit mode from its first to its last statement, and takes
nothing but a socket poll to do it.

A connection the server has dropped (a restart, ``pg_terminate_backend``, an idle timeout)
is replaced when it is taken, without a round trip (:func:`dropped`); one that broke or was
left mid-statement (an operation cancelled while it waited for the server) is closed when
it comes back. The sizes are SQLAlchemy's: ``size`` idle connections are kept, ``overflow``
more may be open while all are lent, and a taker waits up to ``timeout`` seconds for one to
come back (:class:`PoolExhausted`). With ``recycle`` (seconds, -1: never) an older
connection is closed instead of lent; with ``pre_ping`` each is pinged (``SELECT 1``) before
it is lent, and replaced if that fails.
"""

from __future__ import annotations

import asyncio
import select
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

import psycopg

__all__ = ["AutocommitPool", "PoolExhausted", "dropped"]

# psycopg's transaction status of a connection between statements.
_IDLE = psycopg.pq.TransactionStatus.IDLE


class PoolExhausted(Exception):
    """No connection came back within the pool's timeout."""


class AutocommitPool:
    """psycopg connections in autocommit mode for one event loop; ``connect_options`` are
    psycopg's ``connect`` keyword arguments (autocommit is added)."""

    def __init__(
        self,
        connect_options: Mapping[str, Any],
        *,
        size: int,
        overflow: int,
        timeout: float,
        recycle: float = -1,
        pre_ping: bool = False,
    ) -> None:
        self._connect_options = {**connect_options, "autocommit": True}
        self._size = size
        # SQLAlchemy's max_overflow=-1: no limit.
        self._limit = None if overflow < 0 else size + overflow
        self._timeout = timeout
        self._recycle = recycle
        self._pre_ping = pre_ping
        self._idle: deque[psycopg.AsyncConnection[Any]] = deque()
        self._opened_at: dict[psycopg.AsyncConnection[Any], float] = {}
        # Connections open or being opened, lent or idle.
        self._open = 0
        # Takers waiting for a connection: each is handed one, or None (open your own).
        self._waiters: deque[asyncio.Future[psycopg.AsyncConnection[Any] | None]] = deque()

    @property
    def idle(self) -> int:
        """How many connections wait in the pool to be lent."""
        return len(self._idle)

    async def take(self) -> psycopg.AsyncConnection[Any]:
        """A connection, to :meth:`give_back` afterwards; ``psycopg.Error`` when none can be
        opened, :class:`PoolExhausted` when none comes back in time."""
        while self._idle:
            # The most recently used one: its server process is the warmest.
            connection = self._idle.pop()
            if await self._usable(connection):
                return connection
            await self._discard(connection)
        if self._limit is None or self._open < self._limit:
            return await self._connect()
        granted = await self._wait()
        if granted is not None:
            if await self._usable(granted):
                return granted
            await self._close(granted)
        # The slot given up by a connection that closed, or by the one just closed.
        return await self._connect(reserved=True)

    async def give_back(self, connection: psycopg.AsyncConnection[Any]) -> None:
        """Return a connection :meth:`take` lent; one that broke, or that a cancelled
        operation left mid-statement, is closed instead."""
        if connection.closed or connection.pgconn.transaction_status != _IDLE:
            await self._discard(connection)
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                return
        if len(self._idle) < self._size:
            self._idle.append(connection)
        else:
            await self._discard(connection)

    async def close(self) -> None:
        """Close the idle connections; those lent are closed when they come back."""
        self._size = 0
        idle, self._idle = self._idle, deque()
        for connection in idle:
            await self._discard(connection)

    async def _connect(self, *, reserved: bool = False) -> psycopg.AsyncConnection[Any]:
        if not reserved:
            self._open += 1
        try:
            connection = await psycopg.AsyncConnection.connect(**self._connect_options)
        except BaseException:
            self._free_slot()
            raise
        self._opened_at[connection] = time.monotonic()
        return connection

    async def _wait(self) -> psycopg.AsyncConnection[Any] | None:
        waiter: asyncio.Future[psycopg.AsyncConnection[Any] | None]
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(self._timeout):
                return await waiter
        except BaseException as error:
            if waiter.done() and not waiter.cancelled():
                # Handed one just as the wait ended: pass it on.
                granted = waiter.result()
                if granted is None:
                    self._free_slot()
                else:
                    await self.give_back(granted)
            else:
                waiter.cancel()
            if isinstance(error, TimeoutError):
                raise PoolExhausted() from error
            raise

    async def _usable(self, connection: psycopg.AsyncConnection[Any]) -> bool:
        if dropped(connection) is not None:
            return False
        if self._recycle >= 0:
            age = time.monotonic() - self._opened_at.get(connection, 0.0)
            if age > self._recycle:
                return False
        if self._pre_ping:
            try:
                await connection.execute("SELECT 1")
            except psycopg.Error:
                return False
        return True

    async def _discard(self, connection: psycopg.AsyncConnection[Any]) -> None:
        try:
            await self._close(connection)
        finally:
            self._free_slot()

    async def _close(self, connection: psycopg.AsyncConnection[Any]) -> None:
        self._opened_at.pop(connection, None)
        await connection.close()

    def _free_slot(self) -> None:
        self._open -= 1
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                # The slot passes to the waiter, which opens a connection in it.
                self._open += 1
                waiter.set_result(None)
                return


def dropped(connection: psycopg.AsyncConnection[Any]) -> str | None:
    """Why an idle connection is no longer usable (its server ended it), or None.

    No round trip: an idle connection receives nothing unless its server ended it (the
    server's last message, or the end of the stream), so a socket with something to read is
    given up; rarely that is a notice, and a fresh connection is the safe choice then too.
    """
    if connection.closed or connection.broken:
        return "the connection is closed"
    try:
        readable, _, _ = select.select([connection.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return "the connection's socket is unusable"
    return "the server ended the connection" if readable else None
