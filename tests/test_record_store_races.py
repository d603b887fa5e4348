"""Compare-and-swap raced by real processes on one SQLite file and one PostgreSQL database:
exactly one swap wins each revision, and the record holds every winner in order."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

from fevex.plugins import reset_plugins
from fevex.plugins.discovery import open_record_store
from fevex.runtime import StoredRecord

RACER = Path(__file__).with_name("record_racer.py")
RACERS = 8
SWAPS = 200


def test_one_winner_per_revision_across_processes(store_url: str, tmp_path: Path) -> None:
    namespace, key = f"race-{uuid.uuid4().hex[:8]}", "family"
    go = tmp_path / "go"
    racers = [
        subprocess.Popen(
            [sys.executable, str(RACER), store_url, namespace, key, f"r{n}", str(SWAPS), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(RACERS)
    ]
    for racer in racers:
        assert racer.stdout is not None
        assert racer.stdout.readline() == "ready\n", racer.communicate(timeout=60)[1]
    go.touch()
    reports = []
    for racer in racers:
        out, err = racer.communicate(timeout=240)
        assert racer.returncode == 0, err
        reports.append(json.loads(out))

    record = asyncio.run(read_record(store_url, namespace, key))
    assert record is not None
    assert record.revision == SWAPS
    winners = record.value["winners"]
    assert len(winners) == SWAPS
    # Every revision was won by exactly one racer, the one whose id the record holds there.
    won = sorted(revision for report in reports for revision in report["won"])
    assert won == list(range(1, SWAPS + 1))
    for report in reports:
        for revision in report["won"]:
            assert winners[revision - 1] == report["racer"]
    # They raced: more than one process won, and some swaps were refused.
    assert sum(1 for report in reports if report["won"]) > 1
    assert sum(report["refused"] for report in reports) > 0


async def read_record(url: str, namespace: str, key: str) -> StoredRecord | None:
    reset_plugins()
    store = open_record_store(url)
    try:
        return await store.read(namespace, key)
    finally:
        await store.close()
