"""The database schema and the migrations that build it, applied whenever a store opens.

The file records every migration it received in ``fevex_schema_migrations``; its schema
version is the highest one. Opening a store applies the missing migrations in order, all
in one ``BEGIN IMMEDIATE`` transaction: two processes opening an old file at once migrate
it exactly once, and a failed migration leaves the file at its previous version. A file
with a version this code does not know was written by a newer fevex-sqlite and is refused
rather than guessed at.

To change the schema, append ``Migration(4, ...)`` to ``MIGRATIONS``; never edit a
migration that has been released, since files in the field already ran it.

Opening uses the standard ``sqlite3`` module synchronously: store factories are plain
functions (``create_fevex`` calls them outside any event loop), and a store should be
ready, or fail with a clear error, as soon as it is opened.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from fevex_sqlite.errors import is_busy, schema_too_new, store_busy, unusable_file

__all__ = ["LATEST_VERSION", "MIGRATIONS", "Migration", "prepare_database", "schema_version"]


@dataclass(frozen=True, slots=True)
class Migration:
    """The statements that move a file from ``version - 1`` to ``version``."""

    version: int
    name: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "runs, sessions and events",
        (
            # JSON columns hold json.dumps text (``null`` included) and are read back with
            # json.loads only. The lease lives on the run row so that a commit checks it
            # in the same transaction that writes the step.
            """
            CREATE TABLE sessions (
                id TEXT PRIMARY KEY,
                history TEXT NOT NULL,
                summary TEXT,
                active_run_id TEXT REFERENCES runs (id) DEFERRABLE INITIALLY DEFERRED,
                revision INTEGER NOT NULL,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL
            )
            """,
            """
            CREATE TABLE runs (
                id TEXT PRIMARY KEY,
                session_id TEXT NOT NULL REFERENCES sessions (id),
                agent_name TEXT NOT NULL,
                kind TEXT NOT NULL,
                status TEXT NOT NULL,
                input TEXT NOT NULL,
                output TEXT NOT NULL,
                usage TEXT NOT NULL,
                error TEXT NOT NULL,
                pause TEXT NOT NULL,
                revision INTEGER NOT NULL,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                checkpoint TEXT NOT NULL,
                lease_owner TEXT NOT NULL,
                lease_generation INTEGER NOT NULL,
                lease_expires_at REAL NOT NULL
            )
            """,
            "CREATE INDEX runs_by_session ON runs (session_id)",
            # What claim_expired_run scans: only running runs, by lease expiry.
            "CREATE INDEX runs_running_by_lease ON runs (lease_expires_at) "
            "WHERE status = 'running'",
            """
            CREATE TABLE events (
                id TEXT PRIMARY KEY,
                run_id TEXT NOT NULL REFERENCES runs (id),
                sequence INTEGER NOT NULL,
                type TEXT NOT NULL,
                occurred_at TEXT NOT NULL,
                payload TEXT NOT NULL
            )
            """,
            # One event per run and sequence, and the index list_events pages through.
            "CREATE UNIQUE INDEX events_by_run_sequence ON events (run_id, sequence)",
        ),
    ),
    Migration(
        2,
        "run name, version, tree and context; cancel requests; indexes that list runs",
        (
            # ADD COLUMN needs a default for NOT NULL; every run written from now on sets
            # these columns, and the runs already stored get theirs just below: an agent
            # run's name is its agent, a run without a parent is its own root, and the
            # context (JSON text, like every JSON column) is null. No stored run has a
            # cancel request (0 or 1, read as a bool).
            "ALTER TABLE runs ADD COLUMN name TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE runs ADD COLUMN version TEXT",
            "ALTER TABLE runs ADD COLUMN parent_run_id TEXT",
            "ALTER TABLE runs ADD COLUMN root_run_id TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE runs ADD COLUMN context TEXT NOT NULL DEFAULT 'null'",
            "ALTER TABLE runs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0",
            "UPDATE runs SET name = agent_name, root_run_id = id",
            # list_runs pages newest first by (created_at, id): one index for no filter
            # and one per filter, each ending in the page order, so that a page is one
            # range scan whichever filter leads. The session index gains the order too.
            "CREATE INDEX runs_by_created ON runs (created_at, id)",
            "CREATE INDEX runs_by_status ON runs (status, created_at, id)",
            "CREATE INDEX runs_by_kind ON runs (kind, created_at, id)",
            "CREATE INDEX runs_by_name ON runs (name, created_at, id)",
            "DROP INDEX runs_by_session",
            "CREATE INDEX runs_by_session ON runs (session_id, created_at, id)",
            "CREATE INDEX runs_by_parent ON runs (parent_run_id, created_at, id) "
            "WHERE parent_run_id IS NOT NULL",
        ),
    ),
    Migration(
        3,
        "wake-ups of paused runs; claims by run name",
        (
            # Seconds since the epoch by the store's clock, or NULL: nothing wakes the run
            # but a caller. No stored run has one.
            "ALTER TABLE runs ADD COLUMN wake_at REAL",
            # The claims' indexes lead with the status their WHERE fixes: without that,
            # SQLite prefers runs_by_status (an equality) or runs_by_name to a partial
            # index read as a range, and a claim scans every running or paused run, or
            # every run of a name ever stored. With it, each claim is one range scan:
            # claim_due_run over due runs in wake_at order, claim_expired_run and
            # expired_run_ids over expired running runs, of the names asked for or of all.
            "DROP INDEX runs_running_by_lease",
            "CREATE INDEX runs_running_by_lease ON runs (status, lease_expires_at, id) "
            "WHERE status = 'running'",
            "CREATE INDEX runs_running_by_name ON runs (status, name, lease_expires_at, id) "
            "WHERE status = 'running'",
            "CREATE INDEX runs_paused_by_wake ON runs (status, wake_at, id) "
            "WHERE status = 'paused' AND wake_at IS NOT NULL",
        ),
    ),
)
LATEST_VERSION = MIGRATIONS[-1].version

_CREATE_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS fevex_schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL
)
"""


