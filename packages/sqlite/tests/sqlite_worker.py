"""One OS process writing to a shared SQLite run store, for test_sqlite_processes.py.

    python sqlite_worker.py MODE DATABASE START_FILE NAME [ARGUMENT]

The worker opens the store, then waits for START_FILE to exist so that every worker starts
writing at the same moment, and prints one JSON line saying what it did. Modes:

- ``create COUNT``: create COUNT runs on new sessions, commit three steps each, finish them.
- ``bump RUN_ID:OWNER:GENERATION:COMMITS``: land COMMITS commits on one shared run under a
  shared lease, reading its revision and retrying on RUN_CONFLICT (compare-and-set).
- ``claim``: claim expired runs until none is left.
- ``wake``: claim due paused runs until none is left.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from fevex import FevexRunError
from fevex.events import RunEvent
from fevex.runtime import AgentRun, ExecutionCommit, ExecutionCreate, RunLease
from fevex_sqlite import SQLiteRunStore

NOW = "2030-01-01T00:00:00Z"


def event(run_id: str, sequence: int, name: str) -> RunEvent:
    return RunEvent(f"{run_id}-{sequence}", run_id, sequence, "model.started", NOW, {"by": name})


async def create(store: SQLiteRunStore, name: str, count: int) -> dict[str, Any]:
    created = []
    for i in range(count):
        run = AgentRun(
            f"run-{name}-{i}", f"ses-{name}-{i}", "a", "running", i, NOW, NOW, revision=1
        )
        lease = await store.create_execution(
            ExecutionCreate(run, None, (event(run.id, 1, name),), {"step": 0}, name, 60.0)
        )
        for revision in (2, 3, 4):
            await store.commit_execution(
                ExecutionCommit(
                    run.id, revision, NOW, lease, (event(run.id, revision, name),),
                    checkpoint={"step": revision},
                )
            )  # fmt: skip
        await store.commit_execution(
            ExecutionCommit(
                run.id, 5, NOW, lease, (event(run.id, 5, name),), {"status": "completed"},
                history=({"role": "assistant", "content": []},),
                release_session=True, release_lease=True,
            )
        )  # fmt: skip
        created.append(run.id)
    return {"created": created}


async def bump(store: SQLiteRunStore, name: str, argument: str) -> dict[str, Any]:
    run_id, owner, generation, commits = argument.split(":")
    lease = RunLease(owner, int(generation), 0.0)
    landed, conflicts = 0, 0
    while landed < int(commits):
        run = await store.get_run(run_id)
        assert run is not None
        # One event per revision: the next event's sequence is the next revision.
        revision = run.revision + 1
        try:
            await store.commit_execution(
                ExecutionCommit(run_id, revision, NOW, lease, (event(run_id, revision, name),))
            )
        except FevexRunError as error:
            if error.code != "RUN_CONFLICT":
                raise
            conflicts += 1
        else:
            landed += 1
    return {"landed": landed, "conflicts": conflicts}


async def claim(store: SQLiteRunStore, name: str) -> dict[str, Any]:
    claimed = []
    while (found := await store.claim_expired_run(name, 60.0)) is not None:
        claimed.append(found[0])
        # Give the other claimer a chance at the lock between claims.
        await asyncio.sleep(0)
    return {"claimed": claimed}


async def wake(store: SQLiteRunStore, name: str) -> dict[str, Any]:
    claimed = []
    while (found := await store.claim_due_run(name, 60.0)) is not None:
        claimed.append(found[0])
        await asyncio.sleep(0)
    return {"claimed": claimed}


async def work(store: SQLiteRunStore, mode: str, name: str, argument: str) -> dict[str, Any]:
    try:
        if mode == "create":
            return await create(store, name, int(argument))
        if mode == "bump":
            return await bump(store, name, argument)
        if mode == "wake":
            return await wake(store, name)
        return await claim(store, name)
    finally:
        await store.close()


def main(mode: str, database: str, start_file: str, name: str, argument: str) -> None:
    # Opening (and migrating) the file is synchronous; then all workers start together.
    store = SQLiteRunStore(database, busy_timeout=30.0)
    Path(f"{start_file}.{name}.ready").touch()
    while not Path(start_file).exists():
        time.sleep(0.005)
    print(json.dumps(asyncio.run(work(store, mode, name, argument))))


if __name__ == "__main__":
    mode, database, start_file, name, *rest = sys.argv[1:]
    main(mode, database, start_file, name, rest[0] if rest else "")
