"""The tables as the store's queries see them, at the latest schema version.

``migrations.py`` creates and changes them; these definitions only describe them to
SQLAlchemy and never create anything. Timestamps stay the ISO 8601 text the runtime wrote,
so that a snapshot reads back exactly as it was stored; lease expiry and a paused run's
wake-up are numbers of seconds since the epoch, compared with the database's own clock.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Integer,
    MetaData,
    Table,
    Text,
    extract,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.sql.elements import ColumnElement

from fevex.runtime import ended_statuses

__all__ = ["ENDED_SQL", "NOW_SQL", "database_now", "events", "metadata", "runs", "sessions"]

metadata = MetaData()

# SQL NULL for Python None: a missing output is not the JSON value null.
_Json = JSONB(none_as_null=True)

sessions = Table(
    "fevex_sessions",
    metadata,
    Column("id", Text, primary_key=True),
    Column("history", _Json, nullable=False),
    Column("summary", Text),
    Column("active_run_id", Text),
    Column("revision", BigInteger, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
)

runs = Table(
    "fevex_runs",
    metadata,
    Column("id", Text, primary_key=True),
    Column("session_id", Text, nullable=False),
    Column("agent_name", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("input", _Json),
    Column("output", _Json),
    Column("usage", _Json),
    Column("error", _Json),
    Column("pause", _Json),
    Column("revision", BigInteger, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
    Column("checkpoint", _Json),
    Column("last_sequence", Integer, nullable=False),
    Column("lease_owner", Text, nullable=False),
    Column("lease_generation", BigInteger, nullable=False),
    Column("lease_expires_at", Float(precision=53), nullable=False),
    Column("name", Text, nullable=False),
    Column("version", Text),
    Column("parent_run_id", Text),
    Column("root_run_id", Text, nullable=False),
    Column("context", _Json),
    Column("cancel_requested", Boolean, nullable=False),
    Column("wake_at", Float(precision=53)),
    Column("followed_until", Float(precision=53)),
)

events = Table(
    "fevex_events",
    metadata,
    Column("id", Text, primary_key=True),
    Column("run_id", Text, nullable=False),
    Column("sequence", Integer, nullable=False),
    Column("type", Text, nullable=False),
    Column("occurred_at", Text, nullable=False),
    Column("payload", _Json, nullable=False),
)


# database_now() as SQL text, for the statements written out in full.
NOW_SQL = "extract(epoch FROM clock_timestamp())::double precision"
# The statuses of an ended run as a SQL list, for ``status NOT IN (...)``.
ENDED_SQL = ", ".join(f"'{status}'" for status in ended_statuses())


def database_now() -> ColumnElement[float]:
    """Seconds since the epoch by the database server's clock, read when evaluated.

    Every worker compares leases with this one clock, so workers whose own clocks disagree
    still agree on which lease is live. ``clock_timestamp()`` rather than ``now()``: a
    transaction's start time would make a long transaction see time stand still.
    """
    return extract("epoch", func.clock_timestamp()).cast(Float(precision=53))
