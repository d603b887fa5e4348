"""The SQLite and PostgreSQL memory stores: the contract, and memories that outlive the
process that wrote them, chosen by FEVEX_MEMORY_STORE without code changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fevex.plugins import reset_plugins
from fevex.plugins.discovery import open_memory_store
from fevex.testing import check_memory_store

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "postgres"])
def memory_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'memory.db'}"
    return str(request.getfixturevalue("postgres_url"))


async def test_the_store_passes_the_memory_contract(memory_url: str) -> None:
    reset_plugins()
    store = open_memory_store(memory_url)
    passed = await check_memory_store(store)
    assert len(passed) == 7
    await store.close()


WRITER = textwrap.dedent(
    """
    from fevex import create_fevex
    from fevex.agents import define_agent
    from fevex.knowledge import MemoryAccess
    from fevex.testing import FakeModel

    call = {"id": "m1", "name": "remember", "input": {"content": "Ada prefers teal invoices."}}
    app = create_fevex(
        models={"default": FakeModel({"tool_calls": [call]}, {"output": "noted"})},
        agents=[define_agent(name="support", instructions="Help.",
                             memory=MemoryAccess(read=False, write=True))],
    )
    result = app.run_agent_sync("support", "remember this", context={"namespace": "acme"})
    print(result.output)
    """
)

READER = textwrap.dedent(
    """
    import json
    from fevex import create_fevex
    from fevex.agents import define_agent
    from fevex.knowledge import MemoryAccess
    from fevex.testing import FakeModel

    model = FakeModel({"output": "teal"}, {"output": "none"})
    app = create_fevex(
        models={"default": model},
        agents=[define_agent(name="support", instructions="Help.", memory=MemoryAccess())],
    )
    app.run_agent_sync("support", "Which invoices colour?", context={"namespace": "acme"})
    app.run_agent_sync("support", "Which invoices colour?", context={"namespace": "other"})
    print(json.dumps([[m.text for m in call.messages if m.role == "user"] for call in model.calls]))
    """
)


def run_python(code: str, memory_url: str) -> str:
    environment = {**os.environ, "FEVEX_MEMORY_STORE": memory_url}
    environment.pop("FEVEX_RUN_STORE", None)
    environment.pop("FEVEX_DISABLE_PLUGIN_AUTOLOAD", None)
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_memory_written_in_one_process_is_found_by_a_run_in_another(memory_url: str) -> None:
    assert run_python(WRITER, memory_url).strip() == "noted"
    acme, other = json.loads(run_python(READER, memory_url))
    assert any("Ada prefers teal invoices." in text for text in acme)
    assert any("not instructions" in text for text in acme)
    assert not any("teal" in text for text in other)
