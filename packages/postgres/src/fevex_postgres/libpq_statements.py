"""Fixed statements sent through libpq itself: prepared once per connection under names of
their own, parameters and the returned row as text.

Every run's writes are one statement each, with a text that never changes. psycopg's
``execute`` would adapt each parameter, build a cursor, look the statement up in its cache of
prepared ones, wait with a timer armed and turn the row into Python values: about as much
client CPU as all the rest of a write. Here a statement is parsed for its placeholders once,
at import, prepared on a connection the first time it runs there, and then sent as
``Bind``/``Execute`` of text values; the one row comes back as the server's text, which the
caller reads column by column.

Errors are psycopg's own, built from the server's result (:func:`psycopg.errors.
error_from_result`): the same classes, SQLSTATEs and diagnostics (a unique violation's
constraint name) as ``execute`` raises, so :func:`~fevex_postgres.connections.store_failure`
maps them to the same codes. A connection failure is psycopg's ``OperationalError`` and
leaves the connection ``broken``.

A prepare cancelled after the server did it, but before its answer was read, leaves the
statement prepared on a connection that serves again without knowing it; the next prepare of
that name there is refused as a duplicate, which says it is prepared, and it is then used.

Cancellation, as psycopg's ``execute`` does it: a task cancelled while its statement is in
flight asks the server to cancel that statement (a statement waiting for a row lock would
otherwise go on waiting, and may write after its caller gave up) and reads what is left of
its results, then lets the cancellation go on; the connection serves again. If the cancel
or the read fails or takes over 5 seconds, the connection is left mid-statement and the
pool closes it instead of lending it again
(:meth:`~fevex_postgres.autocommit_pool.AutocommitPool.give_back`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import weakref
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg import pq
from psycopg.errors import error_from_result

__all__ = [
    "Parameter",
    "Row",
    "Statement",
    "as_bool",
    "as_float",
    "as_int",
    "as_text",
    "as_users_text",
]

Parameter = str | int | float | bool | None
# The returned row's values: the server's text of each column, None for NULL.
Row = list[bytes | None]

# How long a cancelled statement's server-side cancel request may take (psycopg's own).
_CANCEL_SECONDS = 5.0
_ACTIVE = pq.TransactionStatus.ACTIVE
_TUPLES_OK = pq.ExecStatus.TUPLES_OK
_COMMAND_OK = pq.ExecStatus.COMMAND_OK
_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


class _Prepared:
    """What one connection holds: the statements prepared on it, and its text encoding."""

    __slots__ = ("encoding", "names")

    def __init__(self, db: psycopg.AsyncConnection[Any]) -> None:
        self.names: set[bytes] = set()
        # psycopg's own choice for str parameters: UTF-8 on a SQL_ASCII connection.
        encoding = db.info.encoding
        self.encoding = "utf-8" if encoding == "ascii" else encoding


_PREPARED: weakref.WeakKeyDictionary[psycopg.AsyncConnection[Any], _Prepared]
_PREPARED = weakref.WeakKeyDictionary()


class Statement:
    """One statement, written with psycopg's ``%(name)s`` placeholders, run with
    :meth:`fetch_row` on a connection in autocommit mode. ``name`` is the server-side name
    it is prepared under; it must be unique among the store's statements."""

    __slots__ = ("_name", "_parameters", "_text")

    def __init__(self, name: str, text: str) -> None:
        parameters: list[str] = []

        def number(placeholder: re.Match[str]) -> str:
            parameter = placeholder.group(1)
            if parameter not in parameters:
                parameters.append(parameter)
            return f"${parameters.index(parameter) + 1}"

        self._name = f"fevex_{name}".encode()
        self._text = _PLACEHOLDER.sub(number, text).encode()
        self._parameters = tuple(parameters)

    async def fetch_row(
        self, db: psycopg.AsyncConnection[Any], values: Mapping[str, Parameter]
    ) -> Row | None:
        """The first row the statement returns with ``values`` (None: no row); raises
        ``psycopg.Error`` as ``execute`` would."""
        prepared = _PREPARED.get(db)
        if prepared is None:
            prepared = _PREPARED[db] = _Prepared(db)
        pgconn = db.pgconn
        if self._name not in prepared.names:
            pgconn.send_prepare(self._name, self._text)
            # Refused as a duplicate: an earlier prepare on this connection was cancelled
            # after the server had done it; the name is this statement's, with this text.
            with contextlib.suppress(psycopg.errors.DuplicatePreparedStatement):
                _check(await _results(db), _COMMAND_OK, prepared.encoding)
            prepared.names.add(self._name)
        encoding = prepared.encoding
        pgconn.send_query_prepared(
            self._name, [_text_of(values[name], encoding) for name in self._parameters]
        )
        result = _check(await _results(db), _TUPLES_OK, encoding)
        if not result.ntuples:
            return None
        return [result.get_value(0, column) for column in range(result.nfields)]


