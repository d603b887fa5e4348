"""The writes every run makes, ``create_execution`` and ``commit_execution``: one statement,
one round trip, each.

Each is a single SQL statement run in autocommit mode, so it is its own transaction. The
statement locks what it reads (``FOR UPDATE``), computes whether the store rules accept the
write, writes only if they do, and returns what it read. The store then calls the store
rules (:mod:`fevex.runtime.store_rules`) on what was read, in their order, so that a refused
write raises the same code, in the same order, as in every other store; the statement, which
applied the same conditions to the same locked rows, wrote nothing in that case. A write
the rules accept but the statement did not make (they can only disagree if one of them
changes without the other) raises ``STORE_ERROR``, having written nothing.

The conditions in SQL are the rules' own: for a commit, :func:`~fevex.runtime.check_lease`
(owner, generation, expiry by the database's clock, read once), :func:`~fevex.runtime.
check_revision` and :func:`~fevex.runtime.check_sequence`; for a creation,
:func:`~fevex.runtime.check_run_is_new`, the session rules and the sequence. A duplicate
event id makes the primary key refuse the whole statement (:func:`~fevex.runtime.
event_id_taken`). A commit that ends a child run also wakes its parent
(:func:`~fevex.runtime.parent_to_wake`): the same statement sets the parent's ``wake_at`` to
the clock that judged the lease, only when the commit is accepted. A commit that changes
neither its session nor its parent, most of a run's, runs the same statement without those
two parts.

Values travel as one JSON document per row kind (the run's new fields, the events), read on
the server with ``jsonb_populate_record``: a statement's text never changes with what a
commit changes, so it is prepared once per connection and sent through libpq itself
(:mod:`fevex_postgres.libpq_statements`), and a run column added to
:data:`~fevex.runtime.RUN_FIELDS_A_COMMIT_CHANGES` and to the table (``wake_at``,
say) needs no change here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from fevex.errors import FevexRunError
from fevex.events import RunEvent
from fevex.runtime import (
    RUN_FIELDS_A_COMMIT_CHANGES,
    ExecutionCommit,
    ExecutionCreate,
    RunLease,
    StoredRun,
    check_commit,
    check_new_session,
    check_run_is_new,
    check_sequence,
    check_session_reservable,
    ends_run,
    event_id_taken,
    run_conflict,
    run_not_found,
    store_error,
)
from fevex_postgres.connections import json_text
from fevex_postgres.libpq_statements import (
    Parameter,
    Statement,
    as_bool,
    as_float,
    as_int,
    as_text,
)
from fevex_postgres.notifications import CHANNEL
from fevex_postgres.tables import ENDED_SQL, NOW_SQL, events, runs, sessions

__all__ = ["commit_execution", "create_execution"]

# What a commit may write on the run row: the fields it changes, then its bookkeeping.
_COMMITTED_COLUMNS = (
    *sorted(RUN_FIELDS_A_COMMIT_CHANGES),
    "revision",
    "updated_at",
    "last_sequence",
    "checkpoint",
    "lease_expires_at",
)
# Every column of a new run but its lease expiry, which the database's clock sets, and its
# followers' registration, which no run has when it is created.
_CREATED_COLUMNS = tuple(
    column.name
    for column in runs.columns
    if column.name not in ("lease_expires_at", "followed_until")
)
_EVENT_COLUMNS = tuple(column.name for column in events.columns)


def _listed(columns: Sequence[str], prefix: str = "") -> str:
    return ", ".join(f"{prefix}{column}" for column in columns)


_INSERT_EVENTS = f"""
    INSERT INTO {events.name} ({_listed(_EVENT_COLUMNS)})
    SELECT {_listed(_EVENT_COLUMNS, "e.")}
    FROM accepted, jsonb_populate_recordset(NULL::{events.name}, %(events)s::jsonb) AS e
