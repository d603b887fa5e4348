"""The same durable scenarios on SQLite and PostgreSQL, across real processes: a run that
waits for approval in one process is approved and resumed in another, and the credential
its tool used is found nowhere in the bytes the store keeps."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent / "durable"
SENTINEL = "sk-live-SENTINEL-7d1e0c55"


def load_app_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("durable_app", HERE / "durable_app.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_approve_in_one_process_resume_in_another(
    environment: dict[str, str],
    service: Any,
    store_url: str,
    monkeypatch: pytest.MonkeyPatch,
    stored_bytes: Any,
) -> None:
    extra = {"FEVEX_TEST_APPROVAL": "1", "FEVEX_TEST_SECRET": SENTINEL}
    for name, value in extra.items():
        monkeypatch.setenv(name, value)
    worker = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(HERE / "durable_app.py")],
        env={**environment, **extra},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    paused = worker.stdout.split()[2]
    run_id = worker.stdout.split()[0]
    assert worker.stdout.split()[1] == "paused"
    assert service.requests == {}

    app = load_app_module().build_app()
    run = await app.get_run(run_id)
    assert run.status == "paused"
    assert run.pause["approvals"][0]["id"] == paused
    result = await app.resume_run(
        run_id,
        {
            "type": "approval",
            "approval_id": paused,
            "decision": "approve",
            "actor": {"id": "reviewer-42"},
        },
    )
    assert result.output == "Charged."
    assert service.applied[f"fevex:{run_id}:call-1"] == 1
    assert service.authorizations == [f"Bearer {SENTINEL}"]
    types = [event.type for event in await app.list_events(run_id)]
    assert types.count("run.paused") == 1
    assert types[-1] == "run.completed"
    await app.run_store.close()
    kept = await asyncio.to_thread(stored_bytes, store_url)
    assert run_id.encode() in kept  # the scan does see what the store holds
    assert SENTINEL.encode() not in kept


async def test_follow_events_follows_a_run_in_another_process(
    environment: dict[str, str], service: Any, store_url: str
) -> None:
    worker = subprocess.Popen(  # noqa: ASYNC220 - waited for below, with a timeout
        [sys.executable, str(HERE / "durable_app.py")],
        env={**environment, "FEVEX_TEST_TOOL_DELAY": "0.3"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    app = load_app_module().build_app()
    try:
        assert worker.stdout is not None
        run_id = (await asyncio.to_thread(worker.stdout.readline)).strip()
        followed = [
            event async for event in app.follow_events(run_id, poll_interval=0.05, page_size=3)
        ]
        await asyncio.to_thread(worker.communicate, timeout=60)
        assert worker.returncode == 0
        stored = await app.list_events(run_id)
        assert [e.id for e in followed] == [e.id for e in stored]
        assert [e.sequence for e in followed] == list(range(1, len(stored) + 1))
        assert followed[-1].type == "run.completed"
    finally:
        if worker.poll() is None:
            worker.kill()
        await app.run_store.close()
