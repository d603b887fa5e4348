"""Make ``fixtures/v1_runs.db``: a SQLite file written by fevex as released before run
records had a name, a version, a run tree and a context (commit 4eb9cf4, schema version 1,
checkpoint version 1). ``test_sqlite_upgrade.py`` upgrades a copy of it with the current
code; this script only documents how the file was made, and the tests never run it.

The app below is the one the test continues the runs with: the same code, only fevex
changed underneath it, as in a real upgrade. The script must run on the old code::

    git archive 4eb9cf4 packages | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/packages/core/src:/tmp/old/packages/sqlite/src \\
        python packages/sqlite/tests/make_v1_fixture.py packages/sqlite/tests/fixtures/v1_runs.db

It leaves two runs of the agent ``support`` in the file:

- a paused run (input ``"Refund 30 to account 42."``) waiting for the approval of its
  ``refund`` call (the tool has ``approval="required"``);
- an orphaned running run (input ``"Look up account 42."``): a worker process started it
  and was killed with SIGKILL while the keyed ``lookup`` tool was in flight, so its 1 s
  lease expired with nobody to renew it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from fevex import Fevex, RunPausedError, ToolContext, create_fevex, define_agent, define_tool
from fevex.models import Completed, ModelInput, ModelResult, OutputDelta, ToolCall
from fevex.runtime import RunStore
from fevex_sqlite import SQLiteRunStore

PAUSED_INPUT = "Refund 30 to account 42."
ORPHANED_INPUT = "Look up account 42."


class Account(BaseModel):
    account: int


class Refund(BaseModel):
    account: int
    amount: int


class SupportModel:
    """Deterministic: asks for the tool the request names, then answers with its result."""

    async def stream(self, input: ModelInput) -> AsyncIterator[Any]:
        last = input.messages[-1]
        if last.role == "tool":
            answer = f"Done: {json.dumps(last.tool_results[0].output, sort_keys=True)}"
            yield OutputDelta(answer)
            yield Completed(ModelResult(output=answer))
        elif last.text.startswith("Refund"):
            call = ToolCall("call-refund", "refund", {"account": 42, "amount": 30})
            yield Completed(ModelResult(tool_calls=[call]))
        else:
            yield Completed(
                ModelResult(tool_calls=[ToolCall("call-lookup", "lookup", {"account": 42})])
            )


def build_app(
    run_store: RunStore | str, *, hold: Path | None = None, calls: list[str] | None = None
) -> Fevex:
    """The support app. ``lookup`` appends its idempotency key to ``calls``; with ``hold``,
    it writes its key there and never returns (the worker is killed meanwhile)."""

    async def refund(request: Refund) -> dict[str, Any]:
        return {"refunded": request.amount}

    async def lookup(request: Account, context: ToolContext) -> dict[str, Any]:
        key = context.idempotency_key or ""
        if calls is not None:
            calls.append(key)
        if hold is not None:
            await asyncio.to_thread(hold.write_text, key)
            await asyncio.Event().wait()
        return {"account": request.account, "status": "active"}

    tools = [
        define_tool(name="refund", description="Refund.", approval="required")(refund),
        define_tool(name="lookup", description="Look up.", idempotency="keyed")(lookup),
    ]
    return create_fevex(
        models={"default": SupportModel()},
        agents=[define_agent(name="support", instructions="Help.", tools=["refund", "lookup"])],
        tools=tools,
        run_store=run_store,
        lease_seconds=1.0,
    )


async def _pause(database: Path) -> None:
    app = build_app(SQLiteRunStore(database))
    try:
        await app.run_agent("support", PAUSED_INPUT)
    except RunPausedError as paused:
        print(f"paused {paused.run_id}")
    else:
        raise SystemExit("the refund did not wait for approval")
    finally:
        await app.close()


async def _work(database: Path, hold: Path) -> None:
    app = build_app(SQLiteRunStore(database), hold=hold)
    await app.run_agent("support", ORPHANED_INPUT)


def _orphan(database: Path) -> None:
    hold = database.with_suffix(".holding")
    worker = subprocess.Popen([sys.executable, __file__, "--work", str(database), str(hold)])
    deadline = time.monotonic() + 60
    while not hold.exists():
        if time.monotonic() > deadline or worker.poll() is not None:
            worker.kill()
            raise SystemExit("the worker never reached the lookup tool")
        time.sleep(0.05)
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    print(f"orphaned while calling lookup with key {hold.read_text()}")
    hold.unlink()
    time.sleep(1.5)  # past the lease


def main(database: Path) -> None:
    if database.exists():
        raise SystemExit(f"{database} exists; remove it first")
    store = SQLiteRunStore(database)
    if store.schema_version != 1:
        raise SystemExit("run this on the fevex of commit 4eb9cf4 (schema version 1)")
    asyncio.run(store.close())
    asyncio.run(_pause(database))
    _orphan(database)
    # Fold the write-ahead log into the file: the fixture is one file.
    with closing(sqlite3.connect(database)) as raw:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for suffix in ("-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)


if __name__ == "__main__":
    if sys.argv[1] == "--work":
        asyncio.run(_work(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        main(Path(sys.argv[1]).resolve())
