"""How workers take runs over: ``claim_expired_run`` and ``claim_due_run``, and what a
recovery sweep reports, ``expired_run_ids``. One statement, one round trip, each.

A claim is one ``UPDATE`` in autocommit mode whose target is the first candidate of a
``SELECT ... FOR UPDATE SKIP LOCKED``: concurrent claimers pass over a row another claim
holds instead of waiting for it, and a row another claim took meanwhile fails the
conditions again when PostgreSQL re-reads it, so no run is ever claimed twice. The
conditions are the store rules' own, in SQL: :func:`~fevex.runtime.is_claimable`
and :func:`~fevex.runtime.is_due`.

The database's clock is read once per statement, as a subquery: a value fixed for the
statement, which an index range can be bounded by (``clock_timestamp()`` itself is
volatile, and would be a filter on every row). Each statement reads the partial indexes of
migration 3 in the order it takes runs, one range of them (of each name asked for), so that
a claim costs the same however many runs have ended or belong to other names. The statuses
are literals, so that the index predicates hold also in the generic plan of a prepared
statement; with ``names``, a statement of its own reads by name (never a ``names IS NULL OR
...`` that would hide the indexes from a generic plan).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from fevex.runtime import (
    RunLease,
)
from fevex_postgres.tables import NOW_SQL, runs

__all__ = ["claim_due_run", "claim_expired_run", "expired_run_ids"]

_NOW = "(SELECT now FROM clock)"
_CLOCK = f"clock AS MATERIALIZED (SELECT {NOW_SQL} AS now)"


@dataclass(frozen=True, slots=True)
class _Claimable:
    """The runs a claim may take, a store rule in SQL: those in ``status`` whose ``key``
    has come (at or before now) and that hold ``also``, taken by ``key``, then id."""

    status: str
    key: str
    also: str = ""

    def candidates(self, *, by_name: bool, limit: str, lock: bool) -> str:
        """The ids of the first ``limit`` such runs, of the names asked for when
        ``by_name``; with ``lock``, each is locked, and a run another transaction holds is
        passed over."""
        locking = " FOR UPDATE SKIP LOCKED" if lock else ""
        if not by_name:
            return (
                f"SELECT id FROM {runs.name} WHERE status = '{self.status}' "
                f"AND {self.key} <= {_NOW}{self.also} "
                f'ORDER BY {self.key}, id COLLATE "C" LIMIT {limit}{locking}'
            )
        # The first runs of each name asked for, then the first of those. Each name's are
        # one range of its index, written as a row comparison and ordered by the name first,
        # so that no other index can serve them: with "name = asked.name", the planner,
        # which takes every name for as common as the average one, would rather read the
        # index of all names in order and filter, through every run of the names not asked
        # for, such as those of a name no worker has any more, which pile up. A claim
        # locks the first candidate of each name for its statement's few milliseconds;
        # a concurrent claim passes over those as over any run being claimed, and may find
        # none this time, while the claimer that holds them goes on to take them.
        return (
            "SELECT first.id FROM unnest(%(names)s::text[]) AS asked (name), LATERAL ("
            f"SELECT id, {self.key} AS key FROM {runs.name} WHERE status = '{self.status}' "
            f"AND name >= asked.name AND (name, {self.key}) <= (asked.name, {_NOW}){self.also} "
            f'ORDER BY name, {self.key}, id COLLATE "C" LIMIT {limit}{locking}'
            f') AS first ORDER BY first.key, first.id COLLATE "C" LIMIT {limit}'
        )


# is_claimable (a store rule): running, the lease expired; oldest expiry first.
_EXPIRED = _Claimable("running", "lease_expires_at")
# is_due (a store rule): paused, woken at or before now, the lease not live; earliest first.
_DUE = _Claimable("paused", "wake_at", f" AND wake_at IS NOT NULL AND lease_expires_at <= {_NOW}")


def _claim(claimable: _Claimable, *, by_name: bool, wakes: bool) -> str:
    # A due run's wake_at moves to the new lease's expiry: it is due again if its claimer
    # dies before it commits.
    wake = ", wake_at = clock.now + %(seconds)s" if wakes else ""
    candidate = claimable.candidates(by_name=by_name, limit="1", lock=True)
    return f"""
WITH {_CLOCK}, candidate AS ({candidate})
UPDATE {runs.name} AS r
SET lease_owner = %(owner)s, lease_generation = r.lease_generation + 1,
    lease_expires_at = clock.now + %(seconds)s{wake}
FROM candidate, clock WHERE r.id = candidate.id
RETURNING r.id, r.lease_generation, r.lease_expires_at
"""


def _listing(claimable: _Claimable, *, by_name: bool) -> str:
    listed = claimable.candidates(by_name=by_name, limit="%(limit)s", lock=False)
    return f"WITH {_CLOCK} {listed}"


# Each statement without names and with them (False, True).
_CLAIM_EXPIRED = {
    by_name: _claim(_EXPIRED, by_name=by_name, wakes=False) for by_name in (False, True)
}
_CLAIM_DUE = {by_name: _claim(_DUE, by_name=by_name, wakes=True) for by_name in (False, True)}
_EXPIRED_RUN_IDS = {by_name: _listing(_EXPIRED, by_name=by_name) for by_name in (False, True)}


async def claim_expired_run(
    db: psycopg.AsyncConnection[Any], owner: str, seconds: float, names: frozenset[str] | None
) -> tuple[str, RunLease] | None:
    """``RunStore.claim_expired_run`` on ``db`` (autocommit); ``names`` passed
    :func:`~fevex.runtime.claimable_names` and is not empty."""
    return await _take(db, _CLAIM_EXPIRED, owner, seconds, names)


async def claim_due_run(
    db: psycopg.AsyncConnection[Any], owner: str, seconds: float, names: frozenset[str] | None
) -> tuple[str, RunLease] | None:
    """``RunStore.claim_due_run`` on ``db`` (autocommit); ``names`` as for
    :func:`claim_expired_run`."""
    return await _take(db, _CLAIM_DUE, owner, seconds, names)


async def expired_run_ids(
    db: psycopg.AsyncConnection[Any], limit: int, names: frozenset[str] | None
) -> list[str]:
    """``RunStore.expired_run_ids`` on ``db`` (autocommit): a plain read, which MVCC
    answers with rows as they were committed, so a run whose row a frozen worker holds
    (which the claims skip) is listed all the same."""
    statement = _EXPIRED_RUN_IDS[names is not None]
    cursor = await db.execute(statement, {"limit": limit, "names": _listed(names)})
    return [str(run_id) for (run_id,) in await cursor.fetchall()]


async def _take(
    db: psycopg.AsyncConnection[Any],
    statements: dict[bool, str],
    owner: str,
    seconds: float,
    names: frozenset[str] | None,
) -> tuple[str, RunLease] | None:
    parameters = {"owner": owner, "seconds": float(seconds), "names": _listed(names)}
    cursor = await db.execute(statements[names is not None], parameters)
    claimed = await cursor.fetchone()
    if claimed is None:
        return None
    run_id, generation, expires_at = claimed
    return str(run_id), RunLease(owner, int(generation), float(expires_at))


def _listed(names: frozenset[str] | None) -> list[str] | None:
    return None if names is None else sorted(names)
