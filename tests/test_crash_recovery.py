"""Crash tests with real processes on SQLite and PostgreSQL.

A worker process runs a billing agent whose keyed tool charges an idempotent service. The
test kills it (SIGKILL) at random points, or freezes it (SIGSTOP) past its lease, and
recovers the run from another process. The charge must happen exactly once, the run must
complete, and its events must have no gap or duplicate.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fevex import FevexRunError

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent / "durable"
LEASE_SECONDS = 1.0


def load_app_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("durable_app", HERE / "durable_app.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start_worker(environment: dict[str, str], **extra: str) -> tuple[subprocess.Popen[str], str]:
    worker = subprocess.Popen(
        [sys.executable, str(HERE / "durable_app.py")],
        env={**environment, **extra},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    run_id = worker.stdout.readline().strip()
    assert run_id.startswith("run_"), worker.stderr.read() if worker.stderr else run_id
    return worker, run_id


def kill(worker: subprocess.Popen[str]) -> None:
    worker.send_signal(signal.SIGKILL)
    worker.communicate(timeout=10)


async def recover_until_done(app: Any, run_id: str) -> None:
    """Recover the run once its lease has expired; a finished run needs nothing."""
    deadline = time.monotonic() + 30
    while True:
        run = await app.get_run(run_id)
        if run.status != "running":
            return
        try:
            await app.recover_run(run_id, actor={"id": "crash-test"})
            return
        except FevexRunError as error:
            if error.code != "RUN_CONFLICT" or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)


async def assert_completed_exactly_once(app: Any, run_id: str, service: Any) -> None:
    run = await app.get_run(run_id)
    assert run.status == "completed", run
    assert run.output == "Charged."
    key = f"fevex:{run_id}:call-1"
    assert service.applied[key] == 1
    events = await app.list_events(run_id)
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert len({e.id for e in events}) == len(events)
    assert [e.type for e in events].count("run.completed") == 1
    assert [e.type for e in events].count("tool.completed") == 1


async def test_a_worker_killed_at_random_points_is_recovered_exactly_once(
    environment: dict[str, str], service: Any
) -> None:
    app = load_app_module().build_app()
    rng = random.Random(20261130)
    recovered = 0
    try:
        for _ in range(8):
            worker, run_id = start_worker(environment)
            await asyncio.sleep(rng.uniform(0.0, 0.3))
            kill(worker)
            await recover_until_done(app, run_id)
            await assert_completed_exactly_once(app, run_id, service)
            recovered += "run.recovered" in [e.type for e in await app.list_events(run_id)]
        # The kills landed inside runs (a run's tool alone takes 0.3 s), not only after them.
        assert recovered >= 4
    finally:
        await app.run_store.close()


async def test_a_frozen_worker_cannot_commit_after_a_takeover(
    environment: dict[str, str], service: Any
) -> None:
    app = load_app_module().build_app()
    try:
        worker, run_id = start_worker(environment, FEVEX_TEST_TOOL_DELAY="1.5")
        key = f"fevex:{run_id}:call-1"
        deadline = time.monotonic() + 20
        while service.requests[key] == 0:
            assert time.monotonic() < deadline, "the worker never reached its effect"
            await asyncio.sleep(0.05)
        worker.send_signal(signal.SIGSTOP)
        try:
            await recover_until_done(app, run_id)
            before = [e.to_json() for e in await app.list_events(run_id)]
        finally:
            worker.send_signal(signal.SIGCONT)
        out, _ = worker.communicate(timeout=30)
        assert worker.returncode == 3
        assert "error LEASE_LOST" in out
        after = [e.to_json() for e in await app.list_events(run_id)]
        assert after == before
        await assert_completed_exactly_once(app, run_id, service)
        assert service.requests[key] == 2  # the retry reused the key; the service deduplicated
    finally:
        await app.run_store.close()


async def test_fevex_recover_finds_and_continues_orphaned_runs(
    environment: dict[str, str], service: Any, store_url: str
) -> None:
    app = load_app_module().build_app()
    orphans = []
    try:
        for _ in range(3):
            worker, run_id = start_worker(environment, FEVEX_TEST_TOOL_DELAY="2")
            kill(worker)
            orphans.append(run_id)
        await asyncio.sleep(LEASE_SECONDS + 0.2)
        recoverers = [
            subprocess.Popen(  # noqa: ASYNC220 - waited for below, with a timeout
                [
                    sys.executable,
                    "-m",
                    "fevex.cli",
                    "recover",
                    "--app",
                    "durable_app:build_app",
                    "--store",
                    store_url,
                ],
                cwd=HERE,
                env={**environment, "FEVEX_TEST_TOOL_DELAY": "0"},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(3)
        ]
        reported = []
        for recoverer in recoverers:
            out, err = recoverer.communicate(timeout=60)
            assert recoverer.returncode == 0, err
            reported += [json.loads(line) for line in out.splitlines() if line.strip()]
        # A pass may also list a run another recoverer was claiming at that moment as
        # "unclaimed"; each orphan is recovered by exactly one of them.
        mine = [
            entry
            for entry in reported
            if entry["run_id"] in orphans and entry["status"] != "unclaimed"
        ]
        assert sorted(entry["run_id"] for entry in mine) == sorted(orphans)
        assert {entry["status"] for entry in mine} == {"completed"}
        for run_id in orphans:
            await assert_completed_exactly_once(app, run_id, service)
            types = [e.type for e in await app.list_events(run_id)]
            assert types.count("run.recovered") == 1
    finally:
        await app.run_store.close()


async def test_fevex_workers_share_orphaned_runs_and_stop_cleanly(
    environment: dict[str, str], service: Any, store_url: str
) -> None:
    app = load_app_module().build_app()
    orphans = []
    workers: list[subprocess.Popen[str]] = []
    try:
        for _ in range(4):
            crashed, run_id = start_worker(environment, FEVEX_TEST_TOOL_DELAY="2")
            kill(crashed)
            orphans.append(run_id)
        workers = [
            subprocess.Popen(  # noqa: ASYNC220 - stopped and waited for below
                [
                    sys.executable, "-m", "fevex.cli", "worker", "--app", "durable_app:build_app",
                    "--store", store_url, "--concurrency", "2", "--interval", "0.2", "--json",
                ],
                cwd=HERE,
                # The orphans' leases are short, so they expire soon; the workers' own are
                # long, so a worker the machine starves for a second keeps the run it took
                # (with a short one, another worker rightly recovers it a second time).
                env={**environment, "FEVEX_TEST_TOOL_DELAY": "0", "FEVEX_TEST_LEASE_SECONDS": "30"},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]  # fmt: skip
        deadline = time.monotonic() + 60
        while [run for run in [await app.get_run(r) for r in orphans] if run.status == "running"]:
            assert time.monotonic() < deadline, "the workers did not recover every orphan"
            await asyncio.sleep(0.2)
        reported = []
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
            out, err = await asyncio.to_thread(worker.communicate, timeout=60)
            assert worker.returncode == 0, err
            assert "Traceback" not in err, err
            reported += [json.loads(line) for line in out.splitlines() if line.strip()]
        # A pass may also list a run another recoverer was claiming at that moment as
        # "unclaimed", or skip one another worker took first (a line with a code and no
        # status); each orphan is recovered by exactly one of them.
        mine = [
            entry
            for entry in reported
            if entry["run_id"] in orphans
            and entry["action"] != "skipped"
            and entry.get("status") != "unclaimed"
        ]
        assert sorted(entry["run_id"] for entry in mine) == sorted(orphans)
        assert {(entry["action"], entry["status"]) for entry in mine} == {
            ("recovered", "completed")
        }
        for run_id in orphans:
            await assert_completed_exactly_once(app, run_id, service)
            types = [e.type for e in await app.list_events(run_id)]
            assert types.count("run.recovered") == 1
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
        await app.run_store.close()


async def test_fevex_recover_right_after_a_crash_names_the_run_whose_lease_is_live(
    environment: dict[str, str], store_url: str
) -> None:
    long_lease = {"FEVEX_TEST_LEASE_SECONDS": "30"}
    worker, run_id = start_worker(environment, FEVEX_TEST_TOOL_DELAY="2", **long_lease)
    kill(worker)
    completed = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "fevex.cli", "recover", "--app", "durable_app:build_app",
         "--store", store_url],
        cwd=HERE, env={**environment, **long_lease}, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == ""
    lines = completed.stderr.splitlines()
    assert lines[0] == "fevex recover: 0 recovered, 0 skipped, 0 unclaimed"
    assert lines[1].startswith(
        f"fevex recover: run {run_id} (agent billing) is running and its lease has not expired"
    )
    assert "(30 s for this app)" in lines[1]
    assert len(lines) == 2
