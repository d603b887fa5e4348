"""A session's rows: the session row's small fields, and its history one row per turn.

The history is kept in ``fevex_session_turns``, one JSON array of messages per appended
batch at its position in the session, so that reserving a session or ending a turn writes
the session row's few fields and the turn's own messages, whatever the history's length
before. Reading a session reads the session row and then its turns in position order; the
store's snapshots (:mod:`fevex_sqlite.session_snapshots`) keep a turn from reading them
again while no other writer changed the session. Every function runs inside the caller's
transaction: a turn's rows and the session row commit together or not at all.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, Row

from fevex.runtime import ExecutionCommit, Session, check_session_saveable, session_not_found
from fevex_sqlite import statements as sql

__all__ = ["end_session_turn", "read_session", "replace_session"]


def read_session(db: Connection, session_id: str, known: Session | None) -> Session | None:
    """The stored session, ``known`` itself when the row still has its revision."""
    if known is not None:
        revision = db.execute(sql.SELECT_SESSION_REVISION, {"id": session_id}).scalar()
        if revision == known.revision:
            return known
    row = db.execute(sql.SELECT_SESSION, {"id": session_id}).one_or_none()
    if row is None:
        return None
    history: list[Any] = []
    for (messages,) in db.execute(sql.SELECT_SESSION_TURNS, {"id": session_id}):
        history.extend(json.loads(messages))
    return _session(row, tuple(history))


def replace_session(
    db: Connection, row: dict[str, Any], history: str, expected_revision: int
) -> None:
    """Replace the session's fields and its whole history (``history``, a JSON array)."""
    stored = db.execute(sql.SELECT_SESSION, {"id": row["id"]}).one_or_none()
    if stored is None:
        raise session_not_found(row["id"])
    check_session_saveable(row["id"], stored.active_run_id, int(stored.revision), expected_revision)
    db.execute(sql.REPLACE_SESSION, row)
    db.execute(sql.DELETE_SESSION_TURNS, {"id": row["id"]})
    if history != "[]":
        db.execute(sql.APPEND_SESSION_TURN, {"id": row["id"], "messages": history})


def end_session_turn(
    db: Connection, session_id: str, commit: ExecutionCommit, messages: str | None
) -> int:
    """End the turn: the session row's fields and, when the turn appended ``messages`` (a
    non-empty JSON array), one row of them; the revision it leaves the session at."""
    ended = db.execute(
        sql.END_SESSION_TURN,
        {"id": session_id, "release": commit.release_session, "updated_at": commit.updated_at},
    )
    if ended.rowcount != 1:
        raise session_not_found(session_id)
    if messages is not None:
        db.execute(sql.APPEND_SESSION_TURN, {"id": session_id, "messages": messages})
    return int(db.execute(sql.SELECT_SESSION_REVISION, {"id": session_id}).scalar_one())


def _session(row: Row[Any], history: tuple[Any, ...]) -> Session:
    return Session(
        id=row.id,
        created_at=row.created_at,
        updated_at=row.updated_at,
        history=history,
        summary=row.summary,
        active_run_id=row.active_run_id,
        revision=int(row.revision),
    )
