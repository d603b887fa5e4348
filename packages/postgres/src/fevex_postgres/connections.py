"""Where a store's connections come from: a SQLAlchemy pool per event loop, and the fevex
errors that driver and pool failures become.

Every failure of the driver or the pool becomes a :class:`~fevex.FevexRunError` with a
stable code (:func:`store_failure`), raised from the driver's error so that it stays the
``__cause__``. Its message never quotes the driver, whose text can hold a statement and its
parameters, except for the reason a server could not be reached at all.

SQLAlchemy's asyncio pool belongs to the event loop that first waits on it, yet one store
may serve several loops: ``asyncio.run`` after ``asyncio.run``, or loops on several
threads. So each loop gets its own engine. The engines of loops that have ended hold only
idle connections, and closing a psycopg connection awaits nothing, so the next loop to
arrive closes them.

A pooled connection the server has dropped (a restart, ``pg_terminate_backend``, an idle
timeout) is replaced when it is checked out, without a round trip: an idle connection
receives nothing unless its server ended it (the server's last message, or the end of the
stream), so a socket with something to read is discarded (:func:`_discard_if_dropped`).
``pool_pre_ping`` (off by default) adds SQLAlchemy's ``SELECT 1`` to every checkout.

The one-statement operations (:meth:`ConnectionPools.driver`: the claims, the schema
check; :meth:`ConnectionPools.on_driver`: every run's writes) run on psycopg connections in
autocommit mode from a second pool per event loop, the store's own
(:mod:`fevex_postgres.autocommit_pool`), sized by the same options: each statement is its
own transaction, one round trip, and nothing of SQLAlchemy runs on the way.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import orjson
import psycopg
from sqlalchemy import event
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

from fevex.errors import FevexRunError
from fevex.runtime import (
    invalid_argument,
    run_conflict,
    store_error,
)
from fevex_postgres.autocommit_pool import AutocommitPool, PoolExhausted, dropped

__all__ = ["ConnectionPools", "json_text", "store_failure", "store_unavailable"]

_Argument = TypeVar("_Argument")
_Result = TypeVar("_Result")

# SQLSTATEs with a code of their own; the others are STORE_ERROR, or STORE_UNAVAILABLE when
# the connection itself failed.
_CODES = {
    "53100": "STORE_FULL",  # disk_full
    "25006": "STORE_READ_ONLY",  # read_only_sql_transaction
    "55P03": "STORE_BUSY",  # lock_not_available: lock_timeout ran out
    "57014": "STORE_TIMEOUT",  # query_canceled: statement_timeout (or pg_cancel_backend)
    # The server ended this session, idle inside a transaction for longer than
    # idle_in_transaction_session_timeout: the transaction was rolled back.
    "25P03": "STORE_TIMEOUT",
}
# Failures of the connection, not of a statement: their text says which (refused,
# authentication, no such database, shutdown) and never quotes a statement.
_CONNECTION_STATES = ("08", "28", "3D", "57P", "53300")


class ConnectionPools:
    """The pooled connections of one store: per event loop that uses it, SQLAlchemy's pool
    and an :class:`AutocommitPool`.

    ``connect_options`` are psycopg's ``connect`` keyword arguments for the same database
    as ``engine_url`` with ``connect_args``; ``display_url`` (without password) is what
    error messages name.
    """

    def __init__(
        self,
        engine_url: URL,
        pool_options: Mapping[str, Any],
        connect_args: Mapping[str, Any],
        connect_options: Mapping[str, Any],
        display_url: str,
    ) -> None:
        self._engine_url = engine_url
        self._pool_options = dict(pool_options)
        self._connect_args = dict(connect_args)
        self._connect_options = dict(connect_options)
        self._display_url = display_url
        # Built now so that unusable options fail at once; it joins the first loop to ask.
        self._unbound: AsyncEngine | None = self._create_engine()
        self._engines: dict[asyncio.AbstractEventLoop, AsyncEngine] = {}
        self._autocommit: dict[asyncio.AbstractEventLoop, AutocommitPool] = {}

    def _create_engine(self) -> AsyncEngine:
        engine = create_async_engine(
            self._engine_url,
            connect_args=self._connect_args,
            json_serializer=json_text,
            **self._pool_options,
        )
        event.listen(engine.sync_engine.pool, "checkout", _discard_if_dropped)
        return engine

    async def _engine(self) -> AsyncEngine:
        loop = asyncio.get_running_loop()
        engine = self._engines.get(loop)
        if engine is not None:
            return engine
        engine = self._unbound or self._create_engine()
        self._unbound = None
        self._engines[loop] = engine
        for ended in [other for other in self._engines if other.is_closed()]:
            await self._engines.pop(ended).dispose()
        return engine

    @asynccontextmanager
    async def connect(self, operation: str) -> AsyncIterator[AsyncConnection]:
        """A connection of this loop's pool, returned to it afterwards; a failure of the
        driver is reported as one of the store's ``operation``."""
        engine = await self._engine()
        opened = False
        try:
            async with engine.connect() as connection:
                opened = True
                yield connection
        except DBAPIError as error:
            raise store_failure(operation, self._display_url, error, sent=opened) from error
        except PoolTimeoutError as error:
            raise self._pool_exhausted() from error

    @asynccontextmanager
    async def driver(self, operation: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A psycopg connection in autocommit mode (each statement is its own transaction)
        from this loop's :class:`AutocommitPool`, returned to it afterwards; a failure of
        the driver is reported as one of the store's ``operation``.

        The caller sends its own SQL, which psycopg prepares on the connection after a few
        uses."""
        pool = await self._autocommit_pool()
        connection = await self._take(pool, operation)
        try:
            yield connection
        except psycopg.Error as error:
            raise store_failure(operation, self._display_url, error) from error
        finally:
            await pool.give_back(connection)

    async def on_driver(
        self,
        operation: str,
        write: Callable[[psycopg.AsyncConnection[Any], _Argument], Awaitable[_Result]],
        argument: _Argument,
    ) -> _Result:
        """``write(connection, argument)`` on a connection of :meth:`driver`, with the same
        error reporting: what every run's writes use, which spares them a context
        manager's generators on each call."""
        pool = self._autocommit.get(asyncio.get_running_loop())
        if pool is None:
            pool = await self._autocommit_pool()
        connection = await self._take(pool, operation)
        try:
            return await write(connection, argument)
        except psycopg.Error as error:
            raise store_failure(operation, self._display_url, error) from error
        finally:
            await pool.give_back(connection)

    async def _take(self, pool: AutocommitPool, operation: str) -> psycopg.AsyncConnection[Any]:
        try:
            return await pool.take()
        except psycopg.Error as error:
            raise store_failure(operation, self._display_url, error, sent=False) from error
        except PoolExhausted as error:
            raise self._pool_exhausted() from error

    async def _autocommit_pool(self) -> AutocommitPool:
        loop = asyncio.get_running_loop()
        pool = self._autocommit.get(loop)
        if pool is not None:
            return pool
        options = self._pool_options
        pool = AutocommitPool(
            self._connect_options,
            size=options["pool_size"],
            overflow=options["max_overflow"],
            timeout=options["pool_timeout"],
            recycle=options["pool_recycle"],
            pre_ping=options["pool_pre_ping"],
        )
        self._autocommit[loop] = pool
        for ended in [other for other in self._autocommit if other.is_closed()]:
            await self._autocommit.pop(ended).close()
        return pool

    def _pool_exhausted(self) -> FevexRunError:
        timeout = self._pool_options["pool_timeout"]
        reason = f"no pooled connection came free within {timeout} s"
        return store_unavailable(self._display_url, reason)

    async def close(self) -> None:
        """Close every pool's connections; the next ``connect`` opens new ones."""
        current = asyncio.get_running_loop()
        engines, self._engines = self._engines, {}
        pools, self._autocommit = self._autocommit, {}
        closings = [(loop, engine.dispose()) for loop, engine in engines.items()]
        closings += [(loop, pool.close()) for loop, pool in pools.items()]
        for loop, closing in closings:
            if loop is not current and loop.is_running():
                # That loop runs in another thread: its connections are closed there.
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(closing, loop))
            else:
                await closing


