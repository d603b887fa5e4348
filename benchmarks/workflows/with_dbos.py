"""DBOS Transact's side of the workflow benchmark: five ``@DBOS.step()`` functions in an async
``@DBOS.workflow()``, with DBOS's system database on SQLite or PostgreSQL.

The resume scenario's step 4 is ``DBOS.recv_async("go")``; the benchmark delivers the event
with ``DBOS.send_async(workflow_id, payload, topic="go")`` and awaits the handle's result. A
DBOS workflow waiting in ``recv`` stays in this process (DBOS recovers it from the system
database after a restart). On PostgreSQL ``recv`` is woken by LISTEN/NOTIFY; on SQLite it
polls, every ``notification_listener_polling_interval_sec`` (variant ``default``: DBOS's
default, 1 s; variant ``poll-10ms``: 0.01 s).

Needs ``benchmarks/requirements/dbos.txt``. Run with ``python -m
benchmarks.workflows.with_dbos --store sqlite --directory /tmp/dbos``.
"""

from __future__ import annotations

import asyncio
import logging
from importlib import metadata
from typing import Any

from benchmarks.workflows import scenario

POLLING = {"default": None, "poll-10ms": 0.01}
STEPS_BEFORE_WAIT = 3


def main(argv: list[str] | None = None) -> None:
    arguments = scenario.arguments(__doc__.splitlines()[0], argv)
    if arguments.variant not in POLLING:
        raise SystemExit(f"unknown DBOS variant {arguments.variant!r}; choose from {list(POLLING)}")
    commits = None
    if arguments.mode == "count" and arguments.store == "sqlite":
        commits = scenario.SqliteCommits().install()

    from dbos import DBOS, DBOSConfig

    url = (
        f"sqlite:///{scenario.sqlite_path(arguments, 'dbos')}"
        if arguments.store == "sqlite"
        else arguments.postgres_url
    )
    config: DBOSConfig = {
        "name": "fevex-bench",
        "system_database_url": url,
        "log_level": "WARNING",
        "enable_otlp": False,
    }
    polling = POLLING[arguments.variant]
    if polling is not None:
        config["notification_listener_polling_interval_sec"] = polling
    DBOS(config=config)

    @DBOS.step()
    async def s1() -> dict[str, int]:
        return scenario.step_value(1)

    @DBOS.step()
    async def s2() -> dict[str, int]:
        return scenario.step_value(2)

    @DBOS.step()
    async def s3() -> dict[str, int]:
        return scenario.step_value(3)

    @DBOS.step()
    async def s4() -> dict[str, int]:
        return scenario.step_value(4)

    @DBOS.step()
    async def s5() -> dict[str, int]:
        return scenario.step_value(5)

    @DBOS.workflow()
    async def five(_input: dict[str, Any]) -> dict[str, int]:
        return scenario.total(await s1(), await s2(), await s3(), await s4(), await s5())

    @DBOS.workflow()
    async def five_waiting(_input: dict[str, Any]) -> dict[str, int]:
        a, b, c = await s1(), await s2(), await s3()
        event = await DBOS.recv_async(scenario.EVENT, timeout_seconds=60)
        return scenario.total(a, b, c, scenario.resumed_value(event), await s5())

    async def run() -> Any:
        return await five({})

    async def start_paused() -> Any:
        handle = await DBOS.start_workflow_async(five_waiting, {})
        workflow_id = handle.get_workflow_id()
        # Paused means steps 1-3 are recorded and the workflow is inside recv.
        for _ in range(2000):
            steps = await DBOS.list_workflow_steps_async(workflow_id, load_output=False)
            if len(steps) >= STEPS_BEFORE_WAIT:
                break
            await asyncio.sleep(0.005)
        else:
            raise RuntimeError(f"workflow {workflow_id} never reached step 4")
        await asyncio.sleep(0.05)
        return handle

    async def resume(handle: Any) -> Any:
        await DBOS.send_async(
            handle.get_workflow_id(), scenario.EVENT_PAYLOAD, topic=scenario.EVENT
        )
        return await handle.get_result()

    workflows = scenario.Workflows(run=run, start_paused=start_paused, resume=resume)

    async def measure() -> dict[str, Any]:
        if arguments.mode == "count":
            return await scenario.count(workflows, commits, arguments.workflows)
        return await scenario.measure(workflows)

    DBOS.launch()
    try:
        body = asyncio.run(measure())
    finally:
        DBOS.destroy()
    versions = {name: metadata.version(name) for name in ("dbos", "SQLAlchemy", "psycopg")}
    scenario.emit("dbos", arguments, versions, body)


if __name__ == "__main__":
    logging.getLogger("dbos").setLevel(logging.WARNING)
    main()
