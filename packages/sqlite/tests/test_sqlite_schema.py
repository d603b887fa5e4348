"""The file, its schema version and its migrations, created and applied on open."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from fevex import FevexConfigurationError, FevexError
from fevex_sqlite import SQLiteRunStore, create_sqlite_run_store, open_sqlite_store
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
    assert store.schema_version == LATEST_VERSION == 6
    assert tables(database) == {
        "fevex_schema_migrations",
        "fevex_runs",
        "fevex_sessions",
        "fevex_events",
        "fevex_records",
        "fevex_session_turns",
        "fevex_runs_by_session",
        "fevex_runs_running_by_lease",
        "fevex_events_by_run_sequence",
        "fevex_runs_by_created",
        "fevex_runs_by_status",
        "fevex_runs_by_kind",
        "fevex_runs_by_name",
        "fevex_runs_by_parent",
        "fevex_runs_running_by_name",
        "fevex_runs_paused_by_wake",
    }
    assert rows(database, "SELECT version, name FROM fevex_schema_migrations") == [
        (1, "runs, sessions and events"),
        (2, "run name, version, tree and context; cancel requests; indexes that list runs"),
        (3, "wake-ups of paused runs; claims by run name"),
        (4, "tables and indexes prefixed fevex_"),
        (5, "records replaced whole by compare-and-swap"),
        (6, "session histories one row per turn"),
    ]
    assert rows(database, "PRAGMA journal_mode") == [("wal",)]


async def test_reopening_keeps_data_and_migrates_nothing_again(database: Path) -> None:
    for _ in range(3):
        await SQLiteRunStore(database).close()
    with closing(sqlite3.connect(database)) as raw, raw:
        raw.execute(
            "INSERT INTO fevex_sessions (id, revision, created_at, updated_at) "
            "VALUES ('ses-1', 1, 't', 't')"
        )
    store = SQLiteRunStore(database)
    try:
        session = await store.get_session("ses-1")
        assert session is not None
        assert session.revision == 1
    finally:
        await store.close()
    assert rows(database, "SELECT version FROM fevex_schema_migrations") == [
        (1,),
        (2,),
        (3,),
        (4,),
        (5,),
        (6,),
    ]


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
            "INSERT INTO fevex_sessions (id, revision, created_at, updated_at) "
            "VALUES ('ses-1', 1, 't', 't')"
        )
    later = LATEST_VERSION + 1
    titles = Migration(
        later, "session titles", ("ALTER TABLE fevex_sessions ADD COLUMN title TEXT",)
    )
    assert prepare_database(database, busy_timeout=1.0, migrations=(*MIGRATIONS, titles)) == later
    assert rows(database, "SELECT id, title FROM fevex_sessions") == [("ses-1", None)]
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


def test_an_upgrade_the_sqlite_library_cannot_run_is_refused_untouched(
    database: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 6 drops a column (SQLite 3.35): on an older library (Ubuntu 20.04 has 3.31)
    the upgrade stops before its first statement, with a code of its own."""
    prepare_database(database, busy_timeout=1.0, migrations=MIGRATIONS[:5])
    with closing(sqlite3.connect(database)) as raw, raw:
        raw.execute(
            "INSERT INTO fevex_sessions (id, history, revision, created_at, updated_at) "
            """VALUES ('ses-1', '[{"role": "user", "content": "hi"}]', 1, 't', 't')"""
        )
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 31, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.31.1")
    with pytest.raises(FevexConfigurationError) as refused:
        prepare_database(database, busy_timeout=1.0)
    assert refused.value.code == "STORE_SQLITE_TOO_OLD"
    assert refused.value.details == {
        "path": str(database),
        "sqlite": "3.31.1",
        "needed": "3.35.0",
        "migration": 6,
    }
    assert "fevex_session_turns" not in tables(database)
    assert rows(database, "SELECT MAX(version) FROM fevex_schema_migrations") == [(5,)]
    assert rows(database, "SELECT id, history FROM fevex_sessions") == [
        ("ses-1", '[{"role": "user", "content": "hi"}]')
    ]
    # A new file needs no migration's statements: it opens on the same library.
    fresh = database.with_name("fresh.db")
    assert prepare_database(fresh, busy_timeout=1.0) == LATEST_VERSION
    # The library that can run it upgrades the untouched file.
    monkeypatch.undo()
    assert prepare_database(database, busy_timeout=1.0) == LATEST_VERSION
    assert rows(database, "SELECT session_id, position FROM fevex_session_turns") == [("ses-1", 0)]


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


