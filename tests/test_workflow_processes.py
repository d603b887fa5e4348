"""Durable workflows and teams across real processes, on SQLite (a file) and PostgreSQL.

One process starts a workflow or a team; it is SIGKILLed mid-step or mid-compensation, or
exits once the run pauses. ``fevex worker`` in another process recovers it, fires its timer
or wakes the team whose child ended, and ``send_event`` or ``resume_run`` from a third
process continues it. A ledger file outside fevex counts each step function's,
compensation's and tool's runs and says which process ran it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fevex import AgentRun, Fevex, RunEvent

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
APP = "workflow_process_app"
STEP_DELAY = 0.3


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
        "FEVEX_TEST_LEASE_SECONDS": "1.0",
        "FEVEX_TEST_STEP_DELAY": str(STEP_DELAY),
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return {**os.environ, **values}


@pytest.fixture
async def app(env: dict[str, str]) -> AsyncIterator[Fevex]:
    """The same app in the test process, to read the runs the other processes wrote."""
    built: Fevex = load_app_module().build_app()
    yield built
    await built.close()


def python(env: dict[str, str], code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=HERE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def start(
    env: dict[str, str], name: str, *, entry: str = "main"
) -> tuple[subprocess.Popen[str], str]:
    """A process running the workflow ``name`` (the team, with ``entry="main_team"``), and
    the id of its run once it has started."""
    process = python(env, f"import {APP}; {APP}.{entry}({name!r})")
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
        env={**env, "FEVEX_TEST_STEP_DELAY": "0", "FEVEX_TEST_HOLD": ""},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


async def stop_worker(worker: subprocess.Popen[str]) -> list[dict[str, Any]]:
    """SIGTERM the worker; it must exit cleanly. Returns what it reported."""
    worker.send_signal(signal.SIGTERM)
    out, err = await asyncio.to_thread(worker.communicate, timeout=30)
    assert worker.returncode == 0, err
    assert "Traceback" not in err, err
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def ledger(env: dict[str, str]) -> list[tuple[str, int]]:
    """Each step function's run, in order: its name and the process that ran it."""
    path = Path(env["FEVEX_TEST_LEDGER"])
    if not path.exists():
        return []
    entries = [line.split() for line in path.read_text(encoding="utf-8").splitlines()]
    return [(name, int(pid)) for name, pid in entries]


def each_release(numbers: range) -> list[str]:
    """The ledger names of the compensations of ``reserve-N`` for each N, in order."""
    return [name for n in numbers for name in (f"release-{n}", f"released-{n}")]


async def until_ledger_has(env: dict[str, str], name: str) -> None:
    deadline = time.monotonic() + 30
    while name not in [entry for entry, _ in ledger(env)]:
        assert time.monotonic() < deadline, f"step {name} never began"
        await asyncio.sleep(0.01)


async def until_ended(app: Fevex, run_id: str, worker: subprocess.Popen[str]) -> AgentRun:
    deadline = time.monotonic() + 30
    run = await app.get_run(run_id)
    while run.status in ("running", "paused"):
        assert worker.poll() is None, worker.communicate()
        assert time.monotonic() < deadline, f"the run is still {run.status}"
        await asyncio.sleep(0.05)
        run = await app.get_run(run_id)
    return run


async def assert_events_have_no_gaps(
    app: Fevex, run_id: str, ending: str = "run.completed"
) -> list[RunEvent]:
    events = await app.list_events(run_id)
    assert [event.sequence for event in events] == list(range(1, len(events) + 1))
    assert len({event.id for event in events}) == len(events)
    assert [event.type for event in events].count(ending) == 1
    assert events[-1].type == ending
    return events


