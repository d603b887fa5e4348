"""Where a store lives: ``sqlite:///`` URLs and plain paths turned into a database file.

This module imports nothing beyond the standard library and fevex, so the plugin can parse
and reject a URL without loading SQLAlchemy.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl

from fevex.errors import FevexConfigurationError

__all__ = ["SCHEMES", "DEFAULT_BUSY_TIMEOUT", "StoreLocation", "parse_location"]

# sqlite+aiosqlite: the spelling of SQLAlchemy's async driver, accepted as an alias of the
# same file (the store itself runs pysqlite on a thread of its own).
SCHEMES = ("sqlite", "sqlite+aiosqlite")
DEFAULT_BUSY_TIMEOUT = 5.0
_URL_OPTIONS = ("busy_timeout", "create")
_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
# Two letters or more, so that a Windows drive ("C:") stays a path.
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+):(?P<rest>.*)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """An absolute database path and the options its URL carried (``None``: not given)."""

    path: Path
    busy_timeout: float | None = None
    create: bool | None = None


def parse_location(path_or_url: str | os.PathLike[str]) -> StoreLocation:
    """Read ``sqlite:///relative/runs.db``, ``sqlite:////absolute/runs.db`` (also with
    ``sqlite+aiosqlite``), optionally ending in ``?busy_timeout=SECONDS`` and/or
    ``create=false`` (``&`` between them), or a plain path.

    Relative paths are taken from the current directory now, so that a later ``chdir``
    cannot move the store.
    """
    if isinstance(path_or_url, os.PathLike):
        return StoreLocation(_absolute(os.fspath(path_or_url), str(path_or_url)))
    if not isinstance(path_or_url, str) or not path_or_url:
        raise _invalid(path_or_url, "give a file path or a 'sqlite:///path.db' URL")
    url = _URL.match(path_or_url)
    if url is None:
        # No scheme: a plain file path, as create_sqlite_run_store accepts.
        return StoreLocation(_absolute(path_or_url, path_or_url))
    if url["scheme"].lower() not in SCHEMES:
        raise _invalid(path_or_url, f"the scheme must be one of {', '.join(SCHEMES)}")
    # "sqlite:" + "//" + an empty host + "/" + the path, which may itself start with "/".
    if not url["rest"].startswith("///"):
        raise _invalid(
            path_or_url,
            "write 'sqlite:///relative/runs.db' or 'sqlite:////absolute/runs.db' "
            "(a SQLite URL has no host)",
        )
    database, _, query = url["rest"][3:].partition("?")
    options = _options(query, path_or_url)
    return StoreLocation(
        _absolute(database, path_or_url),
        _busy_timeout(options.get("busy_timeout"), path_or_url),
        _create(options.get("create"), path_or_url),
    )


def _absolute(database: str, original: str) -> Path:
    if not database or database == ":memory:" or database.startswith("file:"):
        raise _invalid(
            original,
            "it needs a database file; for a store that lives in memory use 'memory://'",
        )
    return Path(os.path.abspath(database))


def _options(query: str, original: str) -> dict[str, str]:
    if not query:
        return {}
    try:
        options = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=True))
    except ValueError:
        raise _invalid(original, "its query string cannot be read") from None
    unknown = sorted(set(options) - set(_URL_OPTIONS))
    if unknown:
        raise _invalid(
            original,
            f"unknown option(s) {', '.join(unknown)}; only busy_timeout and create are read",
        )
    return options


def _create(value: str | None, original: str) -> bool | None:
    if value is None:
        return None
    if value.lower() not in _BOOLEANS:
        raise _invalid(original, "create must be true or false")
    return _BOOLEANS[value.lower()]


def _busy_timeout(value: str | None, original: str) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        raise _invalid(original, "busy_timeout must be a number of seconds") from None
    if not (math.isfinite(seconds) and seconds >= 0):
        raise _invalid(original, "busy_timeout must be a number of seconds")
    return seconds


def _invalid(value: object, reason: str) -> FevexConfigurationError:
    return FevexConfigurationError(
        "INVALID_CONFIG",
        f"SQLite run store location {value!r} is not usable: {reason}.",
        category="store",
        details={"location": str(value)},
    )
