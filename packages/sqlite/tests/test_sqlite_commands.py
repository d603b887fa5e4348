"""The ``fevex`` command on SQLite stores, as a user runs it (a real process, a real file):
``fevex db status|upgrade``, and ``recover``/``worker`` refusing a ``--store`` that names no
file unless ``--create``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fevex_sqlite.schema import LATEST_VERSION

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "fixtures" / "v1_runs.db"

# The app that wrote the fixture (make_v1_fixture.py), on its store URL from --store.
APP_MODULE = """
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location("make_v1_fixture", {fixture_module!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)


def build_app():
    return module.build_app(os.environ["FEVEX_RUN_STORE"], calls=[])
"""


def fevex(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != "FEVEX_RUN_STORE"}
    return subprocess.run(
        [sys.executable, "-m", "fevex.cli", *arguments],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "support_app.py").write_text(
        APP_MODULE.format(fixture_module=str(HERE / "make_v1_fixture.py"))
    )
    return tmp_path


def test_db_status_and_upgrade_answer_for_sqlite(workdir: Path) -> None:
    database = workdir / "runs.db"
    url = "sqlite:///runs.db"

    status = fevex("db", "status", "--store", url, cwd=workdir)
    assert status.returncode == 1
    assert "STORE_NOT_FOUND" in status.stderr
    assert str(database) in status.stderr
    assert "Traceback" not in status.stderr
    upgrade = fevex("db", "upgrade", "--store", url, cwd=workdir)
    assert upgrade.returncode == 1
    assert "--create" in upgrade.stderr
    assert not database.exists()

    created = fevex("db", "upgrade", "--store", url, "--create", cwd=workdir)
    assert created.returncode == 0, created.stderr
    assert created.stdout == f"Created {database} at schema version {LATEST_VERSION}.\n"
    status = fevex("db", "status", "--store", url, cwd=workdir)
    assert status.returncode == 0, status.stderr
    assert f"schema version {LATEST_VERSION}, this code needs {LATEST_VERSION} (up to date)" in (
        status.stdout
    )


def test_db_upgrade_migrates_a_version_1_file(workdir: Path) -> None:
    shutil.copyfile(FIXTURE, workdir / "old.db")
    status = fevex("db", "status", "--store", "sqlite:///old.db", cwd=workdir)
    assert status.returncode == 1
    assert "schema version 1" in status.stdout
    assert "needs: fevex db upgrade" in status.stdout
    upgrade = fevex("db", "upgrade", "--store", "sqlite:///old.db", cwd=workdir)
    assert upgrade.returncode == 0, upgrade.stderr
    assert f"from schema version 1 to {LATEST_VERSION} (applied 2, 3, 4, 5, 6)" in upgrade.stdout


def test_db_refuses_a_scheme_no_plugin_manages(workdir: Path) -> None:
    for url, suggestion in (("sqlit:///runs.db", "Did you mean 'sqlite'?"), ("memory://", "")):
        completed = fevex("db", "status", "--store", url, cwd=workdir)
        assert completed.returncode == 1
        assert "INVALID_ARGUMENT" in completed.stderr
        assert "sqlite" in completed.stderr
        assert suggestion in completed.stderr
    assert not (workdir / "runs.db").exists()


@pytest.mark.parametrize("command", ["recover", "worker"])
def test_a_store_url_naming_no_file_is_refused_before_the_app_loads(
    workdir: Path, command: str
) -> None:
    # The app does not exist either: the store is checked first, and nothing is created.
    completed = fevex(
        command, "--app", "missing_app:app", "--store", "sqlite:///runs-crsh.db", cwd=workdir
    )
    assert completed.returncode == 1
    assert completed.stderr.count("\n") == 1, completed.stderr
    assert "STORE_NOT_FOUND" in completed.stderr
    assert str(workdir / "runs-crsh.db") in completed.stderr
    assert "--create" in completed.stderr
    assert not (workdir / "runs-crsh.db").exists()


def test_recover_with_create_starts_a_new_file_and_reports_an_empty_pass(workdir: Path) -> None:
    completed = fevex(
        "recover", "--app", "support_app:build_app", "--store", "sqlite:///new.db", "--create",
        cwd=workdir,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == ""
    assert completed.stderr == "fevex recover: 0 recovered, 0 skipped, 0 unclaimed\n"
    assert (workdir / "new.db").exists()


def test_recover_continues_the_orphan_of_an_old_file_and_says_so(workdir: Path) -> None:
    shutil.copyfile(FIXTURE, workdir / "old.db")
    completed = fevex(
        "recover", "--app", "support_app:build_app", "--store", "sqlite:///old.db", cwd=workdir
    )
    assert completed.returncode == 0, completed.stderr
    (line,) = completed.stdout.splitlines()
    assert json.loads(line)["status"] == "completed"
    assert completed.stderr == "fevex recover: 1 recovered, 0 skipped, 0 unclaimed\n"
