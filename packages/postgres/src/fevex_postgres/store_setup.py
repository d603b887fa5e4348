"""What a store builds from its URL and keyword options before it connects to anything:
the URL it may show, its pool options and session timeouts, and its connection pools.

The run store and the record store of one database are set up alike, so that
``create_fevex(run_store="postgresql://...")`` gives the app two stores with the same pool
sizes and the same server-side timeouts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fevex.errors import FevexConfigurationError
from fevex_postgres.connections import ConnectionPools
from fevex_postgres.store_url import POOL_OPTIONS, TIMEOUT_OPTIONS, parse_store_url
from fevex_postgres.timeouts import SessionTimeouts, session_timeouts

__all__ = ["DEFAULT_POOL_OPTIONS", "StoreSetup", "set_up_store"]

DEFAULT_POOL_OPTIONS: Mapping[str, Any] = {
    "pool_size": 5,
    "max_overflow": 10,
    "pool_timeout": 30.0,
    "pool_recycle": -1,
    # No SELECT 1 per checkout: a connection the server dropped (restart, idle timeout)
    # is noticed without a round trip and replaced before use (see connections.py).
    "pool_pre_ping": False,
}


@dataclass(frozen=True, slots=True)
class StoreSetup:
    """``display_url`` has no password; ``connect_options`` are psycopg's ``connect``
    keyword arguments for the store's own connections (the listening one, say)."""

    display_url: str
    pool_options: dict[str, Any]
    timeouts: SessionTimeouts
    connect_options: dict[str, Any]
    pools: ConnectionPools


def set_up_store(owner: str, url: str, options: Mapping[str, Any]) -> StoreSetup:
    """The setup of the store class ``owner`` at ``url``; keyword ``options`` win over the
    URL's query string, and an option no store takes is ``INVALID_CONFIG``."""
    parsed = parse_store_url(url)
    known = (*POOL_OPTIONS, *TIMEOUT_OPTIONS)
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise FevexConfigurationError(
            "INVALID_CONFIG",
            f"{owner} takes no option {', '.join(unknown)}; it takes {', '.join(known)}.",
        )
    display = parsed.display
    pool_options: dict[str, Any] = {
        **DEFAULT_POOL_OPTIONS,
        **parsed.pool_options,
        **{name: value for name, value in options.items() if name in POOL_OPTIONS},
    }
    timeouts = session_timeouts(
        parsed.timeouts,
        {name: value for name, value in options.items() if name in TIMEOUT_OPTIONS},
    )
    engine_url = parsed.engine_url
    connect_args: dict[str, Any] = {}
    if "application_name" not in engine_url.query:
        connect_args["application_name"] = "fevex"
    # The URL's own libpq options (a search_path, say) ride after the timeouts.
    given = engine_url.query.get("options")
    connect_args["options"] = timeouts.libpq_options(
        given if isinstance(given, str) or given is None else " ".join(given)
    )
    engine_url = engine_url.difference_update_query(["options"])
    # The connections that are psycopg's own (the autocommit pool's, the listening one)
    # get what SQLAlchemy's pool gives its own.
    _, libpq_options = engine_url.get_dialect()().create_connect_args(engine_url)
    connect_options = {**libpq_options, **connect_args}
    pools = ConnectionPools(engine_url, pool_options, connect_args, connect_options, display)
    return StoreSetup(display, pool_options, timeouts, connect_options, pools)