def _discard_if_dropped(
    dbapi_connection: Any, record: ConnectionPoolEntry, proxy: PoolProxiedConnection
) -> None:
    """Checkout hook: refuse a pooled connection its server has dropped, so that the pool
    replaces it (SQLAlchemy's DisconnectionError protocol) before the operation uses it."""
    connection = getattr(dbapi_connection, "driver_connection", None)
    if not isinstance(connection, psycopg.AsyncConnection):
        return
    reason = dropped(connection)
    if reason is not None:
        raise DisconnectionError(reason)


def store_failure(
    operation: str, display_url: str, error: DBAPIError | psycopg.Error, *, sent: bool = True
) -> FevexRunError:
    """The fevex error for a driver error during ``operation`` (psycopg's, or SQLAlchemy's
    wrapper of it); raise it ``from error``. ``sent=False``: it came while opening a
    connection, before anything of the operation reached the server. The message names the
    server without its password and never carries the statement or its parameters."""
    orig = error.orig if isinstance(error, DBAPIError) else error
    sqlstate = getattr(orig, "sqlstate", None) or ""
    if isinstance(orig, psycopg.IntegrityError):
        # Constraint names are the schema's own; the values are in the driver's text only.
        constraint = getattr(getattr(orig, "diag", None), "constraint_name", None)
        violated = f" (constraint {constraint})" if constraint else ""
        return run_conflict(
            f"The write conflicts with stored data{violated}; nothing was written.",
            operation=operation,
        )
    if sqlstate.startswith("40"):
        # A deadlock or serialization failure rolled the whole transaction back.
        return run_conflict(
            "A concurrent write got in the way (a deadlock or serialization failure); "
            "nothing was written, retry.",
            operation=operation,
        )
    code = _CODES.get(sqlstate)
    if code is not None:
        return store_error(operation, error, code=code)
    if isinstance(orig, psycopg.OperationalError | psycopg.InterfaceError) and (
        not sqlstate or sqlstate.startswith(_CONNECTION_STATES)
    ):
        return store_unavailable(display_url, _primary_message(orig), sent=sent)
    return store_error(operation, error)


