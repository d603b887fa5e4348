"""Bounded child runs across real processes, on SQLite (a file) and PostgreSQL: a process
SIGKILLed between two commits of a group, then ``fevex worker`` finishes the group with
each commit made exactly once; and a child that outlives its group's failure commits
nothing. A ledger file outside fevex counts the commits and says which process made each."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fevex import AgentRun, Fevex

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
APP = "children_process_app"


def load_app_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(APP, HERE / f"{APP}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def env(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {
        "FEVEX_RUN_STORE": store_url,
        "FEVEX_TEST_LEDGER": str(tmp_path / "ledger.txt"),
        "FEVEX_TEST_MARKER": str(tmp_path / "killed.txt"),
        "FEVEX_TEST_LEASE_SECONDS": "1.0",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return {**os.environ, **values}


@pytest.fixture
async def app(env: dict[str, str]) -> AsyncIterator[Fevex]:
    """The same app in the test process, to read what the other processes wrote."""
    built: Fevex = load_app_module().build_app(on_event=lambda event: None)
    yield built
    await built.close()


def start(env: dict[str, str], workflow: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-c", f"import {APP}; {APP}.main({workflow!r})"],
        cwd=HERE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    run_id = process.stdout.readline().strip()
    assert run_id.startswith("run_"), process.communicate(timeout=10)
    return process, run_id


def start_worker(env: dict[str, str], store_url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable, "-m", "fevex.cli", "worker", "--app", f"{APP}:build_app",
            "--store", store_url, "--interval", "0.1", "--json",
        ],
        cwd=HERE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


async def stop_worker(worker: subprocess.Popen[str]) -> list[dict[str, Any]]:
    worker.send_signal(signal.SIGTERM)
    out, err = await asyncio.to_thread(worker.communicate, timeout=30)
    assert worker.returncode == 0, err
    assert "Traceback" not in err, err
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def ledger(env: dict[str, str]) -> list[tuple[str, int]]:
    path = Path(env["FEVEX_TEST_LEDGER"])
    if not path.exists():
        return []
    entries = [line.split() for line in path.read_text(encoding="utf-8").splitlines()]
    return [(name, int(pid)) for name, pid in entries]


async def until_ended(app: Fevex, run_id: str, worker: subprocess.Popen[str]) -> AgentRun:
    deadline = time.monotonic() + 30
    run = await app.get_run(run_id)
    while run.status in ("running", "paused"):
        assert worker.poll() is None, worker.communicate()
        assert time.monotonic() < deadline, f"the run is still {run.status}"
        await asyncio.sleep(0.05)
        run = await app.get_run(run_id)
    return run


async def test_a_group_killed_between_two_commits_is_finished_by_fevex_worker(
    env: dict[str, str], store_url: str, app: Fevex
) -> None:
    process, run_id = start(env, "proc_group")
    await asyncio.to_thread(process.communicate, timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert [name for name, _ in ledger(env)] == ["commit-a"]

    worker = start_worker(env, store_url)
    try:
        run = await until_ended(app, run_id, worker)
    finally:
        await stop_worker(worker)

    assert run.status == "completed", run.error
    assert run.output == ["done:a", "done:b", "done:c"]
    commits = ledger(env)
    # Each commit exactly once: a's by the killed process, b's and c's by the worker.
    assert [name for name, _ in commits] == ["commit-a", "commit-b", "commit-c"]
    assert [pid for _, pid in commits] == [process.pid, worker.pid, worker.pid]
    # The children ran once each (the worker found them stored and ended).
    children = await app.list_runs(parent_run_id=run_id)
    assert sorted(c.input for c in children) == ["a", "b", "c"]


async def test_a_child_that_outlives_its_groups_failure_commits_nothing(
    env: dict[str, str], app: Fevex
) -> None:
    process, run_id = start(env, "proc_late")
    out, err = await asyncio.to_thread(process.communicate, timeout=30)
    # The process printed the group's failure, then lived on until the child's thread
    # had ended.
    assert out.strip() == "failed CHILD_GROUP_FAILED", err

    run = await app.get_run(run_id)
    assert run.status == "failed"
    children = {c.name: c for c in await app.list_runs(parent_run_id=run_id)}
    assert children["analyst"].status == "failed"
    assert children["proc_slow"].status == "cancelled"
    # The slow child's step ran on past the group's end (its thread cannot be stopped)
    # and nothing of the group was committed, then or after.
    assert [name for name, _ in ledger(env)] == ["late"]
