"""``cancel_run`` across real processes, on SQLite and PostgreSQL.

A worker process runs the billing agent of ``durable/durable_app.py``, whose charge waits
before it posts. This process cancels the run: a live worker obeys at its next lease
renewal (its ``run_agent`` raises ``RunCancelledError``); a worker killed with SIGKILL
before it could obey has its run taken over and cancelled by ``cancel_run``; and a
recovery of a run asked to cancel cancels it instead of continuing it. The charge never
happens, the run ends ``cancelled`` with one ``run.cancelled`` event last, and its
session is free.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fevex import Fevex

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent / "durable"
LEASE_SECONDS = 1.0  # conftest's environment gives the worker this lease
SLOW_CHARGE = {"FEVEX_TEST_TOOL_DELAY": "20"}  # far longer than any wait below
GUARD = 60.0  # seconds; a hang guard, never a timing assertion


def load_app_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("durable_app", HERE / "durable_app.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def start_charging(environment: dict[str, str], app: Fevex) -> tuple[Any, str]:
    """A worker process whose run waits inside its charge, and the run's id."""
    worker = subprocess.Popen(  # noqa: ASYNC220 - read and waited for with timeouts
        [sys.executable, str(HERE / "durable_app.py")],
        env={**environment, **SLOW_CHARGE},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    run_id = (await asyncio.to_thread(worker.stdout.readline)).strip()
    assert run_id.startswith("run_"), worker.stderr.read() if worker.stderr else run_id
    deadline = time.monotonic() + GUARD
    while "tool.started" not in [event.type for event in await app.list_events(run_id)]:
        assert time.monotonic() < deadline, "the worker never started its charge"
        await asyncio.sleep(0.05)
    return worker, run_id


async def assert_cancelled(app: Fevex, run_id: str, service: Any) -> None:
    run = await app.get_run(run_id)
    assert (run.status, run.cancel_requested) == ("cancelled", True), run
    events = await app.list_events(run_id)
    types = [event.type for event in events]
    assert types[-1] == "run.cancelled"
    assert events[-1].payload == {"reason": "aborted"}
    assert types.count("run.cancelled") == 1
    assert "run.recovered" not in types
    assert [event.sequence for event in events] == list(range(1, len(events) + 1))
    assert (await app.get_session(run.session_id)).active_run_id is None
    assert service.requests == {}  # the charge never posted


async def test_a_worker_obeys_a_cancel_requested_from_another_process(
    environment: dict[str, str], service: Any
) -> None:
    app = load_app_module().build_app()
    worker = None
    try:
        worker, run_id = await start_charging(environment, app)

        cancelled = await asyncio.wait_for(app.cancel_run(run_id), GUARD)

        assert cancelled.status == "cancelled"
        out, err = await asyncio.to_thread(worker.communicate, timeout=GUARD)
        # The worker cancelled the run itself: a takeover would have ended it LEASE_LOST.
        assert (worker.returncode, out.split()) == (3, ["error", "RUN_CANCELLED"]), err
        await assert_cancelled(app, run_id, service)
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
        await app.run_store.close()


async def test_cancel_run_takes_over_the_run_of_a_worker_killed_before_it_obeyed(
    environment: dict[str, str], service: Any
) -> None:
    app = load_app_module().build_app()
    try:
        worker, run_id = await start_charging(environment, app)
        worker.send_signal(signal.SIGKILL)
        await asyncio.to_thread(worker.communicate, timeout=GUARD)

        cancelled = await asyncio.wait_for(
            app.cancel_run(run_id, timeout=10 * LEASE_SECONDS), GUARD
        )

        assert cancelled.status == "cancelled"
        await assert_cancelled(app, run_id, service)
    finally:
        await app.run_store.close()


async def test_fevex_recover_cancels_a_run_asked_to_cancel(
    environment: dict[str, str], service: Any, store_url: str
) -> None:
    app = load_app_module().build_app()
    try:
        worker, run_id = await start_charging(environment, app)
        worker.send_signal(signal.SIGKILL)
        await asyncio.to_thread(worker.communicate, timeout=GUARD)
        requested = await app.run_store.request_cancel(run_id)
        assert (requested.status, requested.cancel_requested) == ("running", True)
        await asyncio.sleep(LEASE_SECONDS + 0.2)  # the killed worker's lease expires

        recoverer = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable, "-m", "fevex.cli", "recover", "--app", "durable_app:build_app",
                "--store", store_url,
            ],
            cwd=HERE,
            env={**environment, "FEVEX_TEST_TOOL_DELAY": "0"},
            capture_output=True,
            text=True,
            timeout=GUARD,
        )  # fmt: skip

        assert recoverer.returncode == 0, recoverer.stderr
        reported = [json.loads(line) for line in recoverer.stdout.splitlines() if line.strip()]
        assert [entry["status"] for entry in reported if entry["run_id"] == run_id] == ["cancelled"]
        await assert_cancelled(app, run_id, service)
    finally:
        await app.run_store.close()