"""

# The run row is locked first; the other parts read it through "accepted", which holds a
# row only when the store rules accept the commit.
_COMMIT_RUN = f"""
WITH stored AS (
    SELECT revision, session_id, parent_run_id, last_sequence, lease_owner, lease_generation,
           lease_expires_at, followed_until, {NOW_SQL} AS now
    FROM {runs.name} WHERE id = %(run_id)s FOR UPDATE
), accepted AS (
    SELECT session_id, parent_run_id, now, followed_until > now AS followed FROM stored
    WHERE lease_owner = %(lease_owner)s AND lease_generation = %(lease_generation)s
      AND lease_expires_at > now
      AND revision + 1 = %(revision)s
      AND (%(previous_sequence)s::integer IS NULL OR last_sequence = %(previous_sequence)s)
), new_events AS ({_INSERT_EVENTS}
), changed_run AS (
    UPDATE {runs.name} AS r
    SET ({_listed(_COMMITTED_COLUMNS)}) = (
        SELECT {_listed(_COMMITTED_COLUMNS, "c.")}
        FROM jsonb_populate_record(r, %(changes)s::jsonb) AS c
    )
    FROM accepted WHERE r.id = %(run_id)s
    -- Followers, if the locked row says the run has some, are told in the same statement;
    -- PostgreSQL delivers it when (and only if) this transaction commits.
    RETURNING CASE WHEN %(notify)s AND accepted.followed THEN pg_notify('{CHANNEL}', r.id) END
)"""
_COMMIT_SESSION_AND_PARENT = f"""
, changed_session AS (
    UPDATE {sessions.name} AS s
    SET revision = s.revision + 1,
        updated_at = %(updated_at)s,
        history = CASE WHEN %(history)s::jsonb IS NULL THEN s.history
                       ELSE s.history || %(history)s::jsonb END,
        active_run_id = CASE WHEN %(release_session)s THEN NULL ELSE s.active_run_id END
    FROM accepted WHERE s.id = accepted.session_id AND %(change_session)s
), woken_parent AS (
    -- A commit that ends a child run wakes its parent now, by the clock that judged the
    -- lease, unless the parent has ended. The parent's row is locked after the child's:
    -- every write that locks two runs locks a run, then its parent, so none waits in a
    -- cycle.
    UPDATE {runs.name} AS p SET wake_at = accepted.now
    FROM accepted
    WHERE %(wakes_parent)s AND p.id = accepted.parent_run_id AND p.status NOT IN ({ENDED_SQL})
)"""
_COMMIT_RESULT = """
SELECT revision, last_sequence, lease_owner, lease_generation, lease_expires_at, now,
       (SELECT count(*) FROM changed_run) AS written
FROM stored
"""
_COMMIT = Statement("commit_execution", _COMMIT_RUN + _COMMIT_SESSION_AND_PARENT + _COMMIT_RESULT)
# Most commits change neither the session nor a parent: the statement without those parts.
# The server initializes every part of a statement's plan at each execution, also the
# parts whose condition is false; without them a commit costs it less CPU.
_COMMIT_RUN_ONLY = Statement("commit_run", _COMMIT_RUN + _COMMIT_RESULT)

# The session is locked (when it exists) before anything is judged; a session that does
# not exist yet is inserted, and a concurrent creator's insert makes the primary key refuse
# one of the two statements (retried once: the session then exists, and is locked).
_CREATE = Statement(
    "create_execution",
    f"""
WITH stored_session AS (
    SELECT active_run_id, revision FROM {sessions.name} WHERE id = %(session_id)s FOR UPDATE
), state AS (
    SELECT EXISTS (SELECT FROM {runs.name} WHERE id = %(run_id)s) AS run_exists,
           s.revision IS NOT NULL AS session_found, s.active_run_id, s.revision
    FROM (SELECT) AS one LEFT JOIN stored_session AS s ON true
), accepted AS (
    SELECT session_found FROM state
    WHERE NOT run_exists
      AND CASE WHEN session_found
               THEN active_run_id IS NULL AND revision = %(session_revision)s
               ELSE %(session_revision)s::bigint IS NULL END
      AND %(sequence_ok)s
), new_session AS (
    INSERT INTO {sessions.name}
        (id, history, summary, active_run_id, revision, created_at, updated_at)
    SELECT %(session_id)s, '[]'::jsonb, NULL, %(run_id)s, 1, %(created_at)s, %(created_at)s
    FROM accepted WHERE NOT session_found
), reserved_session AS (
    UPDATE {sessions.name} AS s
    SET active_run_id = %(run_id)s, revision = s.revision + 1, updated_at = %(created_at)s
    FROM accepted WHERE s.id = %(session_id)s AND accepted.session_found
), new_run AS (
    INSERT INTO {runs.name} ({_listed(_CREATED_COLUMNS)}, lease_expires_at)
    SELECT {_listed(_CREATED_COLUMNS, "r.")}, {NOW_SQL} + %(lease_seconds)s
    FROM accepted, jsonb_populate_record(NULL::{runs.name}, %(run)s::jsonb) AS r
    RETURNING lease_expires_at
), new_events AS ({_INSERT_EVENTS}
)
SELECT run_exists, session_found, active_run_id, revision,
       (SELECT lease_expires_at FROM new_run) AS lease_expires_at
