"""LangGraph's side of the workflow benchmark: its functional API, five async ``@task``
functions called from an ``@entrypoint``, checkpointed by ``AsyncSqliteSaver`` (a file) or
``AsyncPostgresSaver``; or, in the ``blocking`` variants, five plain ``@task`` functions run
by ``invoke`` and checkpointed by the blocking ``SqliteSaver`` or ``PostgresSaver``, its
fastest setup (nothing crosses an event loop).

Each workflow is a new ``thread_id``. The resume scenario's step 4 is ``interrupt("go")``:
the invocation returns with the workflow checkpointed, and the benchmark resumes it with
``ainvoke(Command(resume=payload), config)``, which replays the entrypoint (tasks 1-3
return their checkpointed results) and runs step 5. The variant is LangGraph's
``durability`` (``async``, its default: a step's checkpoint is written while the next step
runs; ``sync``: before the next step starts); ``blocking`` and ``blocking-sync`` are the same
two with the blocking savers.

Needs ``benchmarks/requirements/langgraph-workflows.txt``. Run with ``python -m
benchmarks.workflows.with_langgraph --store sqlite --directory /tmp/langgraph``.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from importlib import metadata
from typing import Any

from benchmarks.workflows import scenario

# --variant: LangGraph's durability, with the async savers or (blocking-) the blocking ones.
VARIANTS = {
    "default": ("async", False),
    "sync": ("sync", False),
    "blocking": ("async", True),
    "blocking-sync": ("sync", True),
}


def main(argv: list[str] | None = None) -> None:
    arguments = scenario.arguments(__doc__.splitlines()[0], argv)
    if arguments.variant not in VARIANTS:
        raise SystemExit(f"unknown variant {arguments.variant!r}; choose from {list(VARIANTS)}")
    durability, blocking = VARIANTS[arguments.variant]
    commits = None
    if arguments.mode == "count" and arguments.store == "sqlite":
        commits = scenario.SqliteCommits().install()
    workflows = run_blocking if blocking else run
    body = asyncio.run(workflows(arguments, durability, commits))
    names = [
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-sqlite",
        "langgraph-checkpoint-postgres",
        "aiosqlite",
        "psycopg",
    ]
    scenario.emit("langgraph", arguments, {name: metadata.version(name) for name in names}, body)


@contextlib.asynccontextmanager
async def open_saver(arguments: Any) -> AsyncIterator[Any]:
    if arguments.store == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        path = scenario.sqlite_path(arguments, "langgraph")
        async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
            await saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        url = scenario.libpq_url(arguments.postgres_url)
        async with AsyncPostgresSaver.from_conn_string(url) as saver:
            await saver.setup()
            yield saver


@contextlib.contextmanager
def open_blocking_saver(arguments: Any) -> Iterator[Any]:
    if arguments.store == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = scenario.sqlite_path(arguments, "langgraph")
        with SqliteSaver.from_conn_string(str(path)) as saver:
            saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        url = scenario.libpq_url(arguments.postgres_url)
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            yield saver


async def run_blocking(arguments: Any, durability: Any, commits: Any) -> dict[str, Any]:
    """The scenario with plain functions and a blocking saver: each workflow is one blocking
    ``invoke``, called from the benchmark's coroutines (one workflow at a time, so nothing
    else waits on the loop meanwhile)."""
    from langgraph.func import entrypoint, task
    from langgraph.types import Command, interrupt

    @task
    def s1() -> dict[str, int]:
        return scenario.step_value(1)

    @task
    def s2() -> dict[str, int]:
        return scenario.step_value(2)

    @task
    def s3() -> dict[str, int]:
        return scenario.step_value(3)

    @task
    def s4() -> dict[str, int]:
        return scenario.step_value(4)

    @task
    def s5() -> dict[str, int]:
        return scenario.step_value(5)

    with open_blocking_saver(arguments) as saver:

        @entrypoint(checkpointer=saver)
        def five(_input: dict[str, Any]) -> dict[str, int]:
            # One step after another, as the async side awaits them.
            a, b, c, d = s1().result(), s2().result(), s3().result(), s4().result()
            return scenario.total(a, b, c, d, s5().result())

        @entrypoint(checkpointer=saver)
        def five_waiting(_input: dict[str, Any]) -> dict[str, int]:
            a, b, c = s1().result(), s2().result(), s3().result()
            event = interrupt(scenario.EVENT)
            return scenario.total(a, b, c, scenario.resumed_value(event), s5().result())

        def config() -> Any:
            return {"configurable": {"thread_id": str(uuid.uuid4())}}

        async def run_one() -> Any:
            return five.invoke({}, config(), durability=durability)

        async def start_paused() -> Any:
            thread = config()
            paused = five_waiting.invoke({}, thread, durability=durability)
            if "__interrupt__" not in paused:
                raise RuntimeError(f"the workflow did not pause at step 4: {paused!r}")
            return thread

        async def resume(thread: Any) -> Any:
            command = Command(resume=scenario.EVENT_PAYLOAD)
            return five_waiting.invoke(command, thread, durability=durability)

        workflows = scenario.Workflows(run=run_one, start_paused=start_paused, resume=resume)
        if arguments.mode == "count":
            return await scenario.count(workflows, commits, arguments.workflows)
        return await scenario.measure(workflows)


async def run(arguments: Any, durability: Any, commits: Any) -> dict[str, Any]:
    from langgraph.func import entrypoint, task
    from langgraph.types import Command, interrupt

    @task
    async def s1() -> dict[str, int]:
        return scenario.step_value(1)

    @task
    async def s2() -> dict[str, int]:
        return scenario.step_value(2)

    @task
    async def s3() -> dict[str, int]:
        return scenario.step_value(3)

    @task
    async def s4() -> dict[str, int]:
        return scenario.step_value(4)

    @task
    async def s5() -> dict[str, int]:
        return scenario.step_value(5)

    async with open_saver(arguments) as saver:

        @entrypoint(checkpointer=saver)
        async def five(_input: dict[str, Any]) -> dict[str, int]:
            return scenario.total(await s1(), await s2(), await s3(), await s4(), await s5())

        @entrypoint(checkpointer=saver)
        async def five_waiting(_input: dict[str, Any]) -> dict[str, int]:
            a, b, c = await s1(), await s2(), await s3()
            event = interrupt(scenario.EVENT)
            return scenario.total(a, b, c, scenario.resumed_value(event), await s5())

        def config() -> Any:
            return {"configurable": {"thread_id": str(uuid.uuid4())}}

        async def run_one() -> Any:
            return await five.ainvoke({}, config(), durability=durability)

        async def start_paused() -> Any:
            thread = config()
            paused = await five_waiting.ainvoke({}, thread, durability=durability)
            if "__interrupt__" not in paused:
                raise RuntimeError(f"the workflow did not pause at step 4: {paused!r}")
            return thread

        async def resume(thread: Any) -> Any:
            command = Command(resume=scenario.EVENT_PAYLOAD)
            return await five_waiting.ainvoke(command, thread, durability=durability)

        workflows = scenario.Workflows(run=run_one, start_paused=start_paused, resume=resume)
        if arguments.mode == "count":
            return await scenario.count(workflows, commits, arguments.workflows)
        return await scenario.measure(workflows)


if __name__ == "__main__":
    main()
