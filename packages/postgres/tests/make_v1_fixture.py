"""Make ``fixtures/v1_runs.sql``: a plain-SQL ``pg_dump`` of a PostgreSQL database written by
fevex as released before run records had a name, a version, a run tree and a context
(commit 4eb9cf4, schema version 1, checkpoint version 1). ``test_upgrade_v1.py`` restores
it into an empty database, upgrades it with ``fevex db upgrade`` and continues its runs with
the current code; this script only documents how the dump was made, and the tests never
run it.

The app below is the one the test continues the runs with: the same code, only fevex
changed underneath it, as in a real upgrade. The script must run on the old code, with the
PostgreSQL server programs installed (it starts a throwaway server, as the tests do)::

    git archive 4eb9cf4 packages | tar -x -C /tmp/old
    cd packages/postgres/tests
    PYTHONPATH=/tmp/old/packages/core/src:/tmp/old/packages/postgres/src \\
        python make_v1_fixture.py fixtures/v1_runs.sql

It leaves two runs of the agent ``support`` in the database:

- a paused run (input ``"Refund 30 to account 42."``) waiting for the approval of its
  ``refund`` call (the tool has ``approval="required"``);
- an orphaned running run (input ``"Look up account 42."``): a worker process started it
  and was killed with SIGKILL while the keyed ``lookup`` tool was in flight, so its 1 s
  lease expired with nobody to renew it.

The dump is ``pg_dump --no-owner --no-privileges --no-comments --column-inserts``: plain
``CREATE`` and ``INSERT`` statements (pg_dump 15.14 and later also write the psql
commands ``\\restrict`` and ``\\unrestrict``, which a loader without psql skips).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from sqlalchemy.engine import make_url

from fevex import Fevex, RunPausedError, ToolContext, create_fevex, define_agent, define_tool
from fevex.models import Completed, ModelInput, ModelResult, OutputDelta, ToolCall
from fevex.runtime import RunStore
from fevex_postgres import PostgresRunStore
from fevex_postgres.testing import find_postgres_bin, postgres_server

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


async def _pause(url: str) -> None:
    app = build_app(PostgresRunStore(url))
    try:
        await app.run_agent("support", PAUSED_INPUT)
    except RunPausedError as paused:
        print(f"paused {paused.run_id}")
    else:
        raise SystemExit("the refund did not wait for approval")
    finally:
        await app.close()


async def _work(url: str, hold: Path) -> None:
    app = build_app(PostgresRunStore(url), hold=hold)
    await app.run_agent("support", ORPHANED_INPUT)


def _orphan(url: str, hold: Path) -> None:
    worker = subprocess.Popen([sys.executable, __file__, "--work", url, str(hold)])
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
    time.sleep(1.5)  # past the lease, by the database's clock too


async def _upgrade(url: str) -> None:
    store = PostgresRunStore(url)
    try:
        done = await store.upgrade_schema()
    finally:
        await store.close()
    if done.version != 1:
        raise SystemExit("run this on the fevex of commit 4eb9cf4 (schema version 1)")


def main(dump: Path) -> None:
    if dump.exists():
        raise SystemExit(f"{dump} exists; remove it first")
    with postgres_server() as url:
        asyncio.run(_upgrade(url))
        asyncio.run(_pause(url))
        _orphan(url, dump.with_suffix(".holding"))
        libpq = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        subprocess.run(
            [
                str(find_postgres_bin() / "pg_dump"),
                "--no-owner",
                "--no-privileges",
                "--no-comments",
                "--column-inserts",
                "--file",
                str(dump),
                libpq,
            ],
            check=True,
        )


if __name__ == "__main__":
    if sys.argv[1] == "--work":
        asyncio.run(_work(sys.argv[2], Path(sys.argv[3])))
    else:
        main(Path(sys.argv[1]).resolve())
