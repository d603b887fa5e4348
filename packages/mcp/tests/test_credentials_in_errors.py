"""A server that echoes the caller's token in an error: whatever spelling it uses, the
token reaches neither the run's error, its events, the logs nor the run store's file."""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from fevex import FevexRunError, RunEvent, create_fevex, define_agent, define_connection
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel
from fevex_mcp import create_mcp_tool_provider

pytestmark = pytest.mark.anyio

# A valid header value (visible ASCII) that every escaping changes: a double quote, a
# backslash and an apostrophe, so its ``repr`` and its JSON spelling differ from it.
TOKEN = "k7Q2vX9p\"\\'Zr4sW8tY"
SPELLINGS = (TOKEN, json.dumps(TOKEN)[1:-1], repr(TOKEN)[1:-1], ascii(TOKEN)[1:-1])
# No escaping touches these, so they find the token however often it was re-escaped
# (a repr inside a JSON column), and a prefix that survived a cut.
FRAGMENTS = ("k7Q2vX9p", "Zr4sW8tY")
# fevex-mcp keeps at most this many characters of what a server says.
EXCERPT_LIMIT = 200
LOOKUP = {"id": "call-1", "name": "docs__lookup", "input": {}}


def every_spelling(authorization: str) -> str:
    """The token as the server received it, as its repr and as JSON."""
    token = authorization.removeprefix("Bearer ")
    return f"invalid token {token}; as repr {token!r}; as JSON {json.dumps(token)}"


def at_the_cut(authorization: str) -> str:
    """The token where the excerpt is cut: redacting after the cut would leave a prefix."""
    return "x" * (EXCERPT_LIMIT - 11) + authorization.removeprefix("Bearer ")


def leaks(text: str) -> list[str]:
    return [found for found in (*SPELLINGS, *FRAGMENTS) if found in text]


def leaks_in_bytes(data: bytes) -> list[str]:
    return [found for found in (*SPELLINGS, *FRAGMENTS) if found.encode() in data]


async def bearer(context: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {await context.get_credential('docs-token')}"}


def store_files(database: Path) -> dict[str, bytes]:
    candidates = [database, *(database.with_name(database.name + end) for end in ("-wal", "-shm"))]
    return {path.name: path.read_bytes() for path in candidates if path.exists()}


def log_texts(records: Iterable[logging.LogRecord]) -> list[str]:
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    return [
        formatter.format(record)
        for record in records
        # The test server runs in this process; what it logs is the server's own record.
        if not record.name.startswith(("mcp.server", "uvicorn"))
    ]


async def recorded_texts(
    app: Any, error: FevexRunError, events: list[RunEvent], records: list[logging.LogRecord]
) -> dict[str, str]:
    """Everything the failed run left behind, as text: the exception with its chain, the
    run, its events as stored and as observed, and the log records."""
    run_id = events[0].run_id
    run = await app.get_run(run_id)
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["message"] == error.message
    stored = await app.list_events(run_id)
    assert any(event.type == "run.failed" for event in stored)
    return {
        "exception": "".join(traceback.format_exception(error)) + repr(error),
        "run": json.dumps(run.to_json()),
        "stored events": json.dumps([event.to_json() for event in stored]),
        "observed events": json.dumps([event.payload for event in events]),
        "logs": "\n".join(log_texts(records)),
    }


@pytest.mark.parametrize("answer", ["json", "sse"])
@pytest.mark.parametrize("echo", [every_spelling, at_the_cut], ids=lambda echo: echo.__name__)
@pytest.mark.parametrize("failing", ["tools/list", "tools/call", "isError"])
@pytest.mark.parametrize("headers", ["resolved", "fixed"])
@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_an_echoed_token_is_redacted_everywhere(
    scripted_server: Any,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    failing: str,
    headers: str,
    store: str,
    echo: Callable[[str], str],
    answer: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="fevex")
    scripted_server.failing = failing
    scripted_server.echo = echo
    scripted_server.sse = answer == "sse"
    database = tmp_path / "runs.db"
    # "resolved": the credential resolver supplies the token, so the core knows it too;
    # "fixed": a header mapping the core knows nothing about, so only fevex-mcp can help.
    provider = create_mcp_tool_provider(
        scripted_server.url,
        headers=bearer if headers == "resolved" else {"Authorization": f"Bearer {TOKEN}"},
    )
    events: list[RunEvent] = []
    app = create_fevex(
        models={"default": FakeModel({"tool_calls": [LOOKUP]})},
        agents=[define_agent(name="assistant", instructions="Help.", tools=["docs__lookup"])],
        connections=[
            define_connection(
                name="docs",
                provider=provider,
                allowlist=["lookup"],
                credentials=["docs-token"] if headers == "resolved" else [],
            )
        ],
        credentials={"docs-token": TOKEN} if headers == "resolved" else None,
        run_store=InMemoryRunStore() if store == "memory" else f"sqlite:///{database}",
        on_event=events.append,
    )
    try:
        with pytest.raises(FevexRunError) as caught:
            await app.run_agent("assistant", "Look it up.")
        error = caught.value
        assert error.code == ("MCP_TOOL_ERROR" if failing == "isError" else "MCP_PROTOCOL_ERROR")
        # The server's message was read: the redaction marks where the token stood.
        assert "[redacted]" in error.message
        assert scripted_server.recorder.authorizations == {f"Bearer {TOKEN}"}
        assert (failing == "tools/list") == ("tools/call" not in scripted_server.recorder.methods)

        texts = await recorded_texts(app, error, events, caplog.records)
        if store == "sqlite":
            files = store_files(database)
            assert database.name + "-wal" in files
            for name, data in files.items():
                assert leaks_in_bytes(data) == [], name
    finally:
        await app.close()
    if store == "sqlite":
        for name, data in store_files(database).items():
            assert leaks_in_bytes(data) == [], f"{name} after close"
    for where, text in texts.items():
        assert leaks(text) == [], where


@pytest.mark.parametrize("answer", ["json", "sse"])
async def test_a_malformed_result_is_a_protocol_error_that_quotes_none_of_it(
    scripted_server: Any, caplog: pytest.LogCaptureFixture, answer: str
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="fevex")
    # The tools/list result names the token where an input schema belongs: the SDK's
    # validation error quotes it, and that error must not travel with the run's.
    scripted_server.failing = "malformed"
    scripted_server.echo = every_spelling
    scripted_server.sse = answer == "sse"
    provider = create_mcp_tool_provider(
        scripted_server.url, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    events: list[RunEvent] = []
    app = create_fevex(
        models={"default": FakeModel({"tool_calls": [LOOKUP]})},
        agents=[define_agent(name="assistant", instructions="Help.", tools=["docs__lookup"])],
        connections=[define_connection(name="docs", provider=provider, allowlist=["lookup"])],
        run_store=InMemoryRunStore(),
        on_event=events.append,
    )
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("assistant", "Look it up.")
    error = caught.value
    assert error.code == "MCP_PROTOCOL_ERROR"
    assert "does not follow the MCP schema" in error.message
    assert "inputSchema" in error.message
    texts = await recorded_texts(app, error, events, caplog.records)
    await app.close()
    for where, text in texts.items():
        assert leaks(text) == [], where
