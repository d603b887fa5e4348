"""Ctrl-C under every blocking twin ends the process at once while a synchronous tool
sleeps in its worker thread: the thread is abandoned, the run stored ``cancelled``, one
``KeyboardInterrupt`` raised. Real processes, on a SQLite file and a PostgreSQL server."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Collection
from pathlib import Path

import pytest

from fevex import create_fevex

SCRIPT = Path(__file__).with_name("ctrl_c_app.py")
TWINS = [
    "run_agent",
    "stream_agent",
    "start_agent",
    "run_workflow",
    "stream_workflow",
    "start_workflow",
    "run_team",
    "stream_team",
    "start_team",
    "resume_run",
    "send_event",
    "wake_due_runs",
    "recover_run",
    "recover_expired_runs",
]
# The tool sleeps 20 s; "a second or two", with room for a loaded machine.
PROMPTLY = 5.0


def _default_sigint() -> None:
    """In the child before it starts Python: SIGINT as a terminal's foreground process has it.
    A suite started in the background (``&``, ``nohup``) has SIGINT ignored, which a child
    inherits, and Python then installs no ``KeyboardInterrupt`` handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(twin: str, store_url: str, ready: str, *more: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), twin, store_url, *more],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if line != ready + "\n":
        process.kill()
        _, err = process.communicate()
        raise AssertionError(f"{twin}: {line!r} instead of {ready!r}\n{err}")
    return process


def _leave_a_run_to_recover(store_url: str, before: Collection[str]) -> str:
    """A process that dies (SIGKILL) in a model step: its run waits for recovery."""
    process = _start("hang", store_url, "hanging")
    process.kill()
    process.communicate()
    (left,) = [id for id in asyncio.run(_runs(store_url)) if id not in before]
    return left


async def _runs(store_url: str) -> dict[str, tuple[str, str]]:
    app = create_fevex(run_store=store_url)
    try:
        return {run.id: (run.kind, run.status) for run in await app.list_runs(limit=500)}
    finally:
        await app.close()


@pytest.mark.parametrize("twin", TWINS)
def test_ctrl_c_ends_the_process_at_once_and_cancels_the_run(store_url: str, twin: str) -> None:
    # One PostgreSQL database serves every test: only this test's runs count.
    before = asyncio.run(_runs(store_url))
    more = [_leave_a_run_to_recover(store_url, before)] if twin.startswith("recover") else []
    process = _start(twin, store_url, "started", *more)
    try:
        time.sleep(0.2)  # the tool is in its sleep
        interrupted = time.monotonic()
        process.send_signal(signal.SIGINT)
        try:
            out, err = process.communicate(timeout=PROMPTLY)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        took = time.monotonic() - interrupted
    finally:
        process.kill()
    assert took < PROMPTLY, f"{twin} took {took:.1f} s to exit\n{err}"
    assert process.returncode != 0, out
    assert f"{twin} returned" not in out
    assert err.count("Traceback") == 1, err
    assert err.rstrip().endswith("KeyboardInterrupt"), err
    runs = [run for id, run in asyncio.run(_runs(store_url)).items() if id not in before]
    assert runs, "no run stored"
    assert {status for _, status in runs} == {"cancelled"}, runs