def prepare_database(
    path: Path, *, busy_timeout: float, migrations: Sequence[Migration] = MIGRATIONS
) -> int:
    """Create the file and its directory if needed, switch it to WAL and bring its schema
    to the last of ``migrations``; returns the file's schema version."""
    _check_sequence(migrations)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise unusable_file(path, f"its directory cannot be created ({error})") from error
    try:
        with closing(_connect(path, busy_timeout)) as connection:
            _use_wal(connection, busy_timeout)
            connection.execute("BEGIN IMMEDIATE")
            try:
                version = _migrate(connection, path, migrations)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
            return version
    except sqlite3.OperationalError as error:
        if is_busy(error):
            raise store_busy(path, busy_timeout) from error
        raise unusable_file(path, str(error)) from error
    except sqlite3.DatabaseError as error:
        raise unusable_file(path, str(error)) from error


def _use_wal(connection: sqlite3.Connection, busy_timeout: float) -> None:
    """Switch the file to WAL, a property of the file that every later connection uses.

    Switching needs the file to itself, and SQLite answers a concurrent opener's switch
    with an immediate SQLITE_BUSY rather than waiting in its busy handler, so several
    processes opening a new file at once retry here within ``busy_timeout``."""
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as error:
            if not is_busy(error) or time.monotonic() > deadline:
                raise
        else:
            if str(mode).lower() == "wal":
                return
            if time.monotonic() > deadline:
                raise sqlite3.OperationalError("database is locked")
        time.sleep(0.01)


def schema_version(path: Path) -> int:
    """The schema version recorded in an existing file (0 when it has none)."""
    with closing(sqlite3.connect(path, isolation_level=None)) as connection:
        if not _has_version_table(connection):
            return 0
        return _current_version(connection)


def _connect(path: Path, busy_timeout: float) -> sqlite3.Connection:
    # isolation_level=None: the module issues no BEGIN of its own; ours are explicit.
    connection = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
    connection.execute(f"PRAGMA busy_timeout = {round(busy_timeout * 1000)}")
    return connection


def _migrate(connection: sqlite3.Connection, path: Path, migrations: Sequence[Migration]) -> int:
    connection.execute(_CREATE_VERSION_TABLE)
    current = _current_version(connection)
    latest = migrations[-1].version
    if current > latest:
        raise schema_too_new(path, current, latest)
    for migration in migrations[current:]:
        for statement in migration.statements:
            connection.execute(statement)
        connection.execute(
            "INSERT INTO fevex_schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
            (migration.version, migration.name, datetime.now(UTC).isoformat()),
        )
    return latest


def _current_version(connection: sqlite3.Connection) -> int:
    row = connection.execute("SELECT COALESCE(MAX(version), 0) FROM fevex_schema_migrations")
    return int(row.fetchone()[0])


def _has_version_table(connection: sqlite3.Connection) -> bool:
    row = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'fevex_schema_migrations'"
    )
    return row.fetchone() is not None


def _check_sequence(migrations: Sequence[Migration]) -> None:
    versions = [migration.version for migration in migrations]
    if not versions or versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"migrations must be numbered 1, 2, 3, ... in order, not {versions}")