@pytest.mark.parametrize("killed_in", [1, 2, 3, 4, 5])
async def test_a_worker_killed_mid_step_is_recovered_by_fevex_worker(
    env: dict[str, str], store_url: str, app: Fevex, killed_in: int
) -> None:
    process, run_id = start(env, "proc_five")
    await until_ledger_has(env, f"step-{killed_in}")
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=10)
    assert process.returncode == -signal.SIGKILL
    assert (await app.get_run(run_id)).status == "running"

    worker = start_worker(env, store_url)
    try:
        run = await until_ended(app, run_id, worker)
    finally:
        reported = await stop_worker(worker)

    assert (run.status, run.output) == ("completed", [f"step-{n}" for n in range(1, 6)])
    assert {"action": "recovered", "run_id": run_id, "status": "completed"} in reported
    runs = ledger(env)
    # Steps before the killed one never ran again; the killed one ran again (at least
    # once: it had no result), in the worker, as did every step after it.
    assert Counter(name for name, _ in runs) == Counter(
        {f"step-{n}": 2 if n == killed_in else 1 for n in range(1, 6)}
    )
    assert {pid for name, pid in runs[:killed_in]} == {process.pid}
    assert {pid for name, pid in runs[killed_in:]} == {worker.pid}
    events = await assert_events_have_no_gaps(app, run_id)
    types = [event.type for event in events]
    assert types.count("run.recovered") == 1
    completed = [e.payload["step_id"] for e in events if e.type == "workflow.step.completed"]
    assert completed == [f"step-{n}" for n in range(1, 6)]


async def test_an_event_sent_from_a_third_process_wakes_the_waiting_run(
    env: dict[str, str], app: Fevex
) -> None:
    starter, run_id = start(env, "proc_waiter")
    out, err = starter.communicate(timeout=30)
    assert (starter.returncode, out.strip()) == (0, "paused event"), err
    paused = await app.get_run(run_id)
    assert paused.status == "paused"
    assert paused.pause is not None
    assert (paused.pause["reason"], paused.pause["event"]) == ("event", "go")

    sender = python(
        env,
        f"import {APP}; app = {APP}.build_app(); "
        f"print(app.send_event_sync({run_id!r}, 'go', {{'note': 'ship it'}}, "
        "actor={'id': 'ada', 'type': 'user'}).output); app.close_sync()",
    )
    out, err = sender.communicate(timeout=30)

    assert sender.returncode == 0, err
    assert out.strip() == "ship it"
    run = await app.get_run(run_id)
    assert (run.status, run.output) == ("completed", "ship it")
    assert ledger(env) == [("before", starter.pid), ("after", sender.pid)]
    events = await assert_events_have_no_gaps(app, run_id)
    (received,) = [event for event in events if event.type == "workflow.event.received"]
    assert (received.payload["event"], received.payload["actor"]) == (
        "go",
        {"id": "ada", "type": "user"},
    )


async def test_a_sleep_is_fired_by_a_worker_started_after_the_run_paused(
    env: dict[str, str], store_url: str, app: Fevex
) -> None:
    starter, run_id = start(env, "proc_napper")
    out, err = starter.communicate(timeout=30)
    assert (starter.returncode, out.strip()) == (0, "paused timer"), err
    paused = await app.get_run(run_id)
    assert paused.status == "paused"
    assert paused.pause is not None
    assert paused.pause["reason"] == "timer"
    assert paused.wake_at is not None

    worker = start_worker(env, store_url)
    try:
        run = await until_ended(app, run_id, worker)
    finally:
        reported = await stop_worker(worker)

    assert (run.status, run.output) == ("completed", "after")
    assert {"action": "woken", "run_id": run_id, "status": "completed"} in reported
    assert ledger(env) == [("before", starter.pid), ("after", worker.pid)]
    events = await assert_events_have_no_gaps(app, run_id)
    assert [event.type for event in events].count("run.paused") == 1


