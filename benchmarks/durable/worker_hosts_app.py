"""The app each host's ``fevex worker`` serves in the workers-as-hosts benchmark and test.

A job is a workflow, ``job``: it sleeps ``input["delay"]`` seconds (a durable timer, so the
process that starts it returns at once and the job waits in the store until a worker's
wake-up pass claims it) and then runs the agent ``clerk`` as its child run. The clerk's
scripted model asks for one call of ``record_effect`` and then answers; the tool is not
idempotent (no ``idempotency="keyed"``), and each call appends one line to its own file
``<run id>.<call id>`` in ``FEVEX_HOSTS_EFFECTS``: its effect, outside fevex, where repeats
can be counted. It sleeps ``FEVEX_HOSTS_TOOL_DELAY`` seconds before and after the effect.
With ``FEVEX_HOSTS_HOLD`` set (a folder), while a file named after this host is in it, each
call stops right after its effect, first touching ``<host>.<run id>`` there, until that file
is gone (at most ``HOLD_SECONDS``): the test cuts a host off while it is surely inside the
tool, however slowly the machine answers.

With ``FEVEX_HOSTS_LOG`` set (a folder), the store writes what this process asked of it to
``<host>-<pid>.jsonl`` there, one JSON object a line: each lease it took (``op`` "lease"),
and each commit and renewal it attempted, once when it starts (``op`` "commit"/"renew") and
once when it ends (``op`` "done", with ``outcome`` "ok" or the error's code, and as
``cause`` the type and first line of the driver's error under it), with the
run, the lease's generation, the events' ids and ``time.time()``. The test reads these to
tell which process wrote which event. ``FEVEX_HOSTS_NAME`` names the host;
``FEVEX_HOSTS_LEASE_SECONDS`` is the app's lease; the store is ``FEVEX_RUN_STORE``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
from collections.abc import AsyncIterator, Collection
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from fevex import (
    Fevex,
    ToolContext,
    WorkflowStep,
    create_fevex,
    define_agent,
    define_tool,
    define_workflow,
)
from fevex.errors import FevexError
from fevex.models import Completed, ModelInput, ModelResult, OutputDelta, ToolCall
from fevex.runtime import ExecutionCommit, ExecutionCreate, RunLease, RunTakeover
from fevex_postgres import PostgresRunStore

AGENT = "clerk"
WORKFLOW = "job"
ANSWER = "Recorded."
HOLD_SECONDS = 60.0


class Entry(BaseModel):
    job: str


async def record_effect(entry: Entry, context: ToolContext) -> dict[str, Any]:
    delay = float(os.environ.get("FEVEX_HOSTS_TOOL_DELAY", "0"))
    await asyncio.sleep(delay)
    effects = Path(os.environ["FEVEX_HOSTS_EFFECTS"])
    line = f"{os.environ.get('FEVEX_HOSTS_NAME', 'local')} {os.getpid()} {time.time():.6f}\n"
    # One write of a few bytes to a local file: O_APPEND keeps each line whole.
    descriptor = os.open(
        effects / f"{context.run_id}.{context.tool_call_id}",
        os.O_WRONLY | os.O_CREAT | os.O_APPEND,
        0o644,
    )
    try:
        os.write(descriptor, line.encode())
    finally:
        os.close(descriptor)
    if hold := os.environ.get("FEVEX_HOSTS_HOLD"):
        await _wait_while_held(Path(hold), context.run_id)
    await asyncio.sleep(delay)
    return {"job": entry.job, "recorded": True}


async def _wait_while_held(folder: Path, run_id: str) -> None:
    gate = folder / os.environ.get("FEVEX_HOSTS_NAME", "local")
    if not gate.exists():
        return
    (folder / f"{gate.name}.{run_id}").touch()
    deadline = time.monotonic() + HOLD_SECONDS
    # The gate is a file the test, another process, removes: polled, as no event can be.
    while gate.exists() and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.01)


class ClerkModel:
    """Asks for one ``record_effect`` call, then answers once its result is there."""

    async def stream(self, input: ModelInput) -> AsyncIterator[Any]:
        if input.messages[-1].role == "tool":
            yield OutputDelta(ANSWER)
            yield Completed(ModelResult(output=ANSWER))
        else:
            call = ToolCall("call-1", "record_effect", {"job": "entry"})
            yield Completed(ModelResult(tool_calls=[call]))


@define_workflow(name=WORKFLOW, version="1")
async def job(step: WorkflowStep, input: dict[str, Any]) -> Any:
    await step.sleep("queued", float(input["delay"]))
    done = await step.agent("work", AGENT, input=f"Record job {input['job']}.")
    return done.output


class LoggedPostgresRunStore(PostgresRunStore):
    """The PostgreSQL store, writing what this process asks of it to a log (see the
    module's documentation)."""

    def __init__(self, url: str, log: Path, host: str) -> None:
        super().__init__(url)
        self._log = open(log / f"{host}-{os.getpid()}.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self._attempts = itertools.count(1)

    def _write(self, **entry: Any) -> None:
        # A line of a hundred bytes, written at once: the test reads it while we run.
        self._log.write(json.dumps(entry) + "\n")
        self._log.flush()

    def _leased(self, via: str, run_id: str, lease: RunLease, start: float) -> None:
        self._write(
            op="lease", via=via, run=run_id, owner=lease.owner, gen=lease.generation,
            start=start, end=time.time(),
        )  # fmt: skip

    async def _attempt(self, op: str, run_id: str, lease: RunLease, call: Any, **more: Any) -> Any:
        number = next(self._attempts)
        self._write(
            op=op, n=number, run=run_id, owner=lease.owner, gen=lease.generation,
            start=time.time(), **more,
        )  # fmt: skip
        outcome, cause = "ok", None
        try:
            return await call
        except FevexError as error:
            outcome, cause = error.code, _cause(error)
            raise
        except BaseException as error:
            outcome = type(error).__name__
            raise
        finally:
            self._write(op="done", n=number, outcome=outcome, cause=cause, end=time.time())

    async def create_execution(self, create: ExecutionCreate) -> RunLease:
        start = time.time()
        events = [event.id for event in create.events]
        number = next(self._attempts)
        types = [event.type for event in create.events]
        self._write(
            op="create", n=number, run=create.run.id, events=events, types=types, start=start
        )
        outcome, cause = "ok", None
        try:
            lease = await super().create_execution(create)
        except FevexError as error:
            outcome, cause = error.code, _cause(error)
            raise
        except BaseException as error:
            outcome = type(error).__name__
            raise
        finally:
            self._write(op="done", n=number, outcome=outcome, cause=cause, end=time.time())
        self._leased("create", create.run.id, lease, start)
        return lease

    async def commit_execution(self, commit: ExecutionCommit) -> None:
        await self._attempt(
            "commit", commit.run_id, commit.lease, super().commit_execution(commit),
            events=[event.id for event in commit.events],
            types=[event.type for event in commit.events],
            release=commit.release_lease,
        )  # fmt: skip

    async def renew_lease(self, run_id: str, lease: RunLease, seconds: float) -> RunLease:
        renewed: RunLease = await self._attempt(
            "renew", run_id, lease, super().renew_lease(run_id, lease, seconds)
        )
        return renewed

    async def claim_due_run(
        self, owner: str, seconds: float, *, names: Collection[str] | None = None
    ) -> tuple[str, RunLease] | None:
        start = time.time()
        claimed = await super().claim_due_run(owner, seconds, names=names)
        if claimed is not None:
            self._leased("claim_due", claimed[0], claimed[1], start)
        return claimed

    async def claim_expired_run(
        self, owner: str, seconds: float, *, names: Collection[str] | None = None
    ) -> tuple[str, RunLease] | None:
        start = time.time()
        claimed = await super().claim_expired_run(owner, seconds, names=names)
        if claimed is not None:
            self._leased("claim_expired", claimed[0], claimed[1], start)
        return claimed

    async def take_over_run(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunTakeover:
        start = time.time()
        taken = await super().take_over_run(run_id, owner, seconds, status=status)
        self._leased("take_over", run_id, taken.lease, start)
        return taken

    async def acquire_lease(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunLease:
        start = time.time()
        lease = await super().acquire_lease(run_id, owner, seconds, status=status)
        self._leased("acquire", run_id, lease, start)
        return lease

    async def close(self) -> None:
        await super().close()
        self._log.close()


def build_app(
    store_url: str | None = None,
    *,
    log: str | None = None,
    host: str | None = None,
    lease_seconds: float | None = None,
) -> Fevex:
    """The app; each argument left out is read from the environment (see above)."""
    url = store_url or os.environ["FEVEX_RUN_STORE"]
    log = log or os.environ.get("FEVEX_HOSTS_LOG")
    host = host or os.environ.get("FEVEX_HOSTS_NAME", "local")
    store = LoggedPostgresRunStore(url, Path(log), host) if log else PostgresRunStore(url)
    if lease_seconds is None:
        lease_seconds = float(os.environ.get("FEVEX_HOSTS_LEASE_SECONDS", "2"))
    tool = define_tool(name="record_effect", description="Record the entry once.")(record_effect)
    return create_fevex(
        models={"default": ClerkModel()},
        agents=[define_agent(name=AGENT, instructions="Record.", tools=["record_effect"])],
        tools=[tool],
        workflows=[job],
        run_store=store,
        lease_seconds=lease_seconds,
    )


def _cause(error: BaseException) -> str | None:
    """What a store error came from: the driver's error type and the first line of its text."""
    cause = error.__cause__
    if cause is None:
        return None
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0] if lines else ''}"
