"""The SQLite store as an async context manager: closed (its thread ended) on exit."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from fevex import create_fevex, define_agent
from fevex.testing import FakeModel
from fevex_sqlite import create_sqlite_run_store

pytestmark = pytest.mark.anyio


async def test_the_sqlite_store_is_an_async_context_manager(tmp_path: Path) -> None:
    before = threading.active_count()
    async with create_sqlite_run_store(tmp_path / "runs.db") as store:
        app = create_fevex(
            models={"default": FakeModel({"output": "hello"})},
            agents=[define_agent(name="support", instructions="Help.")],
            run_store=store,
        )
        result = await app.run_agent("support", input="hi")
        assert threading.active_count() == before + 1  # the store's transaction thread
    assert threading.active_count() == before
    async with create_sqlite_run_store(tmp_path / "runs.db") as reopened:
        run = await reopened.get_run(result.run_id)
        assert run is not None
        assert run.status == "completed"
