"""The SQLite and PostgreSQL memory stores: the contract, and memories that outlive the
process that wrote them, chosen by FEVEX_MEMORY_STORE without code changes."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fevex import create_fevex
from fevex.agents import define_agent
from fevex.knowledge import DEFAULT_NAMESPACE, MemoryAccess
from fevex.plugins import reset_plugins
from fevex.plugins.discovery import open_memory_store
from fevex.testing import FakeModel, check_memory_store

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "postgres"])
def memory_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'memory.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_memory_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'memory.db'}"
    return str(request.getfixturevalue("postgres_url"))


async def test_the_store_passes_the_memory_contract(any_memory_url: str) -> None:
    reset_plugins()
    store = open_memory_store(any_memory_url)
    passed = await check_memory_store(store)
    assert "keeps_the_default_namespace_to_itself" in passed
    assert "refuses_text_no_store_can_keep" in passed
    assert len(passed) == 9
    await store.close()


def remembering_app(store: Any, content: str) -> Any:
    call = {"id": "m1", "name": "remember", "input": {"content": content}}
    return create_fevex(
        models={"default": FakeModel({"tool_calls": [call]}, {"output": "noted"})},
        memory_store=store,
        agents=[
            define_agent(
                name="support", instructions="Help.", memory=MemoryAccess(read=False, write=True)
            )
        ],
    )


async def memories_seen(store: Any, question: str, *contexts: dict[str, Any] | None) -> list[str]:
    """What the model was given in one run per context (``None``: no context at all)."""
    model = FakeModel(*({"output": "ok"} for _ in contexts))
    app = create_fevex(
        models={"default": model},
        memory_store=store,
        agents=[define_agent(name="support", instructions="Help.", memory=MemoryAccess())],
    )
    for context in contexts:
        await app.run_agent("support", question, context=context)
    return ["\n".join(m.text for m in call.messages if m.role == "user") for call in model.calls]


async def test_a_run_naming_default_shares_no_memory_with_runs_without_a_namespace(
    any_memory_url: str,
) -> None:
    reset_plugins()
    store = open_memory_store(any_memory_url)
    shared, named = f"shared{uuid.uuid4().hex[:8]}", f"named{uuid.uuid4().hex[:8]}"
    await remembering_app(store, f"Ada keeps {shared} invoices.").run_agent("support", "note")
    await remembering_app(store, f"Bob keeps {named} invoices.").run_agent(
        "support", "note", context={"namespace": "default"}
    )
    question = f"Are the invoices {shared} or {named}?"
    none, default, acme = await memories_seen(
        store, question, None, {"namespace": "default"}, {"namespace": "acme"}
    )
    # The question holds both words: what tells the runs apart is the memory given.
    assert "Ada keeps" in none
    assert "Bob keeps" not in none
    assert "Bob keeps" in default
    assert "Ada keeps" not in default
    assert "Ada keeps" not in acme
    assert "Bob keeps" not in acme
    await store.close()


# The fevex_memories table as fevex wrote it before the default namespace was "": its rows
# of runs without a namespace say "default".
OLD_SQLITE_TABLE = (
    "CREATE VIRTUAL TABLE fevex_memories USING fts5("
    "content, memory_id UNINDEXED, namespace UNINDEXED, metadata UNINDEXED, "
    "created_at UNINDEXED, tokenize = 'unicode61 remove_diacritics 2')"
)
OLD_POSTGRES_TABLE = (
    "CREATE TABLE fevex_memories ("
    " id text PRIMARY KEY,"
    " namespace text NOT NULL,"
    " content text NOT NULL,"
    " metadata jsonb NOT NULL,"
    " created_at text NOT NULL,"
    " search tsvector GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED)",
    "CREATE INDEX fevex_memories_search ON fevex_memories USING gin (search)",
    "CREATE INDEX fevex_memories_namespace ON fevex_memories (namespace)",
)
OLD_ROWS = (
    ("mem_old_shared", "default", "Ada's invoices are teal."),
    ("mem_old_acme", "acme", "Acme's invoices are teal."),
)


@pytest.fixture(params=["sqlite", "postgres"])
def old_memory_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A memory store an older fevex wrote: a SQLite file, or a database of its own on the
    PostgreSQL server."""
    if request.param == "sqlite":
        path = tmp_path / "old-memory.db"
        with sqlite3.connect(path) as connection:
            connection.execute(OLD_SQLITE_TABLE)
            connection.executemany(
                "INSERT INTO fevex_memories (memory_id, namespace, content, metadata, created_at)"
                " VALUES (?, ?, ?, '{}', '2026-01-01T00:00:00Z')",
                OLD_ROWS,
            )
        connection.close()
        yield f"sqlite:///{path}"
        return
    import psycopg
    from sqlalchemy.engine import make_url

    server = make_url(str(request.getfixturevalue("postgres_url")))
    name = f"old_memory_{uuid.uuid4().hex[:8]}"
    admin = server.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    database = server.set(database=name)
    with psycopg.connect(
        database.set(drivername="postgresql").render_as_string(hide_password=False),
        autocommit=True,
    ) as connection:
        for statement in OLD_POSTGRES_TABLE:
            connection.execute(statement)
        for row in OLD_ROWS:
            connection.execute(
                "INSERT INTO fevex_memories (id, namespace, content, metadata, created_at)"
                " VALUES (%s, %s, %s, '{}', '2026-01-01T00:00:00Z')",
                row,
            )
    yield database.render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE {name} WITH (FORCE)")


async def test_memories_of_runs_without_a_namespace_stored_before_stay_theirs(
    old_memory_url: str,
) -> None:
    reset_plugins()
    store = open_memory_store(old_memory_url)
    assert [m.id for m in await store.search(DEFAULT_NAMESPACE, "teal")] == ["mem_old_shared"]
    assert list(await store.search("default", "teal")) == []
    assert [m.id for m in await store.search("acme", "teal")] == ["mem_old_acme"]
    none, default = await memories_seen(
        store, "Which invoices are teal?", None, {"namespace": "default"}
    )
    assert "Ada's invoices are teal." in none
    assert "invoices are teal." not in default
    # The move is made once: what a run named "default" keeps later stays its own, also
    # for a store opened afterwards (in another process, say).
    named = await store.add("default", "Default Inc's invoices are teal.")
    await store.close()
    reopened = open_memory_store(old_memory_url)
    assert [m.id for m in await reopened.search("default", "teal")] == [named.id]
    assert [m.id for m in await reopened.search(DEFAULT_NAMESPACE, "teal")] == ["mem_old_shared"]
    await reopened.close()


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
