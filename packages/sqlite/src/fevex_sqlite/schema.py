"""The database schema and the migrations that build it, applied whenever a store opens.

The file records every migration it received in ``fevex_schema_migrations``; its schema
version is the highest one. Opening a store reads that version first, a plain read that
takes no lock and waits for no writer: a current file is opened as it is, so a process
creates its app while another holds a write transaction on the file. Only a file that
lacks migrations is migrated, all of them in one ``BEGIN IMMEDIATE`` transaction that
reads the version again under the write lock: two processes opening an old (or new) file
at once migrate it exactly once, and a failed migration leaves the file at its previous
version. A file with a version this code does not know was written by a newer
fevex-sqlite and is refused rather than guessed at.

A new file (no schema version yet) gets ``CURRENT_SCHEMA``, the schema the migrations
build, in one go: replaying migration 1 would create unprefixed tables that may collide
with an application's own in a shared file.

To change the schema, append ``Migration(7, ...)`` to ``MIGRATIONS`` and change
``CURRENT_SCHEMA`` to match; never edit a migration that has been released, since files in
the field already ran it.

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

from fevex_sqlite.errors import (
    is_busy,
    schema_too_new,
    sqlite_too_old,
    store_busy,
    store_not_found,
    unusable_file,
)

__all__ = [
    "CURRENT_SCHEMA",
    "LATEST_VERSION",
    "MIGRATIONS",
    "Migration",
    "SchemaUpgrade",
    "prepare_database",
    "schema_version",
    "upgrade_database",
]


@dataclass(frozen=True, slots=True)
class Migration:
    """The statements that move a file from ``version - 1`` to ``version``."""

    version: int
    name: str
    statements: tuple[str, ...]
    # The oldest SQLite library its statements run on, when they use a late addition;
    # checked before any pending migration runs, so an older one leaves the file as it was.
    needs_sqlite: tuple[int, int, int] | None = None


_CREATE_SESSION_TURNS = """
CREATE TABLE fevex_session_turns (
    session_id TEXT NOT NULL REFERENCES fevex_sessions (id),
    position INTEGER NOT NULL,
    messages TEXT NOT NULL,
    PRIMARY KEY (session_id, position)
)
"""

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
    Migration(
        4,
        "tables and indexes prefixed fevex_",
        (
            # The unprefixed names collide with an application's own tables in a shared
            # file. SQLite (3.26 and later) rewrites the foreign keys of the other tables
            # and the indexes' definitions with a renamed table; an index keeps its name,
            # and SQLite cannot rename one, so each is rebuilt under its new name.
            "ALTER TABLE runs RENAME TO fevex_runs",
            "ALTER TABLE sessions RENAME TO fevex_sessions",
            "ALTER TABLE events RENAME TO fevex_events",
            "DROP INDEX events_by_run_sequence",
            "CREATE UNIQUE INDEX fevex_events_by_run_sequence ON fevex_events (run_id, sequence)",
            "DROP INDEX runs_by_created",
            "CREATE INDEX fevex_runs_by_created ON fevex_runs (created_at, id)",
            "DROP INDEX runs_by_status",
            "CREATE INDEX fevex_runs_by_status ON fevex_runs (status, created_at, id)",
            "DROP INDEX runs_by_kind",
            "CREATE INDEX fevex_runs_by_kind ON fevex_runs (kind, created_at, id)",
            "DROP INDEX runs_by_name",
            "CREATE INDEX fevex_runs_by_name ON fevex_runs (name, created_at, id)",
            "DROP INDEX runs_by_session",
            "CREATE INDEX fevex_runs_by_session ON fevex_runs (session_id, created_at, id)",
            "DROP INDEX runs_by_parent",
            "CREATE INDEX fevex_runs_by_parent ON fevex_runs (parent_run_id, created_at, id) "
            "WHERE parent_run_id IS NOT NULL",
            "DROP INDEX runs_running_by_lease",
            "CREATE INDEX fevex_runs_running_by_lease "
            "ON fevex_runs (status, lease_expires_at, id) WHERE status = 'running'",
            "DROP INDEX runs_running_by_name",
            "CREATE INDEX fevex_runs_running_by_name "
            "ON fevex_runs (status, name, lease_expires_at, id) WHERE status = 'running'",
            "DROP INDEX runs_paused_by_wake",
            "CREATE INDEX fevex_runs_paused_by_wake ON fevex_runs (status, wake_at, id) "
            "WHERE status = 'paused' AND wake_at IS NOT NULL",
        ),
    ),
    Migration(
        5,
        "records replaced whole by compare-and-swap",
        (
            # One JSON document per namespace and key (json.dumps text, read back with
            # json.loads only), at the revision its last swap gave it: see record_store.py.
            """
            CREATE TABLE fevex_records (
                namespace TEXT NOT NULL,
                key TEXT NOT NULL,
                revision INTEGER NOT NULL,
                value TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                PRIMARY KEY (namespace, key)
            )
            """,
        ),
    ),
    Migration(
        6,
        "session histories one row per turn",
        (
            # A history in one TEXT column made every write of the session row (reserving
            # it, ending a turn) rewrite the whole history: its overflow pages and their
            # WAL frames. Each appended batch of messages is now a row of its own, keyed by
            # its position in the session; an existing history becomes the batch at 0.
            _CREATE_SESSION_TURNS,
            "INSERT INTO fevex_session_turns (session_id, position, messages) "
            "SELECT id, 0, history FROM fevex_sessions WHERE json_array_length(history) > 0",
            "ALTER TABLE fevex_sessions DROP COLUMN history",
        ),
        # ALTER TABLE ... DROP COLUMN.
        needs_sqlite=(3, 35, 0),
    ),
)
LATEST_VERSION = MIGRATIONS[-1].version

# What MIGRATIONS build, written as of LATEST_VERSION: a new file gets this schema at once
# rather than by replaying them, since migration 1 creates the unprefixed tables that
# collide with an application's own ``runs``, ``sessions`` or ``events`` in a shared file.
# Columns are in the order the migrations add them; test_sqlite_schema.py checks that both
# ways give the same tables, columns, keys and indexes. When a migration is appended, change
# this schema to match.
CURRENT_SCHEMA: tuple[str, ...] = (
    """
    CREATE TABLE fevex_sessions (
        id TEXT PRIMARY KEY,
        summary TEXT,
        active_run_id TEXT REFERENCES fevex_runs (id) DEFERRABLE INITIALLY DEFERRED,
        revision INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE fevex_runs (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES fevex_sessions (id),
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
        lease_expires_at REAL NOT NULL,
        name TEXT NOT NULL DEFAULT '',
        version TEXT,
        parent_run_id TEXT,
        root_run_id TEXT NOT NULL DEFAULT '',
        context TEXT NOT NULL DEFAULT 'null',
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        wake_at REAL
    )
    """,
    """
    CREATE TABLE fevex_events (
        id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES fevex_runs (id),
        sequence INTEGER NOT NULL,
        type TEXT NOT NULL,
        occurred_at TEXT NOT NULL,
        payload TEXT NOT NULL
    )
    """,
    "CREATE UNIQUE INDEX fevex_events_by_run_sequence ON fevex_events (run_id, sequence)",
    "CREATE INDEX fevex_runs_by_created ON fevex_runs (created_at, id)",
    "CREATE INDEX fevex_runs_by_status ON fevex_runs (status, created_at, id)",
    "CREATE INDEX fevex_runs_by_kind ON fevex_runs (kind, created_at, id)",
    "CREATE INDEX fevex_runs_by_name ON fevex_runs (name, created_at, id)",
    "CREATE INDEX fevex_runs_by_session ON fevex_runs (session_id, created_at, id)",
    "CREATE INDEX fevex_runs_by_parent ON fevex_runs (parent_run_id, created_at, id) "
    "WHERE parent_run_id IS NOT NULL",
    "CREATE INDEX fevex_runs_running_by_lease ON fevex_runs (status, lease_expires_at, id) "
    "WHERE status = 'running'",
    "CREATE INDEX fevex_runs_running_by_name "
    "ON fevex_runs (status, name, lease_expires_at, id) WHERE status = 'running'",
    "CREATE INDEX fevex_runs_paused_by_wake ON fevex_runs (status, wake_at, id) "
    "WHERE status = 'paused' AND wake_at IS NOT NULL",
    """
    CREATE TABLE fevex_records (
        namespace TEXT NOT NULL,
        key TEXT NOT NULL,
        revision INTEGER NOT NULL,
        value TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (namespace, key)
    )
    """,
    _CREATE_SESSION_TURNS,
)

_CREATE_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS fevex_schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL
)
"""


@dataclass(frozen=True, slots=True)
class SchemaUpgrade:
    """What :func:`prepare_database` did: the version it found (0 for a new file), the one
    the file has now, and the migrations it applied."""

    previous_version: int
    version: int
    applied: tuple[int, ...]


def prepare_database(
    path: Path,
    *,
    busy_timeout: float,
    migrations: Sequence[Migration] = MIGRATIONS,
    create: bool = True,
) -> int:
    """Create the file and its directory if needed (unless ``create`` is false: then a
    missing file is ``STORE_NOT_FOUND``), switch it to WAL and bring its schema to the
    last of ``migrations``; returns the file's schema version."""
    return upgrade_database(
        path, busy_timeout=busy_timeout, migrations=migrations, create=create
    ).version


def upgrade_database(
    path: Path,
    *,
    busy_timeout: float,
    migrations: Sequence[Migration] = MIGRATIONS,
    create: bool = True,
) -> SchemaUpgrade:
    """:func:`prepare_database`, telling what it did."""
    _check_sequence(migrations)
    if not create and not path.exists():
        raise store_not_found(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise unusable_file(path, f"its directory cannot be created ({error})") from error
    try:
        with closing(_connect(path, busy_timeout)) as connection:
            _use_wal(connection, busy_timeout)
            current = _read_version(connection)
            latest = migrations[-1].version
            if current > latest:
                raise schema_too_new(path, current, latest)
            if current == latest:
                return SchemaUpgrade(current, current, ())
            connection.execute("BEGIN IMMEDIATE")
            try:
                done = _migrate(connection, path, migrations)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
            return done
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
    """The schema version recorded in an existing file (0 when it has none); a missing
    file is ``STORE_NOT_FOUND`` and is not created."""
    if not path.exists():
        raise store_not_found(path)
    try:
        with closing(sqlite3.connect(path, isolation_level=None)) as connection:
            return _read_version(connection)
    except sqlite3.DatabaseError as error:
        raise unusable_file(path, str(error)) from error


def _connect(path: Path, busy_timeout: float) -> sqlite3.Connection:
    # isolation_level=None: the module issues no BEGIN of its own; ours are explicit.
    connection = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
    connection.execute(f"PRAGMA busy_timeout = {round(busy_timeout * 1000)}")
    return connection


def _migrate(
    connection: sqlite3.Connection, path: Path, migrations: Sequence[Migration]
) -> SchemaUpgrade:
    connection.execute(_CREATE_VERSION_TABLE)
    current = _current_version(connection)
    latest = migrations[-1].version
    if current > latest:
        raise schema_too_new(path, current, latest)
    pending = migrations[current:]
    if current == 0 and tuple(migrations[:LATEST_VERSION]) == MIGRATIONS:
        # A new file: the current schema at once, recorded as the migrations it stands for.
        for statement in CURRENT_SCHEMA:
            connection.execute(statement)
        for migration in MIGRATIONS:
            _record(connection, migration)
        pending = migrations[LATEST_VERSION:]
    for migration in pending:
        _check_library(path, migration)
    for migration in pending:
        for statement in migration.statements:
            connection.execute(statement)
        _record(connection, migration)
    applied = tuple(migration.version for migration in migrations[current:])
    return SchemaUpgrade(current, latest, applied)


def _check_library(path: Path, migration: Migration) -> None:
    """Refuse, before anything changes, a migration this process's SQLite cannot run."""
    needed = migration.needs_sqlite
    if needed is not None and sqlite3.sqlite_version_info < needed:
        raise sqlite_too_old(path, sqlite3.sqlite_version, needed, migration.version)


def _record(connection: sqlite3.Connection, migration: Migration) -> None:
    connection.execute(
        "INSERT INTO fevex_schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
        (migration.version, migration.name, datetime.now(UTC).isoformat()),
    )


def _read_version(connection: sqlite3.Connection) -> int:
    """The file's schema version (0 for a file without one) by plain reads, outside any
    transaction of ours: in WAL mode they wait for no writer."""
    if not _has_version_table(connection):
        return 0
    return _current_version(connection)


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
