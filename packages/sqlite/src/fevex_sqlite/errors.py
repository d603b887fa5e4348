"""The errors this store adds to the run-store contract, each with a stable code."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from fevex.errors import FevexConfigurationError, FevexRunError

__all__ = ["is_busy", "schema_too_new", "store_busy", "unusable_file"]


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


def unusable_file(path: Path, reason: str) -> FevexConfigurationError:
    return FevexConfigurationError(
        "INVALID_CONFIG",
        f"The SQLite run store cannot use {path}: {reason}.",
        category="store",
        details={"path": str(path)},
    )


def is_busy(error: BaseException) -> bool:
    """Whether a sqlite3 error means another connection held the lock too long."""
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int):
        return (code & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "database is locked" in str(error)