def structure(database: Path) -> dict[str, object]:
    """Each table's columns, keys and indexes as SQLite reports them, which is what the
    store relies on; not the CREATE text, which ALTER TABLE rewrites differently."""
    found: dict[str, object] = {}
    for (table,) in rows(database, "SELECT name FROM sqlite_master WHERE type = 'table'"):
        indexes = {}
        for index in rows(database, f"PRAGMA index_list({table})"):
            name = str(index[1])
            columns = [column[2] for column in rows(database, f"PRAGMA index_info({name})")]
            (where,) = rows(database, f"SELECT sql FROM sqlite_master WHERE name = '{name}'")[0]
            partial = None if where is None else str(where).partition(" WHERE ")[2] or None
            indexes[name] = (index[2], columns, partial)
        found[str(table)] = (
            rows(database, f"PRAGMA table_info({table})"),
            rows(database, f"PRAGMA foreign_key_list({table})"),
            indexes,
        )
    return found


def test_a_new_file_gets_the_schema_the_migrations_build(tmp_path: Path) -> None:
    """A new file is created from CURRENT_SCHEMA at once; a file of version 1 reaches the
    same schema through every migration."""
    new = tmp_path / "new.db"
    migrated = tmp_path / "migrated.db"
    assert prepare_database(new, busy_timeout=1.0) == LATEST_VERSION
    assert prepare_database(migrated, busy_timeout=1.0, migrations=MIGRATIONS[:1]) == 1
    assert prepare_database(migrated, busy_timeout=1.0) == LATEST_VERSION
    expected = structure(migrated)
    assert set(expected) == {
        "fevex_schema_migrations",
        "fevex_runs",
        "fevex_sessions",
        "fevex_events",
        "fevex_records",
        "fevex_session_turns",
    }
    assert structure(new) == expected
    assert rows(new, "SELECT version, name FROM fevex_schema_migrations") == rows(
        migrated, "SELECT version, name FROM fevex_schema_migrations"
    )


async def test_a_file_shared_with_an_application_keeps_its_tables(database: Path) -> None:
    """An application's own runs, sessions and events tables in the same file are neither
    touched nor in the way."""
    database.parent.mkdir(parents=True)
    with closing(sqlite3.connect(database)) as raw, raw:
        for table in ("runs", "sessions", "events"):
            raw.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, note TEXT)")
            raw.execute(f"INSERT INTO {table} (note) VALUES ('the app''s own {table}')")
        raw.execute("CREATE INDEX runs_by_created ON runs (note)")
    store = SQLiteRunStore(database)
    try:
        assert store.schema_version == LATEST_VERSION
        assert await store.list_runs() == []
    finally:
        await store.close()
    for table in ("runs", "sessions", "events"):
        assert rows(database, f"SELECT note FROM {table}") == [(f"the app's own {table}",)]
    assert "fevex_runs_by_created" in tables(database)
    assert "runs_by_created" in tables(database)


async def test_create_false_refuses_a_missing_file_and_creates_nothing(database: Path) -> None:
    for opening in (
        lambda: SQLiteRunStore(database, create=False),
        lambda: create_sqlite_run_store(f"sqlite:///{database}?create=false"),
        lambda: open_sqlite_store(f"sqlite:///{database}", create=False),
    ):
        with pytest.raises(FevexConfigurationError) as raised:
            opening()
        assert raised.value.code == "STORE_NOT_FOUND"
        assert str(database) in raised.value.message
        assert raised.value.details == {"path": str(database)}
        assert not database.parent.exists()
    # The argument overrides the URL, and a file that exists opens either way.
    await SQLiteRunStore(f"sqlite:///{database}?create=false", create=True).close()
    store = SQLiteRunStore(f"sqlite:///{database}?create=0&busy_timeout=2")
    assert store.busy_timeout == 2.0
    await store.close()
    await SQLiteRunStore(database, create=False).close()


def test_the_url_create_option_must_be_a_boolean() -> None:
    assert parse_location("sqlite:///runs.db?create=false").create is False
    assert parse_location("sqlite:///runs.db?create=TRUE").create is True
    assert parse_location("sqlite:///runs.db").create is None
    with pytest.raises(FevexConfigurationError) as raised:
        parse_location("sqlite:///runs.db?create=maybe")
    assert raised.value.code == "INVALID_CONFIG"
    assert "create must be true or false" in raised.value.message
