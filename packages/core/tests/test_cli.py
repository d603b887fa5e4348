"""The ``fevex`` command as a user meets it: arguments checked with one line and status 2,
an ``--app`` that cannot be loaded in one line, Ctrl-C without a traceback, and a summary
of every ``recover`` pass. Real processes, with installed plugins switched off."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fevex.cli import main

APP = """
from fevex import create_fevex, define_agent
from fevex.testing import FakeModel

app = create_fevex(
    models={"default": FakeModel({"output": "hi"})},
    agents=[define_agent(name="support", instructions="Help.")],
)
"""


def environment() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("FEVEX_")}
    return {**env, "FEVEX_DISABLE_PLUGIN_AUTOLOAD": "1"}


def fevex(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fevex.cli", *arguments],
        cwd=cwd,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["recover", "--interval", "0"], "--interval: must be at least 0.1 seconds"),
        (["recover", "--interval", "-1"], "--interval: must be at least 0.1 seconds"),
        (["recover", "--interval", "nan"], "--interval: must be at least 0.1 seconds"),
        (["recover", "--interval", "soon"], "--interval: must be a number of seconds"),
        (["recover", "--limit", "0"], "--limit: must be at least 1"),
        (["recover", "--limit", "2.5"], "--limit: must be a whole number"),
        (["worker", "--interval", "0"], "--interval: must be at least 0.1 seconds"),
        (["worker", "--concurrency", "0"], "--concurrency: must be at least 1"),
        (["worker", "--concurrency", "-3"], "--concurrency: must be at least 1"),
    ],
)
def test_bad_arguments_exit_2_with_one_clear_line(
    arguments: list[str], message: str, fresh_plugins: None, capsys: pytest.CaptureFixture[str]
) -> None:
    command, *options = arguments
    with pytest.raises(SystemExit) as exited:
        main([command, "--app", "myservice.app:app", *options])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert message in error
    assert "Traceback" not in error


def test_app_must_be_module_colon_attribute(
    fresh_plugins: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["recover", "--app", "myservice.app"])
    assert exited.value.code == 2
    assert "takes module:attribute" in capsys.readouterr().err


def one_line_error(completed: subprocess.CompletedProcess[str]) -> str:
    assert completed.returncode == 1
    assert "Traceback" not in completed.stderr
    assert completed.stderr.count("\n") == 1, completed.stderr
    return completed.stderr


@pytest.mark.parametrize(
    ("module", "reference", "expected"),
    [
        (None, "missing_app:app", ["APP_NOT_FOUND", "no module named 'missing_app'"]),
        (APP, "service:ap", ["APP_NOT_FOUND", "has no attribute 'ap'", "Did you mean 'app'?"]),
        (
            "import not_installed_dependency\n",
            "service:app",
            ["APP_IMPORT_FAILED", "ModuleNotFoundError", "not_installed_dependency"],
        ),
        (
            "x = 1\ny = x / 0\n",
            "service:app",
            ["APP_IMPORT_FAILED", "ZeroDivisionError: division by zero", "service.py:2)"],
        ),
        ("def broken(:\n", "service:app", ["APP_IMPORT_FAILED", "SyntaxError", "service.py:1"]),
    ],
)
def test_an_app_that_cannot_be_loaded_is_one_line(
    tmp_path: Path, module: str | None, reference: str, expected: list[str]
) -> None:
    if module is not None:
        (tmp_path / "service.py").write_text(module)
    error = one_line_error(fevex("recover", "--app", reference, cwd=tmp_path))
    for text in expected:
        assert text in error


def test_a_pass_with_nothing_to_do_says_so(tmp_path: Path) -> None:
    (tmp_path / "service.py").write_text(APP)
    completed = fevex("recover", "--app", "service:app", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == ""
    assert completed.stderr == "fevex recover: 0 recovered, 0 skipped, 0 unclaimed\n"


def _default_sigint() -> None:
    """In the child before it starts Python: SIGINT as a terminal's foreground process has it.
    A suite started in the background (``&``, ``nohup``) has SIGINT ignored, which a child
    inherits, and Python then installs no ``KeyboardInterrupt`` handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_a_watcher_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "service.py").write_text(APP)
    watcher = subprocess.Popen(
        [sys.executable, "-m", "fevex.cli", "recover", "--app", "service:app", "--interval", "0.1"],
        cwd=tmp_path,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    try:
        assert watcher.stderr is not None
        # One summary per pass: the watcher is running once the second one is out.
        for _ in range(2):
            assert (
                watcher.stderr.readline() == "fevex recover: 0 recovered, 0 skipped, 0 unclaimed\n"
            )
        watcher.send_signal(signal.SIGINT)
        _, rest = watcher.communicate(timeout=60)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.communicate()
    assert watcher.returncode == 130
    assert "Traceback" not in rest
    assert rest.endswith("fevex: interrupted\n")


@pytest.mark.parametrize("command", ["recover", "worker", "serve"])
def test_a_store_url_no_plugin_serves_is_the_store_s_problem(tmp_path: Path, command: str) -> None:
    (tmp_path / "service.py").write_text(APP)
    error = one_line_error(
        fevex(command, "--app", "service:app", "--store", "bogus://x", cwd=tmp_path)
    )
    assert error.startswith("fevex: [MISSING_PLUGIN] No run store for scheme 'bogus'.")
    assert "APP_IMPORT_FAILED" not in error
    schemeless = one_line_error(
        fevex(command, "--app", "service:app", "--store", "runs.db", cwd=tmp_path)
    )
    assert schemeless.startswith("fevex: [INVALID_CONFIG] A run store URL needs a scheme")


def test_fevex_db_without_a_store_plugin_says_which_plugin_is_missing(tmp_path: Path) -> None:
    sqlite = one_line_error(
        fevex("db", "status", "--store", f"sqlite:///{tmp_path}/x.db", cwd=tmp_path)
    )
    assert sqlite.startswith("fevex: [MISSING_PLUGIN] No run store for scheme 'sqlite'")
    assert "invalid choice" not in sqlite
    memory = one_line_error(fevex("db", "upgrade", "--store", "memory://", cwd=tmp_path))
    assert (
        "no loaded plugin manages a store's schema (fevex-sqlite and fevex-postgres do)" in memory
    )
    described = " ".join(fevex("db", "--help", cwd=tmp_path).stdout.split())
    assert "installed plugins serve: none (fevex-sqlite and fevex-postgres add theirs)" in described


def worker_lines(tmp_path: Path, *options: str) -> tuple[list[str], int, str]:
    """The worker's first two lines on stderr, its status after SIGTERM and the rest."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "fevex.cli", "worker", "--app", "service:app", *options],
        cwd=tmp_path,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stderr is not None
        said = [worker.stderr.readline(), worker.stderr.readline()]
        worker.send_signal(signal.SIGTERM)
        _, rest = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    return said, worker.returncode, rest


def test_a_worker_without_a_store_warns_that_it_runs_on_memory(tmp_path: Path) -> None:
    (tmp_path / "service.py").write_text(APP)
    said, status, rest = worker_lines(tmp_path)
    assert (
        said[0] == "fevex worker: runs on memory:// (no --store, and FEVEX_RUN_STORE is not set)\n"
    )
    assert said[1].startswith(
        "fevex worker: warning: an in-memory store's runs are this process's alone"
    )
    # SIGTERM right after start-up, before or while the loop starts, ends it cleanly.
    assert status == 0
    assert rest == ""


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("memory://user:secret@example/", "memory://user:***@example/"),
        # Unescaped, as users write them: all of it up to the last @ is hidden.
        ("memory://user:se@c/r#et@example/", "memory://user:***@example/"),
        # libpq's password parameter.
        ("memory://example/db?password=secret&x=1", "memory://example/db?password=***&x=1"),
    ],
)
def test_a_worker_names_its_store_without_the_password(
    tmp_path: Path, url: str, shown: str
) -> None:
    (tmp_path / "service.py").write_text(APP)
    said, status, _ = worker_lines(tmp_path, "--store", url)
    assert said[0] == f"fevex worker: runs on the store {shown}\n"
    assert status == 0


def test_fevex_plugins_into_a_closed_pipe_ends_without_a_traceback(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone, as `head` is after its lines
    try:
        completed = subprocess.run(
            [sys.executable, "-m", "fevex.cli", "plugins"],
            cwd=tmp_path, env=environment(), stdout=write_end, stderr=subprocess.PIPE,
            text=True, timeout=60, check=False,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert completed.stderr == ""
    assert completed.returncode == 141
