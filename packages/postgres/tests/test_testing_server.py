"""``fevex_postgres.testing.postgres_server``: a real server that leaves nothing behind."""

from __future__ import annotations

import tempfile
from pathlib import Path

import psycopg
import pytest

from fevex_postgres.testing import PostgresNotAvailable, find_postgres_bin, postgres_server


def test_the_server_serves_its_database_and_is_removed_on_exit() -> None:
    try:
        find_postgres_bin()
    except PostgresNotAvailable as error:
        pytest.skip(str(error))
    before = set(Path(tempfile.gettempdir()).glob("fevex-pg-*"))
    with postgres_server(database="scratch") as url:
        assert url.startswith("postgresql+psycopg://postgres@127.0.0.1:")
        assert url.endswith("/scratch")
        with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as connection:
            row = connection.execute("SELECT current_database()").fetchone()
            data = connection.execute("SHOW data_directory").fetchone()
        assert row == ("scratch",)
        assert data is not None
        # The server's own folder, new since the test began (other suite workers' servers
        # come and go beside it in the same temporary folder).
        folder = Path(data[0]).parent
        assert folder in set(Path(tempfile.gettempdir()).glob("fevex-pg-*")) - before
    assert not folder.exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url.replace("postgresql+psycopg", "postgresql"), connect_timeout=2)


def test_missing_programs_are_named(tmp_path: Path) -> None:
    (tmp_path / "initdb").touch()
    with pytest.raises(PostgresNotAvailable) as raised, postgres_server(bin_dir=tmp_path):
        pass
    assert "programs pg_ctl, postgres, createdb not found" in str(raised.value)
