"""The SQL of the SQLite run store: every statement it runs, written once, at import.

Column names in a statement come from this module only; values are always bound
parameters. The conditions of claims and parent wake-ups are the store rules' own
(:func:`~fevex.runtime.is_claimable`, :func:`~fevex.runtime.is_due`,
:func:`~fevex.runtime.parent_to_wake`), in SQL.
"""

from __future__ import annotations

import dataclasses
import functools

from sqlalchemy import TextClause, bindparam, text

from fevex.runtime import ended_statuses

__all__ = [
    "APPEND_SESSION_TURN",
    "DELETE_SESSION_TURNS",
    "DUE",
    "ENDED_STATUSES",
    "END_SESSION_TURN",
    "EXPIRED",
    "EXPIRED_RUN_IDS",
    "EXPIRED_RUN_IDS_OF",
    "INSERT_EVENT",
    "INSERT_RUN",
    "INSERT_SESSION",
    "JSON_RUN_FIELDS",
    "LIST_EVENTS_SQL",
    "REPLACE_SESSION",
    "REQUEST_CANCEL",
    "RESERVE_SESSION",
    "SELECT_CHECKPOINT",
    "SELECT_COMMIT_TARGET",
    "SELECT_CREATE_TARGET",
    "SELECT_CURSOR",
    "SELECT_RUN",
    "SELECT_RUN_LEASE",
    "SELECT_RUN_POSITION",
    "SELECT_SESSION",
    "SELECT_SESSION_REVISION",
    "SELECT_SESSION_TURNS",
    "SELECT_TAKEOVER",
    "SET_LEASE",
    "WAKE_PARENT",
    "Claimable",
    "list_runs_statement",
    "update_run_statement",
]

_RUN_COLUMNS = (
    "id, session_id, agent_name, kind, status, input, output, usage, error, pause, "
    "revision, created_at, updated_at, name, version, parent_run_id, root_run_id, context, "
    "cancel_requested, wake_at"
)
JSON_RUN_FIELDS = ("input", "output", "usage", "error", "pause", "context")
ENDED_STATUSES = list(ended_statuses())
_EVENT_COLUMNS = "id, run_id, sequence, type, occurred_at, payload"

SELECT_RUN = text(f"SELECT {_RUN_COLUMNS} FROM fevex_runs WHERE id = :id")
_LEASE_COLUMNS = (
    "runs.session_id, runs.status, runs.revision, runs.lease_owner, runs.lease_generation, "
    "runs.lease_expires_at"
)
SELECT_RUN_LEASE = text(
    f"SELECT {_LEASE_COLUMNS}, runs.cancel_requested FROM fevex_runs AS runs WHERE id = :id"
)
# What a commit checks and extends, in one statement: the lease and revision, the last
# event's sequence (one seek to the end of the run in the (run_id, sequence) index).
_LAST_SEQUENCE = (
    "(SELECT COALESCE(MAX(sequence), 0) FROM fevex_events WHERE run_id = runs.id) AS last_sequence"
)
SELECT_COMMIT_TARGET = text(
    f"SELECT {_LEASE_COLUMNS}, runs.parent_run_id, {_LAST_SEQUENCE} "
    "FROM fevex_runs AS runs WHERE runs.id = :id"
)
# The parent a commit wakes (parent_to_wake, a store rule), unless it has ended.
WAKE_PARENT = text(
    "UPDATE fevex_runs SET wake_at = :now WHERE id = :id AND status NOT IN :ended"
).bindparams(bindparam("ended", expanding=True))
SELECT_CHECKPOINT = text("SELECT checkpoint FROM fevex_runs WHERE id = :id")
# What a takeover continues from, with the lease it takes: the run, its checkpoint and its
# last event's sequence.
SELECT_TAKEOVER = text(
    f"SELECT {_RUN_COLUMNS}, checkpoint, lease_owner, lease_generation, lease_expires_at, "
    f"{_LAST_SEQUENCE} FROM fevex_runs AS runs WHERE runs.id = :id"
)
SELECT_RUN_POSITION = text("SELECT created_at, id FROM fevex_runs WHERE id = :id")
INSERT_RUN = text(
    f"INSERT INTO fevex_runs ({_RUN_COLUMNS}, checkpoint, lease_owner, lease_generation, "
    "lease_expires_at) VALUES (:id, :session_id, :agent_name, :kind, :status, :input, "
    ":output, :usage, :error, :pause, :revision, :created_at, :updated_at, :name, :version, "
    ":parent_run_id, :root_run_id, :context, :cancel_requested, :wake_at, :checkpoint, "
    ":lease_owner, :lease_generation, :lease_expires_at)"
)
REQUEST_CANCEL = text("UPDATE fevex_runs SET cancel_requested = 1 WHERE id = :id")
SET_LEASE = text(
    "UPDATE fevex_runs SET lease_owner = :owner, lease_generation = :generation, "
    "lease_expires_at = :expires_at WHERE id = :id"
)


