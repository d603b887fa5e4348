"""A command's ``--store`` is the store it uses, or the command is refused: ``fevex worker``,
``recover`` and ``serve`` with an app that sets ``run_store=`` itself, as real processes on
SQLite files and a real PostgreSQL server, whose URLs carry a password no output may show."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

# The app sets its own store when SERVICE_RUN_STORE names one, else reads FEVEX_RUN_STORE.
APP = """
import os
from fevex import create_fevex, define_agent
from fevex.testing import FakeModel

app = create_fevex(
    models={"default": FakeModel({"output": "hi"})},
    agents=[define_agent(name="support", instructions="Help.")],
    run_store=os.environ.get("SERVICE_RUN_STORE"),
)
"""
PASSWORD = "pw-never-shown-42"


def with_password(url: str, database: str | None = None) -> str:
    """``url`` (of the test server, which trusts every local user) with a password, on
    ``database`` when given."""
    parsed = make_url(url).set(password=PASSWORD)
    if database is not None:
        parsed = parsed.set(database=database)
    return parsed.render_as_string(hide_password=False)


def shown(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


@pytest.fixture(params=["sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """The app's own store and another store of the same kind, as URLs."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'app.db'}", f"sqlite:///{tmp_path / 'other.db'}"
    own = str(request.getfixturevalue("postgres_url"))
    return with_password(own), with_password(own, database="fevex_other")


def environment(**values: str) -> dict[str, str]:
    inherited = {key: value for key, value in os.environ.items() if not key.startswith("FEVEX_")}
    return {**inherited, **values}


def fevex(command: str, *options: str, cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run ``fevex COMMAND --app service:app OPTIONS``: its status and everything it printed.
    A command that starts working (the fault under test) is stopped after a few seconds."""
    process = subprocess.Popen(
        [sys.executable, "-m", "fevex.cli", command, "--app", "service:app", *options],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    return process.returncode, out + err


@pytest.mark.parametrize("command", ["worker", "recover", "serve"])
def test_a_store_option_the_app_does_not_use_is_refused_naming_both_stores(
    tmp_path: Path, stores: tuple[str, str], command: str
) -> None:
    (tmp_path / "service.py").write_text(APP)
    own, other = stores
    status, printed = fevex(
        command,
        "--store",
        other,
        "--create",
        cwd=tmp_path,
        env=environment(SERVICE_RUN_STORE=own),
    )
    assert status == 1
    assert printed.startswith(
        f"fevex: [STORE_MISMATCH] --store names {shown(other)}, but the app sets its own run "
        f"store, {shown(own)}, and would use it instead."
    )
    assert printed.count("\n") == 1
    assert PASSWORD not in printed
    # Refused before anything opened the store --store names.
    assert not (tmp_path / "other.db").exists()


def worker_says(cwd: Path, env: dict[str, str], *options: str) -> tuple[str, int, str]:
    """The first line ``fevex worker`` prints, its status after SIGTERM and the rest."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "fevex.cli", "worker", "--app", "service:app", *options],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stderr is not None
        said = worker.stderr.readline()
        worker.send_signal(signal.SIGTERM)
        _, rest = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    return said, worker.returncode, rest


def test_a_store_option_naming_the_app_s_own_store_is_the_store_used(
    tmp_path: Path, stores: tuple[str, str]
) -> None:
    (tmp_path / "service.py").write_text(APP)
    own, _ = stores
    env = environment(SERVICE_RUN_STORE=own)
    said, status, rest = worker_says(tmp_path, env, "--store", own, "--create")
    assert said == f"fevex worker: runs on the store {shown(own)}\n"
    assert status == 0, rest
    assert PASSWORD not in said + rest
    status, printed = fevex("recover", "--store", own, cwd=tmp_path, env=env)
    assert status == 0, printed
    assert "fevex recover: 0 recovered, 0 skipped, 0 unclaimed" in printed


def test_a_worker_without_store_option_names_the_app_s_own_store_not_the_environment_s(
    tmp_path: Path,
) -> None:
    (tmp_path / "service.py").write_text(APP)
    (tmp_path / "other.db").touch()
    own = f"sqlite:///{tmp_path / 'app.db'}"
    env = environment(SERVICE_RUN_STORE=own, FEVEX_RUN_STORE=f"sqlite:///{tmp_path / 'other.db'}")
    said, status, rest = worker_says(tmp_path, env)
    assert said == f"fevex worker: runs on the store {own}\n"
    assert status == 0, rest
