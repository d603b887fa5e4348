"""The installed plugin: found through its entry point, cheap to discover, picked by URL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from fevex import create_fevex, define_agent, define_tool
from fevex.plugins import list_plugins, open_run_store
from fevex.testing import FakeModel
from fevex_sqlite import SQLiteRunStore

pytestmark = pytest.mark.anyio


def modules_loaded_by(code: str) -> list[str]:
    probe = (
        f"import json, sys\n{code}\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("FEVEX_")}
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    loaded: list[str] = json.loads(completed.stdout.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize(
    "code",
    [
        "import fevex_sqlite.plugin",
        "import fevex_sqlite; fevex_sqlite.open_sqlite_store",
        "import fevex.plugins; assert fevex.plugins.list_plugins()",
    ],
)
def test_discovering_the_plugin_imports_no_database_driver(code: str) -> None:
    loaded = modules_loaded_by(code)
    assert "fevex_sqlite" in loaded or "fevex" in loaded
    assert {"sqlalchemy", "sqlite3", "aiosqlite"}.isdisjoint(loaded)


def test_the_probe_sees_the_driver_once_a_store_opens(tmp_path: Path) -> None:
    code = f"import fevex_sqlite; fevex_sqlite.create_sqlite_run_store({str(tmp_path / 'x.db')!r})"
    loaded = set(modules_loaded_by(code))
    assert {"sqlalchemy", "sqlite3"} <= loaded
    assert "aiosqlite" not in loaded  # the store's own thread calls sqlite3: no async driver


@pytest.mark.usefixtures("fresh_plugins")
async def test_the_entry_point_registers_the_sqlite_scheme(tmp_path: Path) -> None:
    (registered,) = [p for p in list_plugins() if p["name"] == "sqlite"]
    assert registered["distribution"] == "fevex-sqlite"
    assert registered["version"] == "0.1.0"
    assert registered["run_stores"] == ["sqlite"]
    for url in (f"sqlite:///{tmp_path}/a.db", f"sqlite+aiosqlite:///{tmp_path}/b.db"):
        store = open_run_store(url, busy_timeout=2.0)
        try:
            assert isinstance(store, SQLiteRunStore)
            assert store.busy_timeout == 2.0
            assert store.path.parent == tmp_path
        finally:
            await store.close()


class AccountQuery(BaseModel):
    account_id: int


class Account(BaseModel):
    id: int
    status: str


class Answer(BaseModel):
    answer: str


@define_tool(name="accounts_get", description="Get an account by ID.")
async def get_account(query: AccountQuery) -> Account:
    return Account(id=query.account_id, status="active")


@pytest.mark.usefixtures("fresh_plugins")
async def test_fevex_run_store_picks_sqlite_and_a_run_outlives_its_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = tmp_path / "state" / "runs.db"
    monkeypatch.setenv("FEVEX_RUN_STORE", f"sqlite:///{database}")
    model = FakeModel(
        {"tool_calls": [{"id": "call-1", "name": "accounts_get", "input": {"account_id": 42}}]},
        {"output": {"answer": "Account 42 is active."}},
    )
    app = create_fevex(
        models={"default": model},
        agents=[
            define_agent(
                name="support",
                instructions="Answer account questions clearly.",
                tools=["accounts_get"],
                output_schema=Answer,
            )
        ],
        tools=[get_account],
    )
    assert isinstance(app.run_store, SQLiteRunStore)
    try:
        result = await app.run_agent("support", "What is the status of account 42?")
    finally:
        await app.close()
    assert result.output == Answer(answer="Account 42 is active.")

    # A second store on the same file, as another process would open it.
    reader = SQLiteRunStore(database)
    try:
        run = await reader.get_run(result.run_id)
        assert run is not None
        assert run.status == "completed"
        assert run.output == {"answer": "Account 42 is active."}
        events = await reader.list_events(result.run_id)
        assert [e.to_json() for e in events] == [e.to_json() for e in result.events]
        assert {"tool.completed", "run.completed"} <= {e.type for e in events}
        session = await reader.get_session(result.session_id)
        assert session is not None
        assert session.active_run_id is None
        assert session.messages()[0].text == "What is the status of account 42?"
    finally:
        await reader.close()

    # A new app on the file continues the session with its history.
    follow_up = FakeModel({"output": {"answer": "Still active."}})
    again = create_fevex(
        models={"default": follow_up},
        agents=[define_agent(name="support", instructions="Answer.", output_schema=Answer)],
    )
    try:
        await again.run_agent("support", "And now?", session_id=result.session_id)
    finally:
        await again.close()
    prompt = [m.text for m in follow_up.calls[0].messages]
    assert prompt[1] == "What is the status of account 42?"
    assert prompt[-1] == "And now?"


def test_the_package_exports_exactly_its_documented_names() -> None:
    import fevex_sqlite

    assert fevex_sqlite.__all__ == [
        "SQLiteRecordStore",
        "SQLiteRunStore",
        "__version__",
        "create_sqlite_run_store",
        "open_sqlite_store",
    ]
    for name in fevex_sqlite.__all__:
        assert getattr(fevex_sqlite, name) is not None
    with pytest.raises(AttributeError):
        fevex_sqlite.SQLiteStore  # noqa: B018
