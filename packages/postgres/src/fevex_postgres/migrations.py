"""Explicit, versioned schema migrations.

A store never changes the schema by itself: ``fevex db upgrade --store URL`` (or
:meth:`PostgresRunStore.upgrade_schema`) applies the migrations a database lacks, in order,
in one transaction, and records each in ``fevex_schema_version``. A store refuses to work
on a database whose schema is missing or older than the code (``SCHEMA_OUTDATED``) or newer
than it (``SCHEMA_TOO_NEW``).

Migrations are history: once released, one is never edited; a change is a new migration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from fevex.errors import FevexConfigurationError

__all__ = [
    "LATEST_VERSION",
    "MIGRATIONS",
    "Migration",
    "SchemaUpgrade",
    "read_schema_version",
    "schema_version_of",
    "schema_outdated",
    "schema_too_new",
    "upgrade_schema",
]

VERSION_TABLE = "fevex_schema_version"
# Serializes concurrent upgrades of one database: pg_advisory_xact_lock key, "fevex" + 1.
_UPGRADE_LOCK_KEY = 0x6665766578_0001


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "sessions, runs with their checkpoint and lease, and events",
        (
            """
            CREATE TABLE fevex_sessions (
                id text PRIMARY KEY,
                history jsonb NOT NULL DEFAULT '[]'::jsonb,
                summary text,
                active_run_id text,
                revision bigint NOT NULL,
                created_at text NOT NULL,
                updated_at text NOT NULL
            )
            """,
            """
            CREATE TABLE fevex_runs (
                id text PRIMARY KEY,
                session_id text NOT NULL REFERENCES fevex_sessions (id),
                agent_name text NOT NULL,
                kind text NOT NULL,
                status text NOT NULL,
                input jsonb,
                output jsonb,
                usage jsonb,
                error jsonb,
                pause jsonb,
                revision bigint NOT NULL,
                created_at text NOT NULL,
                updated_at text NOT NULL,
                checkpoint jsonb,
                last_sequence integer NOT NULL DEFAULT 0,
                lease_owner text NOT NULL,
                lease_generation bigint NOT NULL,
                lease_expires_at double precision NOT NULL
            )
            """,
            "CREATE INDEX fevex_runs_session ON fevex_runs (session_id)",
            # Serves claim_expired_run: running runs whose lease expired, oldest first.
            "CREATE INDEX fevex_runs_claimable ON fevex_runs (status, lease_expires_at)",
            """
            CREATE TABLE fevex_events (
                id text PRIMARY KEY,
                run_id text NOT NULL REFERENCES fevex_runs (id) ON DELETE CASCADE,
                sequence integer NOT NULL,
                type text NOT NULL,
                occurred_at text NOT NULL,
                payload jsonb NOT NULL,
                -- Also the index that list_events reads pages from.
                CONSTRAINT fevex_events_run_sequence UNIQUE (run_id, sequence)
            )
            """,
        ),
    ),
    Migration(
        2,
        "run name, version, tree and context; cancel requests; indexes that list runs",
        (
            """
            ALTER TABLE fevex_runs
                ADD COLUMN name text,
                ADD COLUMN version text,
                ADD COLUMN parent_run_id text,
                ADD COLUMN root_run_id text,
                ADD COLUMN context jsonb,
                ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false
            """,
            # The runs already stored: an agent run's name is its agent, a run without a
            # parent is its own root; no version, no parent, no context (SQL NULL), no
            # cancel request.
            "UPDATE fevex_runs SET name = agent_name, root_run_id = id",
            "ALTER TABLE fevex_runs ALTER COLUMN name SET NOT NULL, "
            "ALTER COLUMN root_run_id SET NOT NULL",
            # list_runs pages newest first by (created_at, id) compared byte by byte
            # (COLLATE "C", whatever the database's collation), so that every store orders
            # alike: one index for no filter and one per filter, each ending in that
            # order, so that a page is one range scan whichever filter leads. The session
            # index gains the order too.
            'CREATE INDEX fevex_runs_created ON fevex_runs (created_at COLLATE "C", '
            'id COLLATE "C")',
            'CREATE INDEX fevex_runs_status_created ON fevex_runs (status, created_at COLLATE "C", '
            'id COLLATE "C")',
            'CREATE INDEX fevex_runs_kind_created ON fevex_runs (kind, created_at COLLATE "C", '
            'id COLLATE "C")',
            'CREATE INDEX fevex_runs_name_created ON fevex_runs (name, created_at COLLATE "C", '
            'id COLLATE "C")',
            "DROP INDEX fevex_runs_session",
            "CREATE INDEX fevex_runs_session_created ON fevex_runs (session_id, "
            'created_at COLLATE "C", id COLLATE "C")',
            "CREATE INDEX fevex_runs_parent_created ON fevex_runs (parent_run_id, "
            'created_at COLLATE "C", id COLLATE "C") WHERE parent_run_id IS NOT NULL',
        ),
    ),
    Migration(
        3,
        "wake-ups of paused runs; claims by run name",
        (
            # Seconds since the epoch by the database's clock, or NULL: nothing wakes the
            # run but a caller. No stored run has one.
            "ALTER TABLE fevex_runs ADD COLUMN wake_at double precision",
            # The claims read partial indexes of the runs they can take, in the order they
            # take them (ties by id byte by byte, as the other stores order them), one
            # range of each (per name asked for, with names) however many runs have ended
            # or belong to other names: claim_expired_run and expired_run_ids over the
            # running runs, oldest lease expiry first; claim_due_run over the paused runs
            # with a wake-up, earliest first. The claims write their status as a literal,
            # which implies these predicates also in a prepared statement's generic plan.
            "DROP INDEX fevex_runs_claimable",
            "CREATE INDEX fevex_runs_running_by_lease ON fevex_runs (lease_expires_at, "
            """id COLLATE "C") WHERE status = 'running'""",
            "CREATE INDEX fevex_runs_running_by_name ON fevex_runs (name, lease_expires_at, "
            """id COLLATE "C") WHERE status = 'running'""",
            'CREATE INDEX fevex_runs_due ON fevex_runs (wake_at, id COLLATE "C") '
            "WHERE status = 'paused' AND wake_at IS NOT NULL",
            'CREATE INDEX fevex_runs_due_by_name ON fevex_runs (name, wake_at, id COLLATE "C") '
            "WHERE status = 'paused' AND wake_at IS NOT NULL",
        ),
    ),
    Migration(
        4,
        "records replaced whole by compare-and-swap",
        (
            # One JSON document per namespace and key at the revision its last swap gave
            # it (see record_store.py); the primary key is the only index a read or a swap
            # needs. json, not jsonb: a record is read and written whole, never queried
            # inside, and json keeps its text exactly (jsonb would write -1.5e300 out as
            # digits, which read back as another number).
            """
            CREATE TABLE fevex_records (
                namespace text NOT NULL,
                key text NOT NULL,
                revision bigint NOT NULL,
                value json NOT NULL,
                updated_at text NOT NULL,
                PRIMARY KEY (namespace, key)
            )
            """,
        ),
    ),
    Migration(
        5,
        "commits notify only the runs someone follows",
        (
            # Seconds since the epoch by the database's clock until which a follower waits
            # for the run's commits (see notifications.py), or NULL: nobody follows it, and
            # its commits send no notification. Nullable, no default: no table rewrite.
            "ALTER TABLE fevex_runs ADD COLUMN followed_until double precision",
        ),
    ),
)
LATEST_VERSION = MIGRATIONS[-1].version


@dataclass(frozen=True, slots=True)
class SchemaUpgrade:
    """What an upgrade did: the version it found and the version it left."""

    previous_version: int
    version: int

    @property
    def applied(self) -> tuple[int, ...]:
        return tuple(range(self.previous_version + 1, self.version + 1))


async def read_schema_version(connection: AsyncConnection) -> int:
    """The schema version recorded in the database; 0 when fevex never migrated it."""
    exists = await connection.scalar(text(f"SELECT to_regclass('{VERSION_TABLE}') IS NOT NULL"))
    if not exists:
        return 0
    version = await connection.scalar(text(f"SELECT max(version) FROM {VERSION_TABLE}"))
    return int(version or 0)


async def schema_version_of(db: psycopg.AsyncConnection[Any]) -> int:
    """:func:`read_schema_version` on a psycopg connection in autocommit mode (what the
    store's check of the schema reads, on the pool its writes use)."""
    cursor = await db.execute(f"SELECT to_regclass('{VERSION_TABLE}') IS NOT NULL")
    exists = await cursor.fetchone()
    if not (exists and exists[0]):
        return 0
    cursor = await db.execute(f"SELECT max(version) FROM {VERSION_TABLE}")
    version = await cursor.fetchone()
    return int((version and version[0]) or 0)


async def upgrade_schema(connection: AsyncConnection, display_url: str) -> SchemaUpgrade:
    """Apply the missing migrations inside the caller's transaction; idempotent, and safe
    to run from several processes at once (they take turns on an advisory lock)."""
    # The store's session timeouts bound what a worker may hold; an upgrade is an operator's
    # explicit step that may wait for another upgrade and rebuild large tables.
    await connection.execute(text("SET LOCAL statement_timeout = 0"))
    await connection.execute(text("SET LOCAL lock_timeout = 0"))
    await connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _UPGRADE_LOCK_KEY})
    await connection.execute(
        text(
            f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} ("
            "version integer PRIMARY KEY, "
            "description text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
    )
    previous = await read_schema_version(connection)
    if previous > LATEST_VERSION:
        raise schema_too_new(display_url, previous)
    for migration in MIGRATIONS[previous:]:
        for statement in migration.statements:
            await connection.execute(text(statement))
        await connection.execute(
            text(f"INSERT INTO {VERSION_TABLE} (version, description) VALUES (:v, :d)"),
            {"v": migration.version, "d": migration.description},
        )
    return SchemaUpgrade(previous, LATEST_VERSION)


def upgrade_command(display_url: str) -> str:
    return f"fevex db upgrade --store {display_url}"


def schema_outdated(display_url: str, version: int) -> FevexConfigurationError:
    found = "has no fevex schema" if version == 0 else f"has fevex schema version {version}"
    return FevexConfigurationError(
        "SCHEMA_OUTDATED",
        f"The database {found}, and this fevex-postgres needs version {LATEST_VERSION}. "
        f"Migrate it before starting workers: {upgrade_command(display_url)}",
        category="store",
        details={"version": version, "required_version": LATEST_VERSION},
    )


def schema_too_new(display_url: str, version: int) -> FevexConfigurationError:
    return FevexConfigurationError(
        "SCHEMA_TOO_NEW",
        f"The database at {display_url} has fevex schema version {version}, newer than the "
        f"version {LATEST_VERSION} this fevex-postgres knows; upgrade fevex-postgres on this "
        "worker.",
        category="store",
        details={"version": version, "required_version": LATEST_VERSION},
    )