@dataclasses.dataclass(frozen=True, slots=True)
class Claimable:
    """The statements of one kind of claim: the first _claimable run, of any name or of the
    names asked for (``:names``), and the update that leases it."""

    first: TextClause
    first_of_names: TextClause
    take: TextClause


def _claimable(condition: str, order: str, take: TextClause) -> Claimable:
    """The claim of the runs ``condition`` selects (a store rule in SQL, at ``:now``), the
    first by ``order``, leased by ``take``."""
    select = f"SELECT id, lease_generation FROM fevex_runs WHERE {condition}"
    return Claimable(
        text(f"{select} ORDER BY {order} LIMIT 1"),
        text(f"{select} AND name IN :names ORDER BY {order} LIMIT 1").bindparams(
            bindparam("names", expanding=True)
        ),
        take,
    )


# Insertion order, as the in-memory store scans; the partial indexes narrow the scan to
# running runs whose lease has expired (is_claimable, a store rule, in SQL), of the run
# names asked for when given (fevex_runs_running_by_name).
_EXPIRED_RUN_CONDITION = "status = 'running' AND lease_expires_at <= :now"
EXPIRED = _claimable(_EXPIRED_RUN_CONDITION, "rowid", SET_LEASE)
# Oldest expiry first, ties by id, over the expired range of fevex_runs_running_by_lease.
EXPIRED_RUN_IDS = text(
    f"SELECT id FROM fevex_runs WHERE {_EXPIRED_RUN_CONDITION} "
    "ORDER BY lease_expires_at, id LIMIT :limit"
)
EXPIRED_RUN_IDS_OF = text(
    f"SELECT id FROM fevex_runs WHERE {_EXPIRED_RUN_CONDITION} AND name IN :names "
    "ORDER BY lease_expires_at, id LIMIT :limit"
).bindparams(bindparam("names", expanding=True))
# The store rule is_due in SQL: earliest wake_at first (ties by id, as the in-memory store
# orders them), one range scan of fevex_runs_paused_by_wake. The claim moves wake_at to
# the new lease's expiry: the run is due again if its claimer dies before it commits.
DUE = _claimable(
    "status = 'paused' AND wake_at IS NOT NULL AND wake_at <= :now AND lease_expires_at <= :now",
    "wake_at, id",
    text(
        "UPDATE fevex_runs SET lease_owner = :owner, lease_generation = :generation, "
        "lease_expires_at = :expires_at, wake_at = :expires_at WHERE id = :id"
    ),
)

