"""Store URLs: which ones name this store, the pool options they may carry, and the form
that is safe to show.

``postgresql://``, ``postgres://``, ``postgresql+psycopg://`` and
``postgresql+psycopg_async://`` all mean the same store on psycopg 3. Pool options and the
server-side timeouts may ride in the query string (``?pool_size=20&lock_timeout=2``) because
``FEVEX_RUN_STORE`` can only carry a URL; every other query parameter goes to libpq
untouched (``sslmode``, ``application_name``, ``options=-csearch_path%3Dfevex``, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from fevex.errors import FevexConfigurationError

__all__ = ["POOL_OPTIONS", "TIMEOUT_OPTIONS", "StoreUrl", "parse_store_url"]

DRIVER = "postgresql+psycopg"
_SCHEMES = frozenset(
    ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg_async", "postgres+psycopg")
)


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{text!r} is not a boolean")


# The SQLAlchemy pool settings a store accepts, each with how to read it from a query string.
POOL_OPTIONS: Mapping[str, Callable[[str], Any]] = {
    "pool_size": int,
    "max_overflow": int,
    "pool_timeout": float,
    "pool_recycle": float,
    "pool_pre_ping": _boolean,
}
# The server-side timeouts of the store's sessions, in seconds (see timeouts.py).
TIMEOUT_OPTIONS: Mapping[str, Callable[[str], Any]] = {
    "statement_timeout": float,
    "lock_timeout": float,
    "idle_in_transaction_session_timeout": float,
}
_URL_OPTIONS = {**POOL_OPTIONS, **TIMEOUT_OPTIONS}


@dataclass(frozen=True, slots=True)
class StoreUrl:
    """A parsed store URL: the engine's URL (psycopg 3, the store's own options removed),
    and the pool options and timeouts the query string carried."""

    engine_url: URL
    pool_options: dict[str, Any] = field(default_factory=dict)
    timeouts: dict[str, Any] = field(default_factory=dict)

    @property
    def display(self) -> str:
        """The URL without any password, for messages and logs."""
        url = self.engine_url
        # URL.set(password=None) would keep the password: None means "unchanged" there.
        safe = URL.create(
            url.drivername,
            username=url.username,
            host=url.host,
            port=url.port,
            database=url.database,
            query={key: value for key, value in url.query.items() if "password" not in key.lower()},
        )
        return safe.render_as_string(hide_password=False)


def parse_store_url(url: str) -> StoreUrl:
    """Read a PostgreSQL store URL; ``INVALID_CONFIG`` when it names another driver or an
    unreadable pool option or timeout. Messages never repeat the URL as given, which may hold
    a password."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError, TypeError):
        raise FevexConfigurationError(
            "INVALID_CONFIG",
            "The run store URL is not a valid PostgreSQL URL; write it like "
            "postgresql+psycopg://user@host:5432/database.",
        ) from None
    if parsed.drivername not in _SCHEMES:
        raise FevexConfigurationError(
            "INVALID_CONFIG",
            f"fevex-postgres connects with psycopg 3 and cannot use {parsed.drivername!r}; "
            "write the URL as postgresql+psycopg://... (or postgresql://...).",
        )
    options: dict[str, Any] = {}
    for name, read in _URL_OPTIONS.items():
        if name not in parsed.query:
            continue
        raw = parsed.query[name]
        text = raw if isinstance(raw, str) else raw[-1]
        try:
            options[name] = read(text)
        except ValueError:
            raise FevexConfigurationError(
                "INVALID_CONFIG", f"The run store URL sets {name} to {text!r}, which is unusable."
            ) from None
    engine_url = parsed.set(drivername=DRIVER).difference_update_query(list(options))
    pool = {name: value for name, value in options.items() if name in POOL_OPTIONS}
    timeouts = {name: value for name, value in options.items() if name in TIMEOUT_OPTIONS}
    return StoreUrl(engine_url, pool, timeouts)
