"""Telling followers that a run moved on: NOTIFY when a commit writes, LISTEN to wait.

A commit that writes events or changes a run's status sends ``pg_notify`` on
:data:`CHANNEL`, with the run id as payload, inside its own transaction, when the run is
followed: PostgreSQL delivers it only once the transaction has committed, and never when it
rolled back. A run is followed until its ``followed_until`` (seconds since the epoch by the
database's clock), which every wait makes sure covers it (:func:`follow_run`); a commit
reads it from the run row it locks, and a run nobody follows costs its commits no
notification (notifying commits take turns on one server-wide lock until their WAL is
flushed).

The followers of one store in one event loop share one connection that listens on the
channel: a dedicated psycopg connection in autocommit mode, outside the pool (a pooled
connection goes back to the pool and stops listening). Its reader task wakes the waiters of
the run each notification names. The connection is opened by the first wait, kept while
the store is open, opened again by the next wait if it dropped, and closed by
:meth:`RunNotifications.close`.

No commit is missed: a waiter is registered first, then the connection is made to listen,
and only then is the run read by :func:`follow_run`, which also records the follower on the
run's row. A commit is therefore either visible to that read or notified after the
listening began, to a waiter already there:

- When the read finds a registration that covers the wait, that registration committed
  before the read began, and every commit either came before it (and is in the read) or
  locked the row after it, found it, and notifies.
- Otherwise the read registers the wait by updating the row, which waits for a commit
  holding its lock and returns the row as that commit left it; a commit after it finds the
  registration.

When the connection drops, notifications may have been lost, so every waiter is woken to
read again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import psycopg

from fevex.runtime import ended_statuses
from fevex_postgres.connections import store_unavailable
from fevex_postgres.libpq_statements import Statement, as_int, as_text
from fevex_postgres.tables import ENDED_SQL, NOW_SQL, events, runs

__all__ = ["CHANNEL", "LONGEST_FOLLOW_SECONDS", "RunNotifications", "follow_run"]

CHANNEL = "fevex_run_events"
_LISTEN = f"LISTEN {CHANNEL}"
# TCP keepalives let the kernel notice a listening connection whose server vanished
# without closing it (a network partition) within about a minute, so that it is reopened;
# a connection that only waits sends nothing else that could fail. Settings in the URL win.
_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10}
# The longest one registration covers: a longer wait is several waits in a row.
LONGEST_FOLLOW_SECONDS = 600.0
# A registration covers a wait's span, this margin for its round trips and clocks, and a
# minute more: the waits that follow it in that minute (a follower reads a page, then waits
# again) find it and write nothing.
_MARGIN_SECONDS = 5.0
_AHEAD_SECONDS = 60.0

_FOLLOW = Statement(
    "follow_run",
    f"""
WITH seen AS (
    SELECT status, last_sequence,
           coalesce(followed_until > {NOW_SQL} + %(seconds)s::double precision
                    + {_MARGIN_SECONDS}, false) AS covered
    FROM {runs.name} WHERE id = %(run_id)s
), registered AS (
    UPDATE {runs.name} AS r
    SET followed_until = {NOW_SQL} + %(seconds)s::double precision + {_AHEAD_SECONDS}
    -- An ended run has nothing left to notify: the read alone ends the wait.
    FROM seen WHERE r.id = %(run_id)s AND NOT seen.covered AND seen.status NOT IN ({ENDED_SQL})
    RETURNING r.status, r.last_sequence
)
SELECT coalesce(registered.status, seen.status) AS status,
       coalesce(registered.last_sequence, seen.last_sequence) AS last_sequence,
       (SELECT sequence FROM {events.name}
        WHERE id = %(after)s::text AND run_id = %(run_id)s) AS after_sequence
FROM seen LEFT JOIN registered ON true
""",
)


async def follow_run(db: psycopg.AsyncConnection[Any], wait: tuple[str, str | None, float]) -> bool:
    """Record that a wait of ``seconds`` follows the run (unless a registration already
    covers it), and tell whether the run moved on past the event ``after`` (any event when
    ``None``) or ended; ``wait`` is ``(run_id, after, seconds)``. An unknown run or cursor
    counts as moved on: the caller's next read reports it. ``db`` is in autocommit mode."""
    run_id, after, seconds = wait
    row = await _FOLLOW.fetch_row(db, {"run_id": run_id, "after": after, "seconds": seconds})
    if row is None:
        return True
    status, last_sequence, after_sequence = row
    if as_text(status) in ended_statuses():
        return True
    if after is not None and after_sequence is None:
        return True
    return as_int(last_sequence) > (0 if after_sequence is None else as_int(after_sequence))