@pytest.mark.parametrize("interrupted", [3, 2, 1])
async def test_a_compensation_chain_killed_mid_compensation_finishes_once(
    env: dict[str, str], store_url: str, app: Fevex, interrupted: int
) -> None:
    # Compensations run latest first: release-3, release-2, release-1.
    holding = {**env, "FEVEX_TEST_HOLD": f"release-{interrupted}"}
    process, run_id = start(holding, "proc_booking")
    await until_ledger_has(env, f"release-{interrupted}")
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=10)
    assert process.returncode == -signal.SIGKILL
    assert (await app.get_run(run_id)).status == "running"

    worker = start_worker(env, store_url)
    try:
        run = await until_ended(app, run_id, worker)
    finally:
        reported = await stop_worker(worker)

    assert run.status == "failed"
    assert run.error is not None
    assert (run.error["code"], run.error["message"]) == ("CARD_DECLINED", "The card was declined.")
    assert {"action": "recovered", "run_id": run_id, "status": "failed"} in reported
    # Compensations that completed before the kill never ran again; the interrupted one
    # ran again (it was in flight) and completed, in the worker, as did the rest, once.
    in_first = ["reserve-1", "reserve-2", "reserve-3", "charge"]
    in_first += [*each_release(range(3, interrupted, -1)), f"release-{interrupted}"]
    assert ledger(env) == [
        *((name, process.pid) for name in in_first),
        *((name, worker.pid) for name in each_release(range(interrupted, 0, -1))),
    ]
    events = await assert_events_have_no_gaps(app, run_id, ending="run.failed")
    assert events[-1].payload["error"]["code"] == "CARD_DECLINED"
    types = [event.type for event in events]
    assert types.count("run.recovered") == 1
    (failed,) = [event for event in events if event.type == "workflow.step.failed"]
    assert (failed.payload["step_id"], failed.payload["error"]["code"]) == (
        "charge",
        "CARD_DECLINED",
    )
    undoing = [
        (event.type, event.payload["step_id"])
        for event in events
        if event.type.startswith("workflow.compensation.")
    ]
    # Each compensation started and completed once, latest first: the start the killed
    # process had not committed yet (it is not durable) died with it.
    assert undoing == [
        (f"workflow.compensation.{what}", f"reserve-{n}")
        for n in (3, 2, 1)
        for what in ("started", "completed")
    ]
    recovered = types.index("run.recovered")
    before_the_kill = [
        event.payload["step_id"]
        for event in events[:recovered]
        if event.type == "workflow.compensation.completed"
    ]
    assert before_the_kill == [f"reserve-{n}" for n in range(3, interrupted, -1)]


async def test_a_team_paused_in_one_process_is_approved_in_another_and_woken_by_a_worker(
    env: dict[str, str], store_url: str, app: Fevex
) -> None:
    starter, team_id = start(env, "proc_shop", entry="main_team")
    out, err = starter.communicate(timeout=30)
    assert (starter.returncode, out.strip()) == (0, "paused children"), err
    team = await app.get_run(team_id)
    assert (team.kind, team.status) == ("team", "paused")
    assert team.pause is not None
    assert (team.pause["reason"], team.pause["step_id"]) == ("children", "pay")
    (child_id,) = team.pause["run_ids"]
    child = await app.get_run(child_id)
    assert (child.name, child.status, child.parent_run_id) == ("proc_cashier", "paused", team_id)
    assert child.pause is not None
    (approval,) = child.pause["approvals"]
    assert ledger(env) == []

    decision = {"approval_id": approval["id"], "decision": "approve", "actor": {"id": "ada"}}
    approver = python(
        env,
        f"import {APP}; app = {APP}.build_app(); "
        f"print(app.resume_run_sync({child_id!r}, {decision!r}).output); app.close_sync()",
    )
    out, err = approver.communicate(timeout=30)
    assert approver.returncode == 0, err
    paid = f"charged 3 in process {approver.pid}"
    assert out.strip() == paid
    # Approving the child continues the child only; its end makes the team due.
    team = await app.get_run(team_id)
    assert (team.status, (await app.get_run(child_id)).status) == ("paused", "completed")
    assert team.wake_at is not None

    worker = start_worker(env, store_url)
    try:
        team = await until_ended(app, team_id, worker)
    finally:
        reported = await stop_worker(worker)

    assert (team.status, team.output) == ("completed", {"plan": "charge 3", "paid": paid})
    assert {"action": "woken", "run_id": team_id, "status": "completed"} in reported
    assert ledger(env) == [("proc_charge", approver.pid)]
    children = await app.list_runs(parent_run_id=team_id)
    assert sorted((run.name, run.status) for run in children) == [
        ("proc_cashier", "completed"),
        ("proc_planner", "completed"),
    ]
    assert {run.parent_run_id for run in children} == {team_id}
    events = await assert_events_have_no_gaps(app, team_id)
    delegations = [
        (event.type, event.payload["step_id"])
        for event in events
        if event.type.startswith("team.delegation.")
    ]
    assert delegations == [
        ("team.delegation.started", "plan"),
        ("team.delegation.completed", "plan"),
        ("team.delegation.started", "pay"),
        ("team.delegation.completed", "pay"),
    ]
    for child in children:
        await assert_events_have_no_gaps(app, child.id)
