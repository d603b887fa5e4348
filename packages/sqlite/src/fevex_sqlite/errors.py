"""The errors this store adds to the run-store contract, each with a stable code.

A failure of SQLite itself during an operation becomes a :class:`~fevex.FevexRunError` by
:func:`store_failure`: its code says what happened (``STORE_BUSY``, ``STORE_FULL``,
``STORE_READ_ONLY``, else ``STORE_ERROR``) and its message never quotes the driver, whose
text can hold the SQL statement and its parameters; the driver's error stays the
``__cause__``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy.exc import DBAPIError

from fevex.errors import FevexConfigurationError, FevexRunError
from fevex.runtime import (
    store_error,
)

__all__ = [
    "is_busy",
    "is_database_error",
    "schema_too_new",
    "sqlite_too_old",
    "store_busy",
    "store_failure",
    "store_not_found",
    "unusable_file",
]

# SQLite's primary result codes (the low byte of an extended code) and the fevex code each
# becomes; any other failure is STORE_ERROR.
_CODES = {
    sqlite3.SQLITE_FULL: "STORE_FULL",
    sqlite3.SQLITE_READONLY: "STORE_READ_ONLY",
}
_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def is_database_error(error: BaseException) -> bool:
    """Whether ``error`` is SQLite's (through SQLAlchemy or straight from ``sqlite3``), as
    opposed to a refusal of the store or a bug."""
    return isinstance(error, DBAPIError | sqlite3.Error)


def store_failure(
    operation: str, error: BaseException, *, path: Path, busy_timeout: float
) -> FevexRunError:
    """The fevex error for SQLite's failure during ``operation``; raise it ``from error``."""
    code = _primary_code(error)
    if code in _BUSY:
        return store_busy(path, busy_timeout)
    return store_error(operation, error, code=_CODES.get(code or 0, "STORE_ERROR"))


def store_busy(path: Path, busy_timeout: float) -> FevexRunError:
    return FevexRunError(
        "STORE_BUSY",
        f"The SQLite file {path} stayed locked by another writer for more than "
        f"{busy_timeout:g} s; nothing was written. Retry, or raise busy_timeout.",
        recoverable=True,
        category="store",
        details={"path": str(path)},
    )


def schema_too_new(path: Path, found: int, known: int) -> FevexConfigurationError:
    return FevexConfigurationError(
        "STORE_SCHEMA_TOO_NEW",
        f"The SQLite file {path} has schema version {found}, but this fevex-sqlite knows "
        f"versions up to {known}; upgrade fevex-sqlite to open it.",
        category="store",
        details={"path": str(path), "found": found, "known": known},
    )


def sqlite_too_old(
    path: Path, found: str, needed: tuple[int, int, int], migration: int
) -> FevexConfigurationError:
    """A file whose upgrade needs a newer SQLite library than the one Python was built with;
    the file is left as it was."""
    wanted = ".".join(map(str, needed))
    return FevexConfigurationError(
        "STORE_SQLITE_TOO_OLD",
        f"Upgrading the SQLite file {path} to schema version {migration} needs SQLite "
        f"{wanted} or later, but this Python uses SQLite {found}; the file was not changed. "
        "Open it with a Python built against a newer SQLite.",
        category="store",
        details={"path": str(path), "sqlite": found, "needed": wanted, "migration": migration},
    )


def store_not_found(path: Path, *, hint: str | None = None) -> FevexConfigurationError:
    """A store asked not to create its file names one that does not exist: most often a
    misspelt path, which would otherwise become a new, empty store."""
    hint = hint or "check the path, or open the store with create=True to create it"
    return FevexConfigurationError(
        "STORE_NOT_FOUND",
        f"The SQLite file {path} does not exist; {hint}.",
        category="store",
        details={"path": str(path)},
    )


def unusable_file(path: Path, reason: str) -> FevexConfigurationError:
    return FevexConfigurationError(
        "INVALID_CONFIG",
        f"The SQLite run store cannot use {path}: {reason}.",
        category="store",
        details={"path": str(path)},
    )


def is_busy(error: BaseException) -> bool:
    """Whether a sqlite3 error means another connection held the lock too long."""
    code = _primary_code(error)
    if code is not None:
        return code in _BUSY
    return "database is locked" in str(error)


def _primary_code(error: BaseException) -> int | None:
    # From a statement, SQLAlchemy's wrapper around sqlite3's error; from BEGIN or a
    # connection of the schema module, sqlite3's own.
    if isinstance(error, DBAPIError) and error.orig is not None:
        error = error.orig
    code = getattr(error, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None