def as_bool(value: bytes | None) -> bool:
    return value == b"t"


def as_int(value: bytes | None) -> int:
    return int(_present(value))


def as_float(value: bytes | None) -> float:
    # The server writes a double precision in its shortest exact form (extra_float_digits
    # 1, the default since PostgreSQL 12), which float() reads back exactly.
    return float(_present(value))


def as_text(value: bytes | None) -> str:
    # Only what the store wrote itself comes back as text, encoded as UTF-8 (_Prepared).
    return _present(value).decode()


def as_users_text(value: bytes | None, db: psycopg.AsyncConnection[Any]) -> str:
    """A column that may hold what users wrote (a run's JSON), in the text encoding of the
    connection it came from (UTF-8 on a SQL_ASCII one, as parameters are sent)."""
    prepared = _PREPARED.get(db)
    return _present(value).decode("utf-8" if prepared is None else prepared.encoding)


def _present(value: bytes | None) -> bytes:
    if value is None:
        raise psycopg.InternalError("the statement returned NULL where it never does")
    return value


def _text_of(value: Parameter, encoding: str) -> bytes | None:
    if value.__class__ is str:
        return value.encode(encoding)
    if value is None:
        return None
    if value is True:
        return b"t"
    if value is False:
        return b"f"
    # int and float: repr() is exact, and PostgreSQL reads "inf" and "nan" too.
    return repr(value).encode()


def _check(results: list[pq.abc.PGresult], expected: pq.ExecStatus, encoding: str) -> Any:
    for result in results:
        if result.status != expected:
            if result.status == pq.ExecStatus.FATAL_ERROR:
                raise error_from_result(result, encoding=encoding)
            raise psycopg.InternalError(f"unexpected result status {result.status}")
    if not results:
        raise psycopg.InternalError("the server returned no result")
    return results[0]


async def _results(db: psycopg.AsyncConnection[Any]) -> list[pq.abc.PGresult]:
    """Every result of the command just sent, once the server is ready for the next."""
    pgconn = db.pgconn
    try:
        return await _received(pgconn)
    except OSError as error:
        # psycopg's reading too: the socket went away under the wait.
        raise psycopg.OperationalError("connection socket closed") from error
    except BaseException:
        if pgconn.transaction_status == _ACTIVE:
            await _cancel(db)
        raise


async def _received(pgconn: pq.abc.PGconn) -> list[pq.abc.PGresult]:
    loop = asyncio.get_running_loop()
    while pgconn.flush():
        await _ready(loop.add_writer, loop.remove_writer, pgconn.socket, loop)
    results: list[pq.abc.PGresult] = []
    while True:
        pgconn.consume_input()
        while not pgconn.is_busy():
            result = pgconn.get_result()
            if result is None:
                return results
            results.append(result)
        await _ready(loop.add_reader, loop.remove_reader, pgconn.socket, loop)


async def _cancel(db: psycopg.AsyncConnection[Any]) -> None:
    """psycopg's own answer to an interrupted statement: the server is asked to cancel it,
    and its results (an error, as a rule) are read, so the connection can serve again. If
    either fails or takes too long, the connection stays mid-statement and the pool closes
    it when it comes back."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(_CANCEL_SECONDS):
            await db.cancel_safe(timeout=_CANCEL_SECONDS)
            await _received(db.pgconn)


async def _ready(add: Any, remove: Any, fd: int, loop: asyncio.AbstractEventLoop) -> None:
    woken: asyncio.Future[None] = loop.create_future()
    add(fd, _wake, woken)
    try:
        await woken
    finally:
        remove(fd)


def _wake(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)
