"""The plugin as users meet it: found through its entry point, cheap to discover, and
selected by a URL alone."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from fevex import create_fevex, define_agent
from fevex.plugins import list_plugins, open_run_store, reset_plugins
from fevex.testing import FakeModel
from fevex_postgres import PostgresRunStore


@pytest.fixture(autouse=True)
def fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("FEVEX_PLUGINS", "FEVEX_DISABLE_PLUGIN_AUTOLOAD", "FEVEX_RUN_STORE"):
        monkeypatch.delenv(name, raising=False)
    reset_plugins()
    yield
    reset_plugins()


def test_discovering_the_plugin_imports_no_driver() -> None:
    program = """
import json, sys
import fevex_postgres.plugin
from fevex.cli import build_parser
from fevex.plugins import list_plugins
plugins = list_plugins()
build_parser()
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("sqlalchemy", "psycopg", "greenlet"))
print(json.dumps({"heavy": heavy, "names": [p["name"] for p in plugins]}))
"""
    completed = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=60
    )
    found = json.loads(completed.stdout)
    assert found["heavy"] == []
    assert "postgres" in found["names"]


def test_the_entry_point_registers_the_scheme_and_the_db_command() -> None:
    (plugin,) = [p for p in list_plugins() if p["name"] == "postgres"]
    assert plugin["distribution"] == "fevex-postgres"
    assert plugin["version"] == "0.1.0"
    assert plugin["run_stores"] == ["postgresql", "postgres"]
    assert plugin["commands"] == []  # recorded when the CLI builds its parser

    from fevex.cli import build_parser

    build_parser()
    (plugin,) = [p for p in list_plugins() if p["name"] == "postgres"]
    assert plugin["commands"] == ["db"]


@pytest.mark.parametrize("scheme", ["postgresql+psycopg", "postgresql", "postgres"])
@pytest.mark.anyio
async def test_open_run_store_resolves_postgres_urls(scheme: str, database_url: str) -> None:
    url = database_url.replace("postgresql+psycopg", scheme, 1)
    store = open_run_store(url, pool_size=2)
    try:
        assert isinstance(store, PostgresRunStore)
        assert store.pool_options["pool_size"] == 2
        assert await store.get_run("run_missing") is None
    finally:
        await store.close()


@pytest.mark.anyio
async def test_fevex_run_store_swaps_the_store_without_code_changes(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FEVEX_RUN_STORE", database_url)
    model = FakeModel({"output": "Account 42 is active."})
    app = create_fevex(
        models={"default": model},
        agents=[define_agent(name="support", instructions="Answer account questions.")],
    )
    assert isinstance(app.run_store, PostgresRunStore)
    try:
        result = await app.run_agent("support", "What is the status of account 42?")
    finally:
        await app.close()
    assert result.output == "Account 42 is active."

    second = PostgresRunStore(database_url)
    try:
        run = await second.get_run(result.run_id)
        events = await second.list_events(result.run_id)
        session = await second.get_session(result.session_id)
    finally:
        await second.close()
    assert run is not None
    assert (run.status, run.output, run.agent_name) == (
        "completed",
        "Account 42 is active.",
        "support",
    )
    assert [event.id for event in events] == [event.id for event in result.events]
    assert session is not None
    assert session.active_run_id is None
    assert [message["role"] for message in session.history] == ["user", "assistant"]
