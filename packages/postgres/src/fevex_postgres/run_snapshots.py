"""The statements that read a run whole, ``get_run`` and ``take_over_run``: one round trip
each, in autocommit mode, sent through libpq itself (:mod:`fevex_postgres.libpq_statements`).

A read through SQLAlchemy's pool costs a ``BEGIN``, the ``SELECT`` and a ``ROLLBACK`` (three
round trips), and turning each column into a Python value; here the server builds the run as
one JSON document, which the client decodes in one call, as the other stores' snapshots are
plain JSON.

``take_over_run`` is ``acquire_lease`` and the reads a takeover needs, in one statement: the
run's row is locked, the store rule :func:`~fevex.runtime.check_acquirable` is
applied in SQL (the run in the asked status, its lease not live by the database's clock,
read once), and only then is the lease taken, with the next generation. The statement
returns what it read, and the store calls the rule on that, so that a refusal raises the
same code as in every other store; the statement, which applied the same conditions to the
same locked row, wrote nothing then.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import psycopg

from fevex.runtime import (
    AgentRun,
    RunLease,
    RunTakeover,
    check_acquirable,
    run_not_found,
    store_error,
)
from fevex_postgres.libpq_statements import (
    Parameter,
    Statement,
    as_float,
    as_int,
    as_text,
    as_users_text,
)
from fevex_postgres.tables import NOW_SQL, runs

__all__ = ["get_run", "take_over_run"]

# The run as one JSON document: every field of a snapshot is a column of the same name.
_RUN_JSON = (
    "jsonb_build_object("
    + ", ".join(f"'{field.name}', r.{field.name}" for field in dataclasses.fields(AgentRun))
    + ")::text"
)

_GET_RUN = Statement("get_run", f"SELECT {_RUN_JSON} FROM {runs.name} AS r WHERE r.id = %(run_id)s")

_TAKE_OVER = Statement(
    "take_over_run",
    f"""
WITH stored AS (
    SELECT status, lease_owner, lease_generation, lease_expires_at, {NOW_SQL} AS now
    FROM {runs.name} WHERE id = %(run_id)s FOR UPDATE
), taken AS (
    UPDATE {runs.name} AS r
    SET lease_owner = %(owner)s, lease_generation = r.lease_generation + 1,
        lease_expires_at = stored.now + %(seconds)s
    FROM stored
    WHERE r.id = %(run_id)s AND stored.status = %(status)s
      AND stored.lease_expires_at <= stored.now
    RETURNING r.lease_generation, r.lease_expires_at, r.last_sequence, r.checkpoint,
              {_RUN_JSON} AS run
)
SELECT stored.status, stored.lease_owner, stored.lease_generation, stored.lease_expires_at,
       stored.now, taken.lease_generation, taken.lease_expires_at, taken.last_sequence,
       taken.checkpoint, taken.run
FROM stored LEFT JOIN taken ON true
""",
)


async def get_run(db: psycopg.AsyncConnection[Any], run_id: str) -> AgentRun | None:
    """``RunStore.get_run`` on ``db`` (autocommit)."""
    row = await _GET_RUN.fetch_row(db, {"run_id": run_id})
    return None if row is None else AgentRun.from_json(json.loads(as_users_text(row[0], db)))


async def take_over_run(
    db: psycopg.AsyncConnection[Any], run_id: str, owner: str, seconds: float, status: str
) -> RunTakeover:
    """``TakeoverRunStore.take_over_run`` on ``db`` (autocommit)."""
    parameters: dict[str, Parameter] = {
        "run_id": run_id,
        "owner": owner,
        "seconds": float(seconds),
        "status": status,
    }
    row = await _TAKE_OVER.fetch_row(db, parameters)
    if row is None:
        raise run_not_found(run_id)
    stored_status, stored_owner, stored_generation, stored_expiry, now, *taken = row
    stored = RunLease(as_text(stored_owner), as_int(stored_generation), as_float(stored_expiry))
    check_acquirable(run_id, status, as_text(stored_status), stored, as_float(now))
    generation, expires_at, last_sequence, checkpoint, run = taken
    if generation is None:
        raise store_error(
            "take_over_run",
            RuntimeError("the statement's conditions disagree with the store rules"),
        )
    return RunTakeover(
        RunLease(owner, as_int(generation), as_float(expires_at)),
        AgentRun.from_json(json.loads(as_users_text(run, db))),
        None if checkpoint is None else json.loads(as_users_text(checkpoint, db)),
        as_int(last_sequence),
    )
