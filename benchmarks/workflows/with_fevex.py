"""fevex's side of the workflow benchmark: a ``define_workflow`` of five ``step.run`` steps,
on fevex-sqlite (a file) or fevex-postgres.

The resume scenario's step 4 is ``step.wait_for_event("s4", "go")``: ``start_workflow``
returns once the run is paused there (checkpointed), and ``send_event`` delivers the event
and continues the run to its end, returning its ``RunResult``.

If this checkout's fevex has no workflows yet (``from fevex import define_workflow`` fails),
the script prints a result that says so and exits 0, so that the peers still report.

Needs fevex with ``packages/core``, ``packages/sqlite`` and ``packages/postgres`` installed.
Run with ``python -m benchmarks.workflows.with_fevex --store sqlite --directory /tmp/fevex``.
"""

from __future__ import annotations

import asyncio
import sys
from importlib import metadata
from typing import Any

from benchmarks.workflows import scenario

UNAVAILABLE = "fevex: workflows API not available yet"
PAUSE_POLLS = 10_000

try:
    # At module level: define_workflow reads the step functions' annotations from here.
    from fevex import WorkflowStep, create_fevex, define_workflow
except ImportError as error:
    MISSING: ImportError | None = error
else:
    MISSING = None


def main(argv: list[str] | None = None) -> None:
    arguments = scenario.arguments(__doc__.splitlines()[0], argv)
    versions = {name: _version(name) for name in ("fevex", "fevex-sqlite", "fevex-postgres")}
    if MISSING is not None:
        print(f"{UNAVAILABLE} ({MISSING})", file=sys.stderr)
        scenario.emit("fevex", arguments, versions, {"skipped": UNAVAILABLE})
        return
    commits = None
    if arguments.mode == "count" and arguments.store == "sqlite":
        commits = scenario.SqliteCommits().install()
    body = asyncio.run(run(arguments, commits))
    scenario.emit("fevex", arguments, versions, body)


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


async def run(arguments: Any, commits: Any) -> dict[str, Any]:
    @define_workflow(name="five", version="1")
    async def five(step: WorkflowStep, input: dict[str, Any]) -> dict[str, Any]:
        a = await step.run("s1", lambda: scenario.step_value(1))
        b = await step.run("s2", lambda: scenario.step_value(2))
        c = await step.run("s3", lambda: scenario.step_value(3))
        d = await step.run("s4", lambda: scenario.step_value(4))
        e = await step.run("s5", lambda: scenario.step_value(5))
        return scenario.total(a, b, c, d, e)

    @define_workflow(name="five_waiting", version="1", events={scenario.EVENT: dict})
    async def five_waiting(step: WorkflowStep, input: dict[str, Any]) -> dict[str, Any]:
        a = await step.run("s1", lambda: scenario.step_value(1))
        b = await step.run("s2", lambda: scenario.step_value(2))
        c = await step.run("s3", lambda: scenario.step_value(3))
        event = await step.wait_for_event("s4", scenario.EVENT)
        e = await step.run("s5", lambda: scenario.step_value(5))
        # The waiting step receives the delivery: payload, actor, received_at.
        payload = event["payload"] if isinstance(event, dict) else event.payload
        return scenario.total(a, b, c, scenario.resumed_value(payload), e)

    if arguments.store == "sqlite":
        url = f"sqlite:///{scenario.sqlite_path(arguments, 'fevex')}"
    else:
        url = arguments.postgres_url
    app = create_fevex(workflows=[five, five_waiting], run_store=url)
    if arguments.store == "postgres":
        # A fresh database: apply the schema, as `fevex db upgrade` would (SQLite's store
        # creates its tables when it opens the file).
        await app.run_store.upgrade_schema()  # type: ignore[attr-defined]

    async def run_one() -> Any:
        return (await app.run_workflow(five, {})).output

    async def start_paused() -> Any:
        # start_workflow returns at once; the run goes on in the background to its wait.
        run_id = (await app.start_workflow(five_waiting, {})).id
        for _ in range(PAUSE_POLLS):
            if (await app.get_run(run_id)).status == "paused":
                return run_id
            await asyncio.sleep(0.001)
        raise RuntimeError(f"run {run_id} never paused at step 4")

    async def resume(run_id: Any) -> Any:
        return (await app.send_event(run_id, scenario.EVENT, scenario.EVENT_PAYLOAD)).output

    workflows = scenario.Workflows(run=run_one, start_paused=start_paused, resume=resume)
    try:
        if arguments.mode == "count":
            return await scenario.count(workflows, commits, arguments.workflows)
        return await scenario.measure(workflows)
    finally:
        await app.close()


if __name__ == "__main__":
    main()
