"""Recovery across processes: several worker processes claiming orphaned runs from one
database split them, and no run is ever claimed twice."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from fevex import FevexRunError
from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCreate
from fevex_postgres import PostgresRunStore

CLAIMER = """
import asyncio, json, sys
from fevex_postgres import PostgresRunStore

async def main(url, owner):
    store = PostgresRunStore(url, pool_size=2)
    claimed = []
    try:
        while (claim := await store.claim_expired_run(owner, 60.0)) is not None:
            run_id, lease = claim
            claimed.append([run_id, lease.owner, lease.generation])
    finally:
        await store.close()
    print(json.dumps(claimed))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.mark.anyio
async def test_recovery_processes_never_claim_a_run_twice(database_url: str) -> None:
    store = PostgresRunStore(database_url)
    orphans = []
    try:
        for _ in range(60):
            run_id = f"run_{os.urandom(8).hex()}"
            run = AgentRun(
                run_id, f"ses_{os.urandom(8).hex()}", "a", "running", "hi", "t", "t", revision=1
            )
            started = RunEvent(f"evt_{os.urandom(8).hex()}", run_id, 1, "run.started", "t", {})
            # A lease of no seconds has expired as soon as it is granted: an orphan.
            await store.create_execution(ExecutionCreate(run, None, (started,), None, "gone", 0.0))
            orphans.append(run_id)
    finally:
        await store.close()

    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CLAIMER,
            database_url,
            f"recovery-{n}",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for n in range(4)
    ]
    outputs = await asyncio.gather(*(worker.communicate() for worker in workers))
    assert [worker.returncode for worker in workers] == [0] * 4, outputs
    claims = [claim for out, _ in outputs for claim in json.loads(out.decode())]
    claimed_ids = [run_id for run_id, _, _ in claims]
    assert sorted(claimed_ids) == sorted(orphans), "each orphan is claimed exactly once"
    assert {generation for _, _, generation in claims} == {2}

    # The claimed leases are live: nobody else can take those runs now.
    check = PostgresRunStore(database_url)
    try:
        for run_id in orphans[:5]:
            with pytest.raises(FevexRunError) as raised:
                await check.acquire_lease(run_id, "late", 1.0)
            assert raised.value.code == "RUN_CONFLICT"
        assert await check.claim_expired_run("late", 1.0) is None
    finally:
        await check.close()
