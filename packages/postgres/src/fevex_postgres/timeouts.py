"""The server-side timeouts of a store's sessions: why a frozen worker cannot hold a row.

A worker that stops inside a transaction (``SIGSTOP``, a debugger, a laptop lid, an event
loop blocked by CPU work) keeps the row locks that transaction took, and a ``FOR UPDATE``
on that row waits for them for as long as the worker's connection lives: recovery would
skip the run (``SKIP LOCKED``) and ``acquire_lease`` would hang. So every connection of the
store starts with three settings, sent as libpq's ``options`` startup parameter:

- ``idle_in_transaction_session_timeout``: the server ends a session that sits idle inside
  a transaction this long, rolling it back and releasing its locks;
- ``lock_timeout``: a statement waits this long for a lock, then fails (``RUN_CONFLICT`` from
  ``acquire_lease``, ``STORE_BUSY`` elsewhere), instead of queueing behind a frozen holder;
- ``statement_timeout``: the server cancels a statement that runs this long
  (``STORE_TIMEOUT``).

All three must stay below the app's ``lease_seconds``, with room to spare: the row of a
worker frozen inside a commit is then free again by the time its lease expires, and whoever
recovers the run finds it unlocked. ``lock_timeout`` must stay below ``statement_timeout``,
so that a lock wait is reported as one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fevex.errors import FevexConfigurationError

__all__ = ["DEFAULT_TIMEOUTS", "SessionTimeouts", "session_timeouts"]


@dataclass(frozen=True, slots=True)
class SessionTimeouts:
    """Seconds, for every session the store opens; see the module's documentation."""

    statement_timeout: float = 10.0
    lock_timeout: float = 5.0
    idle_in_transaction_session_timeout: float = 10.0

    @property
    def longest(self) -> float:
        """The longest a session of this store can hold a row lock: the bound that must stay
        below the app's ``lease_seconds``."""
        return max(self.statement_timeout, self.idle_in_transaction_session_timeout)

    def libpq_options(self, given: str | None = None) -> str:
        """The ``options`` startup parameter that sets them, followed by the ``given``
        options of the URL (which therefore win over these)."""
        settings = " ".join(f"-c {name}={_milliseconds(getattr(self, name))}" for name in _NAMES)
        return f"{settings} {given}" if given else settings


DEFAULT_TIMEOUTS = SessionTimeouts()
_NAMES = ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout")


def session_timeouts(*sources: Mapping[str, Any]) -> SessionTimeouts:
    """The defaults, overridden by each of ``sources`` in turn (the URL's, then keyword
    arguments); ``INVALID_CONFIG`` unless each is a positive number of seconds and
    ``lock_timeout`` is below ``statement_timeout``."""
    chosen: dict[str, float] = {name: getattr(DEFAULT_TIMEOUTS, name) for name in _NAMES}
    for source in sources:
        for name, value in source.items():
            if not _is_positive_seconds(value):
                raise FevexConfigurationError(
                    "INVALID_CONFIG",
                    f"{name} must be a positive number of seconds, below the app's "
                    f"lease_seconds; not {value!r}.",
                )
            chosen[name] = float(value)
    timeouts = SessionTimeouts(**chosen)
    if timeouts.lock_timeout >= timeouts.statement_timeout:
        raise FevexConfigurationError(
            "INVALID_CONFIG",
            f"lock_timeout ({timeouts.lock_timeout:g} s) must be below statement_timeout "
            f"({timeouts.statement_timeout:g} s), so that a wait for a lock is reported as one.",
        )
    return timeouts


def _is_positive_seconds(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _milliseconds(seconds: float) -> int:
    # PostgreSQL reads a bare number as milliseconds; 0 would switch the timeout off.
    return max(1, math.ceil(seconds * 1000))