# What creating a run checks, in one row whether or not the session exists: that the run
# id is new, and whether the session is free and still at the revision the caller read.
SELECT_CREATE_TARGET = text(
    "SELECT EXISTS (SELECT 1 FROM fevex_runs WHERE id = :run_id) AS run_exists, "
    "fevex_sessions.id, fevex_sessions.active_run_id, fevex_sessions.revision "
    "FROM (SELECT 1) LEFT JOIN fevex_sessions ON fevex_sessions.id = :session_id"
)
SELECT_SESSION = text(
    "SELECT id, summary, active_run_id, revision, created_at, updated_at "
    "FROM fevex_sessions WHERE id = :id"
)
SELECT_SESSION_REVISION = text("SELECT revision FROM fevex_sessions WHERE id = :id")
INSERT_SESSION = text(
    "INSERT INTO fevex_sessions (id, summary, active_run_id, revision, created_at, updated_at) "
    "VALUES (:id, :summary, :active_run_id, :revision, :created_at, :updated_at)"
)
RESERVE_SESSION = text(
    "UPDATE fevex_sessions SET active_run_id = :run_id, revision = revision + 1, "
    "updated_at = :updated_at WHERE id = :id"
)
END_SESSION_TURN = text(
    "UPDATE fevex_sessions SET "
    "active_run_id = CASE WHEN :release THEN NULL ELSE active_run_id END, "
    "revision = revision + 1, updated_at = :updated_at WHERE id = :id"
)
REPLACE_SESSION = text(
    "UPDATE fevex_sessions SET summary = :summary, active_run_id = NULL, "
    "revision = :revision, created_at = :created_at, updated_at = :updated_at WHERE id = :id"
)
# A session's history is its turns' messages in position order: one row per appended batch
# (a JSON array), so that a turn writes its own messages only, never the history before.
SELECT_SESSION_TURNS = text(
    "SELECT messages FROM fevex_session_turns WHERE session_id = :id ORDER BY position"
)
# The next position is one seek to the end of the session in the primary key.
APPEND_SESSION_TURN = text(
    "INSERT INTO fevex_session_turns (session_id, position, messages) "
    "SELECT :id, COALESCE(MAX(position) + 1, 0), :messages FROM fevex_session_turns "
    "WHERE session_id = :id"
)
DELETE_SESSION_TURNS = text("DELETE FROM fevex_session_turns WHERE session_id = :id")

INSERT_EVENT = text(
    f"INSERT INTO fevex_events ({_EVENT_COLUMNS}) "
    "VALUES (:id, :run_id, :sequence, :type, :occurred_at, :payload)"
)
SELECT_CURSOR = text("SELECT run_id, sequence FROM fevex_events WHERE id = :id")
# The cursor is resolved by id alone, then one range scan of the (run_id, sequence)
# index returns the page: earlier events are never read. LIMIT -1 means no limit (a
# caller's limit is positive: check_event_page).
LIST_EVENTS_SQL = {
    order: text(
        f"SELECT {_EVENT_COLUMNS} FROM fevex_events WHERE run_id = :run_id AND sequence > :after "
        f"ORDER BY sequence {order.upper()} LIMIT :limit"
    )
    for order in ("asc", "desc")
}


@functools.cache
def update_run_statement(columns: tuple[str, ...]) -> TextClause:
    # Column names come from this module only (commit changes are checked against
    # RUN_FIELDS_A_COMMIT_CHANGES first); values are always bound parameters. One
    # statement object per set of columns, so that SQLAlchemy's compiled cache serves it.
    assignments = ", ".join(f"{column} = :{column}" for column in columns)
    return text(f"UPDATE fevex_runs SET {assignments} WHERE id = :_key")


@functools.cache
def list_runs_statement(filters: tuple[str, ...], below: bool) -> TextClause:
    # Column names are the filters of check_run_page (a store rule), which builds ``filters``
    # from its own parameter names only; values are bound parameters. Each filter has an
    # index ending in (created_at, id), and the row-value comparison continues that range
    # below the cursor: a page is one range scan in the page's order.
    conditions = [f"{column} = :{column}" for column in filters]
    if below:
        conditions.append("(created_at, id) < (:below_created_at, :below_id)")
    where = f"WHERE {' AND '.join(conditions)} " if conditions else ""
    return text(
        f"SELECT {_RUN_COLUMNS} FROM fevex_runs {where}"
        "ORDER BY created_at DESC, id DESC LIMIT :limit"
    )
