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


def test_db_status_on_a_server_nobody_listens_on_says_it_cannot_be_reached() -> None:
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:  # a loopback port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {key: value for key, value in os.environ.items() if not key.startswith("FEVEX_")}
    completed = subprocess.run(
        [sys.executable, "-m", "fevex.cli", "db", "status",
         "--store", f"postgresql://fevex:secret@127.0.0.1:{port}/fevex"],
        env={**env, "PGCONNECT_TIMEOUT": "10"}, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert completed.returncode == 1
    assert completed.stdout == ""
    assert completed.stderr.count("\n") == 1
    assert completed.stderr.startswith("fevex: [STORE_UNAVAILABLE] PostgreSQL at ")
    assert "cannot be reached" in completed.stderr
    assert "Nothing was done" in completed.stderr
    assert "may or may not" not in completed.stderr
    assert "secret" not in completed.stderr
    assert "Traceback" not in completed.stderr
