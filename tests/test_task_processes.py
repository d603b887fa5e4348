"""Durable tasks across real processes, on SQLite (a file) and PostgreSQL.

A process runs an attempt of a task and SIGKILLs itself inside a step or inside the
receipt query (``task_process_app``); a ``fevex worker`` then runs beside the dead
attempt and must leave the task alone; a new process calls ``run_task`` again. A ledger
file outside fevex counts each step's runs and the reconciled effect.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fevex import Fevex

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
APP = "task_process_app"
LEASE_SECONDS = 1.0
GUARD_SECONDS = 60.0  # a hang guard, never a timing assertion


@pytest.fixture
def env(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {
        "FEVEX_RUN_STORE": store_url,
        "FEVEX_TEST_LEDGER": str(tmp_path / "ledger.txt"),
        "FEVEX_TEST_LEASE_SECONDS": str(LEASE_SECONDS),
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return {**os.environ, **values}


@pytest.fixture
async def app(env: dict[str, str]) -> AsyncIterator[Fevex]:
    """The same app in the test process, to read what the other processes wrote."""
    sys.path.insert(0, str(HERE))
    try:
        import task_process_app
    finally:
        sys.path.remove(str(HERE))
    built = task_process_app.build_app()
    yield built
    await built.close()


def python(env: dict[str, str], code: str, kill_at: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=HERE,
        env={**env, "FEVEX_TEST_KILL_AT": kill_at},
        capture_output=True,
        text=True,
        timeout=60,
    )


def ledger(env: dict[str, str]) -> Counter[str]:
    path = Path(env["FEVEX_TEST_LEDGER"])
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return Counter(line.split()[0] if line.startswith("publish ") else line for line in lines)


def start_worker(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable, "-m", "fevex.cli", "worker", "--app", f"{APP}:build_app",
            "--store", env["FEVEX_RUN_STORE"], "--interval", "0.1", "--json",
        ],
        cwd=HERE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


async def leave_to_a_worker(env: dict[str, str], app: Fevex, task_id: str) -> None:
    """A ``fevex worker`` running past the dead attempt's lease continues nothing of it, and
    says why it leaves it: only ``run_task`` continues a task."""
    before = [event.id for event in await app.list_events(task_id)]
    worker = start_worker(env)
    assert worker.stdout is not None
    reports: list[dict[str, object]] = []

    def read_until_the_task_is_reported() -> None:
        assert worker.stdout is not None
        for line in worker.stdout:
            if line.strip():
                reports.append(json.loads(line))
                if reports[-1]["run_id"] == task_id:
                    return

    try:
        # The lease lapses within LEASE_SECONDS of the kill; the guard only bounds a hang.
        await asyncio.wait_for(asyncio.to_thread(read_until_the_task_is_reported), GUARD_SECONDS)
        await asyncio.sleep(LEASE_SECONDS)  # more passes: none of them takes the task either
    finally:
        worker.send_signal(signal.SIGTERM)
    out, err = await asyncio.to_thread(worker.communicate, timeout=30)
    assert worker.returncode == 0, err
    reports += [json.loads(line) for line in out.splitlines() if line.strip()]
    mine = {(r["action"], r["code"]) for r in reports if r["run_id"] == task_id}
    assert mine == {("skipped", "TASK_NOT_CONTINUABLE")}
    assert [event.id for event in await app.list_events(task_id)] == before
    assert (await app.get_run(task_id)).status == "running"


# kills: where each attempt but the last dies; then what the ledger, attempts and model
# calls must say once the last attempt completed.
SCENARIOS = {
    "in analyze": (["analyze"], {"analyze": 2, "publish-step": 1, "publish": 1}, 2, 2),
    "in publish, before its effect": (
        ["publish-before"],
        {"analyze": 1, "publish-step": 2, "publish": 1, "reconcile": 1},
        2,
        1,
    ),
    "in publish, after its effect": (
        ["publish-after"],
        {"analyze": 1, "publish-step": 1, "publish": 1, "reconcile": 1},
        2,
        1,
    ),
    "in publish, then in reconcile": (
        ["publish-after", "reconcile"],
        {"analyze": 1, "publish-step": 1, "publish": 1, "reconcile": 2},
        3,
        1,
    ),
    "in notify": (["notify"], {"analyze": 1, "publish-step": 1, "publish": 1, "notify": 2}, 2, 1),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_sigkill_inside_a_step_then_run_task_again(
    env: dict[str, str], app: Fevex, scenario: str
) -> None:
    kills, counts, attempts, calls = SCENARIOS[scenario]
    created = python(env, f"import {APP}; {APP}.create()")
    assert created.returncode == 0, created.stderr
    task_id = created.stdout.strip()
    assert task_id.startswith("run_")
    for number, kill_at in enumerate(kills):
        died = python(env, f"import {APP}; {APP}.run({task_id!r})", kill_at)
        assert died.returncode == -signal.SIGKILL, died.stderr
        if number == 0:
            await leave_to_a_worker(env, app, task_id)
        else:
            await asyncio.sleep(LEASE_SECONDS * 1.5)
    done = python(env, f"import {APP}; {APP}.run({task_id!r})")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done"

    expected = {"notify": 1, **counts}
    assert dict(ledger(env)) == expected
    run = await app.get_run(task_id)
    assert run.status == "completed"
    assert run.output == {
        "text": "draft",
        "summary": "a summary",
        "published": True,
        "notified": True,
    }
    checkpoint = await app.run_store.get_checkpoint(task_id)
    assert isinstance(checkpoint, dict)
    assert checkpoint["attempt_count"] == attempts
    assert checkpoint["completed_steps"] == ["analyze", "publish", "notify"]
    # Each attempt reserved its 2 calls, kept when it died; the calls are those made.
    assert checkpoint["model_budget"] == {"limit": 8, "reserved": 2 * attempts, "used": calls}
    children = await app.list_runs(parent_run_id=task_id)
    assert len(children) == counts["analyze"]
    assert {child.status for child in children} == {"completed"}


# An attempt SIGKILLed in the reconcile step ``publish``, when no attempt can follow it:
# what was used up, where it died, then what the task ends with and has recorded.
USED_UP = {
    "the budget (the default reservation), after the effect": (
        {"FEVEX_TEST_CALLS_PER_ATTEMPT": "all"},
        "publish-after",
        "TASK_BUDGET_EXHAUSTED",
        True,
    ),
    "the budget (the default reservation), before the effect": (
        {"FEVEX_TEST_CALLS_PER_ATTEMPT": "all"},
        "publish-before",
        "TASK_BUDGET_EXHAUSTED",
        False,
    ),
    "the attempts, after the effect": (
        {"FEVEX_TEST_MAX_ATTEMPTS": "1"},
        "publish-after",
        "TASK_ATTEMPTS_EXHAUSTED",
        True,
    ),
}


@pytest.mark.parametrize("scenario", list(USED_UP))
async def test_a_task_with_nothing_left_asks_reconcile_before_it_ends_failed(
    env: dict[str, str], app: Fevex, scenario: str
) -> None:
    bounds, kill_at, code, published = USED_UP[scenario]
    env = {**env, **bounds}
    created = python(env, f"import {APP}; {APP}.create()")
    assert created.returncode == 0, created.stderr
    task_id = created.stdout.strip()
    died = python(env, f"import {APP}; {APP}.run({task_id!r})", kill_at)
    assert died.returncode == -signal.SIGKILL, died.stderr
    await asyncio.sleep(LEASE_SECONDS * 1.5)

    ended = python(env, f"import {APP}; {APP}.run({task_id!r})")
    assert ended.returncode == 1
    assert code in ended.stderr
    run = await app.get_run(task_id)
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["code"] == code
    # The receipt was asked, once; the effect happened at most once.
    counts = {"analyze": 1, "publish-step": 1, "reconcile": 1}
    assert dict(ledger(env)) == ({**counts, "publish": 1} if published else counts)
    checkpoint = await app.run_store.get_checkpoint(task_id)
    assert isinstance(checkpoint, dict)
    assert checkpoint["status"] == "failed"
    assert checkpoint["attempt_count"] == 1
    assert checkpoint["state"]["published"] is published
    if published:
        assert checkpoint["completed_steps"] == ["analyze", "publish"]
        assert checkpoint["started_step"] is None
    else:
        assert checkpoint["completed_steps"] == ["analyze"]
        assert checkpoint["started_step"] == "publish"
    types = [event.type for event in await app.list_events(task_id)]
    assert types.index("task.step.reconciling") < types.index("run.failed")
