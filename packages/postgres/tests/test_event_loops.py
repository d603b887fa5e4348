"""One store used from several event loops: successive ``asyncio.run`` calls, and loops
running at the same time on several threads."""

from __future__ import annotations

import asyncio
import threading

from fevex import create_fevex, define_agent
from fevex.testing import FakeModel
from fevex_postgres import PostgresRunStore


def test_a_store_serves_successive_event_loops(database_url: str) -> None:
    store = PostgresRunStore(database_url, pool_size=2, max_overflow=0)

    async def busy() -> list[object]:
        # More operations than connections: some wait on the pool, which binds it to the loop.
        return await asyncio.gather(*(store.get_run(f"run_{n}") for n in range(10)))

    assert asyncio.run(busy()) == [None] * 10
    assert asyncio.run(busy()) == [None] * 10
    asyncio.run(store.close())


def test_event_loops_on_several_threads_share_one_store(database_url: str) -> None:
    store = PostgresRunStore(database_url)
    model = FakeModel(*({"output": "done"} for _ in range(6)))
    app = create_fevex(
        models={"default": model},
        agents=[define_agent(name="worker", instructions="Do the work.")],
        run_store=store,
    )
    results: list[str] = []
    errors: list[BaseException] = []
    both_running = threading.Barrier(2, timeout=30)

    async def runs() -> None:
        both_running.wait()
        for _ in range(3):
            results.append((await app.run_agent("worker", "go")).run_id)

    def work() -> None:
        try:
            asyncio.run(runs())
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert len(set(results)) == 6

    async def read_back() -> list[str]:
        try:
            runs = [await store.get_run(run_id) for run_id in results]
            return [run.status for run in runs if run is not None]
        finally:
            await store.close()

    assert asyncio.run(read_back()) == ["completed"] * 6
