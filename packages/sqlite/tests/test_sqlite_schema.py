"""The file, its schema version and its migrations, created and applied on open."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from fevex import FevexConfigurationError, FevexError
from fevex_sqlite import SQLiteRunStore
from fevex_sqlite.location import parse_location
from fevex_sqlite.schema import LATEST_VERSION, MIGRATIONS, Migration, prepare_database

pytestmark = pytest.mark.anyio


def rows(database: Path, query: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(database)) as raw:
        return raw.execute(query).fetchall()


def tables(database: Path) -> set[str]:
    found = rows(database, "SELECT name FROM sqlite_master WHERE type IN ('table', 'index')")
    return {str(name) for (name,) in found if not str(name).startswith("sqlite_")}


async def test_opening_creates_the_directory_file_and_schema_in_wal_mode(database: Path) -> None:
    assert not database.parent.exists()
    store = SQLiteRunStore(database)
    await store.close()
    assert store.schema_version == LATEST_VERSION == 3
    assert tables(database) == {
        "fevex_schema_migrations",
        "runs",
        "sessions",
        "events",
        "runs_by_session",
        "runs_running_by_lease",
        "events_by_run_sequence",
        "runs_by_created",
        "runs_by_status",
        "runs_by_kind",
        "runs_by_name",
        "runs_by_parent",
        "runs_running_by_name",
        "runs_paused_by_wake",
    }
    assert rows(database, "SELECT version, name FROM fevex_schema_migrations") == [
        (1, "runs, sessions and events"),
        (2, "run name, version, tree and context; cancel requests; indexes that list runs"),
        (3, "wake-ups of paused runs; claims by run name"),
    ]
    assert rows(database, "PRAGMA journal_mode") == [("wal",)]


async def test_reopening_keeps_data_and_migrates_nothing_again(database: Path) -> None:
    for _ in range(3):
        await SQLiteRunStore(database).close()
    with closing(sqlite3.connect(database)) as raw, raw:
        raw.execute(
            "INSERT INTO sessions (id, history, revision, created_at, updated_at) "
            "VALUES ('ses-1', '[]', 1, 't', 't')"
        )
    store = SQLiteRunStore(database)
    try:
        session = await store.get_session("ses-1")
        assert session is not None
        assert session.revision == 1
    finally:
        await store.close()
    assert rows(database, "SELECT version FROM fevex_schema_migrations") == [(1,), (2,), (3,)]


async def test_a_file_from_a_newer_fevex_sqlite_is_refused_untouched(database: Path) -> None:
    await SQLiteRunStore(database).close()
    with closing(sqlite3.connect(database)) as raw, raw:
        raw.execute(
            "INSERT INTO fevex_schema_migrations VALUES (?, 'from the future', 't')",
            (LATEST_VERSION + 1,),
        )
    with pytest.raises(FevexConfigurationError) as raised:
        SQLiteRunStore(database)
    assert raised.value.code == "STORE_SCHEMA_TOO_NEW"
    assert raised.value.details["found"] == LATEST_VERSION + 1
    assert raised.value.details["known"] == LATEST_VERSION
    assert rows(database, "SELECT MAX(version) FROM fevex_schema_migrations") == [
        (LATEST_VERSION + 1,)
    ]


def test_a_later_migration_upgrades_a_file(database: Path) -> None:
    prepare_database(database, busy_timeout=1.0)
    with closing(sqlite3.connect(database)) as raw, raw:
        raw.execute(
            "INSERT INTO sessions (id, history, revision, created_at, updated_at) "
            "VALUES ('ses-1', '[]', 1, 't', 't')"
        )
    later = LATEST_VERSION + 1
    titles = Migration(later, "session titles", ("ALTER TABLE sessions ADD COLUMN title TEXT",))
    assert prepare_database(database, busy_timeout=1.0, migrations=(*MIGRATIONS, titles)) == later
    assert rows(database, "SELECT id, title FROM sessions") == [("ses-1", None)]
    assert rows(database, "SELECT version FROM fevex_schema_migrations") == [
        (version,) for version in range(1, later + 1)
    ]
    # Applied once: opening again with the same migrations changes nothing.
    assert prepare_database(database, busy_timeout=1.0, migrations=(*MIGRATIONS, titles)) == later


def test_a_failing_migration_leaves_the_file_at_its_version(database: Path) -> None:
    prepare_database(database, busy_timeout=1.0)
    broken = Migration(
        LATEST_VERSION + 1,
        "half done",
        ("CREATE TABLE notes (id TEXT)", "ALTER TABLE missing ADD COLUMN x"),
    )
    with pytest.raises(FevexError):
        prepare_database(database, busy_timeout=1.0, migrations=(*MIGRATIONS, broken))
    assert "notes" not in tables(database)
    assert rows(database, "SELECT MAX(version) FROM fevex_schema_migrations") == [(LATEST_VERSION,)]


def test_migrations_must_be_numbered_in_order(database: Path) -> None:
    skipped = Migration(LATEST_VERSION + 2, "skips one", ())
    with pytest.raises(ValueError, match="numbered"):
        prepare_database(database, busy_timeout=1.0, migrations=(*MIGRATIONS, skipped))


def test_a_file_that_is_not_a_database_is_a_configuration_error(tmp_path: Path) -> None:
    not_a_database = tmp_path / "notes.txt"
    not_a_database.write_text("hello " * 1000)
    with pytest.raises(FevexConfigurationError) as raised:
        SQLiteRunStore(not_a_database)
    assert raised.value.code == "INVALID_CONFIG"
    assert str(not_a_database) in raised.value.message


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("sqlite:///runs.db", "{cwd}/runs.db"),
        ("sqlite:///.fevex/runs.db", "{cwd}/.fevex/runs.db"),
        ("sqlite:////var/lib/app/runs.db", "/var/lib/app/runs.db"),
        ("sqlite+aiosqlite:////var/lib/app/runs.db", "/var/lib/app/runs.db"),
        ("SQLite:///runs.db", "{cwd}/runs.db"),
        ("runs.db", "{cwd}/runs.db"),
        ("/var/lib/app/runs.db", "/var/lib/app/runs.db"),
    ],
)
def test_urls_and_paths_name_a_file(location: str, expected: str) -> None:
    parsed = parse_location(location)
    assert parsed.path == Path(expected.format(cwd=Path.cwd()))
    assert parsed.busy_timeout is None


def test_a_url_may_set_busy_timeout() -> None:
    assert parse_location("sqlite:///runs.db?busy_timeout=2.5").busy_timeout == 2.5


@pytest.mark.parametrize(
    "location",
    [
        "sqlite://",
        "sqlite:///",
        "sqlite:///:memory:",
        "sqlite://host/runs.db",
        "sqlite:runs.db",
        "postgresql://host/db",
        "sqlite:///runs.db?mode=ro",
        "sqlite:///runs.db?busy_timeout=soon",
        "sqlite:///runs.db?busy_timeout=-1",
        "",
    ],
)
def test_unusable_locations_are_refused(location: str) -> None:
    with pytest.raises(FevexConfigurationError) as raised:
        parse_location(location)
    assert raised.value.code == "INVALID_CONFIG"


def test_busy_timeout_must_be_seconds(database: Path) -> None:
    with pytest.raises(FevexConfigurationError):
        SQLiteRunStore(database, busy_timeout=-1)