def store_unavailable(display_url: str, reason: str, *, sent: bool = True) -> FevexRunError:
    """``STORE_UNAVAILABLE``; ``sent=False`` when the operation never reached the server
    (no connection could be opened), so that it certainly did not happen."""
    if not sent:
        outcome = "Nothing was done; retry once the server is reachable."
        reached = "cannot be reached"
    else:
        outcome = "The operation may or may not have completed; check and retry once the "
        outcome += "server is reachable."
        reached = "is unavailable"
    return FevexRunError(
        "STORE_UNAVAILABLE",
        f"PostgreSQL at {display_url} {reached}: {reason}. {outcome}",
        recoverable=True,
        category="store",
    )


def _primary_message(error: BaseException) -> str:
    diagnostic = getattr(error, "diag", None)
    primary = getattr(diagnostic, "message_primary", None)
    text = (primary or str(error)).strip()
    return text.splitlines()[0] if text else type(error).__name__


# The encoder that decides what is JSON, as the SQLite store's json.dumps does; one for every
# value: json.dumps would build one per call for allow_nan=False.
_ENCODER = json.JSONEncoder(allow_nan=False)
# orjson refuses subclasses, dataclasses and dates (it would hand them to a `default`, and
# there is none), so they go to the standard encoder, which takes subclasses and refuses the
# others.
_ORJSON_OPTIONS = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)


def json_text(value: Any) -> str:
    """JSONB's encoder: a value that is not JSON (NaN and infinities included) is the
    caller's fault, with the code the SQLite store gives it, and never reaches the server.

    orjson writes the text, for a fraction of the standard encoder's work, and reads it back:
    the text stands only if it reads back equal to ``value``. Whatever does not (NaN and
    infinities, which orjson writes as ``null``; an enum or a UUID, written as its value; a
    tuple, read back as a list) and whatever orjson refuses (integers past 64 bits, keys that
    are not text, lone surrogates, subclasses) goes to the standard encoder, which writes it or
    refuses it as it always has: the text may differ, never what is stored or refused."""
    try:
        written = orjson.dumps(value, option=_ORJSON_OPTIONS)
    except TypeError:
        pass
    else:
        if orjson.loads(written) == value:
            return written.decode()
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as error:
        raise invalid_argument(f"A value to store is not plain JSON: {error}.") from error
