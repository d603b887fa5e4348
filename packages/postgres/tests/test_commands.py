"""``fevex db`` hands each URL to the plugin of its scheme: fevex-postgres answers for
``postgresql://`` and ``postgres://`` only."""

from __future__ import annotations

import pytest

from fevex.cli import build_parser, main


def test_fevex_db_refuses_a_scheme_no_plugin_manages(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "upgrade", "--store", "memory://"]) == 1
    error = capsys.readouterr().err
    assert "INVALID_ARGUMENT" in error
    assert "postgresql" in error
    assert main(["db", "status", "--store", "postgress://localhost/db"]) == 1
    assert "Did you mean 'postgres'?" in capsys.readouterr().err


def test_the_db_command_serves_the_postgres_schemes() -> None:
    parser = build_parser()
    served = parser.parse_args(["db", "status", "--store", "postgres://localhost/db"])
    assert {"postgresql", "postgres"} <= set(served.store_commands)