class RunNotifications:
    """The LISTEN side of one store: one listening connection per event loop.

    ``connect_options`` are psycopg's ``connect`` keyword arguments for the store's
    database; ``display_url`` (without password) is what error messages name.
    """

    def __init__(self, connect_options: Mapping[str, Any], display_url: str) -> None:
        self._connect_options = {**_KEEPALIVES, **connect_options, "autocommit": True}
        self._display_url = display_url
        self._listeners: dict[asyncio.AbstractEventLoop, _Listener] = {}

    async def wait(
        self, run_id: str, moved_on: Callable[[], Awaitable[bool]], timeout: float
    ) -> bool:
        """``True`` at once when ``moved_on()``, read once the connection listens, says
        so; else ``True`` when a notification for ``run_id`` (or a dropped connection)
        ends the wait, ``False`` after ``timeout`` seconds."""
        listener = self._listener()
        woken = asyncio.Event()
        listener.add(run_id, woken)
        try:
            await listener.listen()
            if await moved_on():
                return True
            try:
                async with asyncio.timeout(timeout):
                    await woken.wait()
            except TimeoutError:
                return False
            return True
        finally:
            listener.discard(run_id, woken)

    def waiting(self) -> int:
        """How many waits of this loop are in progress (for tests and diagnostics)."""
        listener = self._listeners.get(asyncio.get_running_loop())
        return 0 if listener is None else listener.waiting()

    async def close(self) -> None:
        """Close every loop's listening connection; the next wait opens a new one."""
        current = asyncio.get_running_loop()
        listeners, self._listeners = self._listeners, {}
        for loop, listener in listeners.items():
            if loop is current:
                await listener.close()
            elif loop.is_running():
                # That loop runs in another thread: its connection is closed there.
                closing = asyncio.run_coroutine_threadsafe(listener.close(), loop)
                await asyncio.wrap_future(closing)
            else:
                listener.abandon()

    def _listener(self) -> _Listener:
        loop = asyncio.get_running_loop()
        listener = self._listeners.get(loop)
        if listener is None:
            listener = self._listeners[loop] = _Listener(self._connect)
            # The connections of loops that have ended can only be dropped.
            for ended in [other for other in self._listeners if other.is_closed()]:
                self._listeners.pop(ended).abandon()
        return listener

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        try:
            connection = await psycopg.AsyncConnection.connect(**self._connect_options)
        except psycopg.Error as error:
            raise store_unavailable(self._display_url, _reason(error)) from error
        try:
            await connection.execute(_LISTEN)
        except BaseException as error:
            # Also when the wait is cancelled here: nothing else holds the connection.
            await connection.close()
            if isinstance(error, psycopg.Error):
                raise store_unavailable(self._display_url, _reason(error)) from error
            raise
        return connection


class _Listener:
    """One loop's listening connection, its reader task and the waiters it wakes."""

    def __init__(self, connect: Callable[[], Awaitable[psycopg.AsyncConnection[Any]]]) -> None:
        self._connect = connect
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._connection: psycopg.AsyncConnection[Any] | None = None
        self._reader: asyncio.Task[None] | None = None
        # True from the LISTEN until the reader stops; it turns False in the same step
        # that wakes every waiter, so no wait can start on a connection that is going.
        self._listening = False
        self._opening = asyncio.Lock()

    def add(self, run_id: str, woken: asyncio.Event) -> None:
        self._waiters.setdefault(run_id, set()).add(woken)

    def discard(self, run_id: str, woken: asyncio.Event) -> None:
        waiters = self._waiters.get(run_id)
        if waiters is not None:
            waiters.discard(woken)
            if not waiters:
                del self._waiters[run_id]

    def waiting(self) -> int:
        return sum(len(waiters) for waiters in self._waiters.values())

    async def listen(self) -> None:
        """Return once the connection listens, opening it when it is not open."""
        async with self._opening:
            if self._listening:
                return
            connection = await self._connect()
            self._connection = connection
            self._listening = True
            self._reader = asyncio.create_task(self._read(connection))

    async def _read(self, connection: psycopg.AsyncConnection[Any]) -> None:
        try:
            async for notify in connection.notifies():
                for woken in self._waiters.get(notify.payload, ()):
                    woken.set()
        except psycopg.Error:
            pass  # The connection dropped; the next wait opens another.
        finally:
            # Whatever was notified while nobody listened is lost: every waiter reads again.
            self._listening = False
            for waiters in self._waiters.values():
                for woken in waiters:
                    woken.set()
            await connection.close()

    async def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        self._listening = False
        connection, self._connection = self._connection, None
        if connection is not None:
            # Cancelled before it first ran, the reader closed nothing.
            await connection.close()

    def abandon(self) -> None:
        """Close the connection of a loop that no longer runs, without awaiting: its
        reader task can never run again."""
        self._listening = False
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.pgconn.finish()


def _reason(error: psycopg.Error) -> str:
    text = (error.diag.message_primary or str(error)).strip()
    return text.splitlines()[0] if text else type(error).__name__