FROM state
""",
)

_SESSIONS_KEY = f"{sessions.name}_pkey"
_RUNS_KEY = f"{runs.name}_pkey"


async def create_execution(db: psycopg.AsyncConnection[Any], create: ExecutionCreate) -> RunLease:
    """``RunStore.create_execution`` on ``db`` (autocommit); its arguments were checked."""
    run = create.run
    try:
        last_sequence = check_sequence(run.id, 0, create.events)
    except FevexRunError as error:
        sequence_error: FevexRunError | None = error
        last_sequence = 0
    else:
        sequence_error = None
    parameters: dict[str, Parameter] = {
        "run_id": run.id,
        "session_id": run.session_id,
        "session_revision": create.session_revision,
        "sequence_ok": sequence_error is None,
        "created_at": run.created_at,
        "lease_seconds": float(create.lease_seconds),
        "run": json_text(
            {
                **run.to_json(),
                "checkpoint": create.checkpoint,
                "last_sequence": last_sequence,
                "lease_owner": create.lease_owner,
                "lease_generation": 1,
            }
        ),
        "events": _events_json(create.events),
    }
    # A concurrent creator may insert the same new session first: then this statement
    # fails on the session's key, wrote nothing, and the second try finds the session.
    for attempt in (1, 2):
        try:
            state = await _CREATE.fetch_row(db, parameters)
        except psycopg.errors.UniqueViolation as error:
            constraint = error.diag.constraint_name
            if constraint == _SESSIONS_KEY and attempt == 1:
                continue
            if constraint == _RUNS_KEY:
                # A concurrent creator of the same run id committed first.
                check_run_is_new(run.id, True)
            if constraint == _SESSIONS_KEY:
                raise run_conflict(
                    f"Session {run.session_id} changed while the run was being created."
                ) from error
            raise event_id_taken(run.id) from error
        break
    assert state is not None  # the statement always returns its one "state" row
    run_exists, session_found, active_run_id, session_revision, lease_expires_at = state
    check_run_is_new(run.id, as_bool(run_exists))
    if as_bool(session_found):
        check_session_reservable(
            run.session_id,
            None if active_run_id is None else as_text(active_run_id),
            as_int(session_revision),
            create.session_revision,
        )
    else:
        check_new_session(run.session_id, create.session_revision)
    if sequence_error is not None:
        raise sequence_error
    if lease_expires_at is None:
        raise _disagreement("create_execution")
    return RunLease(create.lease_owner, 1, as_float(lease_expires_at))


async def commit_execution(db: psycopg.AsyncConnection[Any], commit: ExecutionCommit) -> None:
    """``RunStore.commit_execution`` on ``db`` (autocommit); its arguments were checked."""
    changes: dict[str, Any] = {
        **(commit.changes or {}),
        "revision": commit.revision,
        "updated_at": commit.updated_at,
    }
    if commit.events:
        changes["last_sequence"] = commit.events[-1].sequence
    if commit.checkpoint is not None:
        changes["checkpoint"] = commit.checkpoint
    if commit.release_lease:
        # Expired, not forgotten: owner and generation stay, so the next acquisition
        # advances the generation past this one.
        changes["lease_expires_at"] = 0.0
    parameters: dict[str, Parameter] = {
        "run_id": commit.run_id,
        "lease_owner": commit.lease.owner,
        "lease_generation": commit.lease.generation,
        "revision": commit.revision,
        "previous_sequence": _previous_sequence(commit),
        "events": _events_json(commit.events),
        "changes": json_text(changes),
        "notify": bool(commit.events) or "status" in changes,
        "updated_at": commit.updated_at,
        "history": json_text(list(commit.history)) if commit.history else None,
        "release_session": commit.release_session,
        "change_session": commit.history is not None or commit.release_session,
        "wakes_parent": ends_run(commit.changes),
    }
    whole = parameters["change_session"] or parameters["wakes_parent"]
    try:
        stored = await (_COMMIT if whole else _COMMIT_RUN_ONLY).fetch_row(db, parameters)
    except psycopg.errors.UniqueViolation as error:
        raise event_id_taken(commit.run_id) from error
    if stored is None:
        raise run_not_found(commit.run_id)
    revision, last_sequence, owner, generation, expires_at, now, written = stored
    lease = RunLease(as_text(owner), as_int(generation), as_float(expires_at))
    state = StoredRun(as_int(revision), lease, as_int(last_sequence))
    check_commit(commit, state, as_float(now))
    if written == b"0":
        raise _disagreement("commit_execution")


def _previous_sequence(commit: ExecutionCommit) -> int | None:
    """The stored last sequence the commit's events continue (``None``: it has none, any
    will do), or -1, which no run has, when they do not follow one another."""
    if not commit.events:
        return None
    previous = commit.events[0].sequence - 1
    try:
        check_sequence(commit.run_id, previous, commit.events)
    except FevexRunError:
        return -1
    return previous


def _events_json(new_events: Sequence[RunEvent]) -> str:
    return json_text([event.to_json() for event in new_events])


def _disagreement(operation: str) -> FevexRunError:
    return store_error(
        operation,
        RuntimeError("the statement's conditions disagree with the store rules"),
    )
