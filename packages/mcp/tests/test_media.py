"""Images, audio and embedded resources in a tool result reach the model as message parts:
a real server over Streamable HTTP and stdio, an agent whose model records what it read,
and the run's checkpoint as a real SQLite store file keeps them as plain JSON. What a
broken or hostile server sends is bounded: bad base64 and too much media end the call with
a stable code, a media type fevex does not pass on becomes a labelled placeholder."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from media_servers import PDF, PNG, WAV, b64

from fevex import (
    FevexRunError,
    RunEvent,
    ToolContext,
    create_fevex,
    define_agent,
    define_connection,
)
from fevex.messages import FilePart, ImagePart, ToolResultPart, content_part_from_json
from fevex.testing import FakeModel
from fevex.tools import ToolOutput
from fevex_mcp import MCPToolProvider, create_mcp_tool_provider

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).with_name("media_servers.py")
EVERY_PART = (
    ImagePart("image/png", data=b64(PNG)),
    FilePart("audio/wav", data=b64(WAV)),
    FilePart("application/pdf", data=b64(PDF), name="q3.pdf"),
)
EVERY_TEXT = [
    "The home page:",
    # The URI's escape and bidi override are gone; the resource's own lines are kept.
    "[resource file:///notes [2J .txt]\nLine 1\nLine 2",
    "[resource link file:///README.md]",
]


@pytest.fixture
async def media_url(serve_on_loopback: Any) -> AsyncIterator[str]:
    from media_servers import build_media_server

    server, task, port = await serve_on_loopback(build_media_server().streamable_http_app())
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        await task


def stdio_provider() -> MCPToolProvider:
    return create_mcp_tool_provider(command=sys.executable, args=[str(SERVER)])


def call() -> ToolContext:
    return ToolContext("run-1", "session-1", "assistant", "call-1", "m__show")


async def run_show(
    provider: MCPToolProvider, kind: str, store: Any
) -> tuple[tuple[Any, list[RunEvent]], FakeModel]:
    model = FakeModel(
        {"tool_calls": [{"id": "call-1", "name": "m__show", "input": {"kind": kind}}]},
        {"output": "Seen."},
    )
    events: list[RunEvent] = []
    app = create_fevex(
        models={"default": model},
        agents=[define_agent(name="viewer", instructions="Look.", tools=["m__show"])],
        connections=[define_connection(name="m", provider=provider, allowlist=["show"])],
        run_store=store,
        on_event=events.append,
    )
    result = await app.run_agent("viewer", "Show me.")
    return (result, events), model


def stored_checkpoint(database: Path) -> dict[str, Any]:
    with sqlite3.connect(database) as connection:
        (text,) = connection.execute("SELECT checkpoint FROM fevex_runs").fetchone()
    checkpoint: dict[str, Any] = json.loads(text)
    return checkpoint


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_media_reach_the_model_as_parts_and_the_store_as_json(
    transport: str, media_url: str, tmp_path: Path
) -> None:
    database = tmp_path / "runs.db"
    provider = create_mcp_tool_provider(media_url) if transport == "http" else stdio_provider()
    async with provider:
        (result, events), model = await run_show(provider, "all", f"sqlite:///{database}")
    assert result.output == "Seen."

    (tool_message,) = [m for m in model.calls[1].messages if m.role == "tool"]
    (part,) = tool_message.content
    assert isinstance(part, ToolResultPart)
    assert part.output == EVERY_TEXT
    assert part.content == EVERY_PART

    # The checkpoint holds the parts as plain JSON (base64 data and a media type), and
    # rebuilds the part the model read.
    (stored,) = stored_checkpoint(database)["pending"]["results"]
    assert stored["content"] == [p.to_json() for p in EVERY_PART]
    assert content_part_from_json(stored) == part

    # Events name the parts and their sizes, never their data.
    (completed,) = [e for e in events if e.type == "tool.completed"]
    assert completed.payload["content"] == [
        {"type": "image", "media_type": "image/png", "bytes": len(PNG)},
        {"type": "file", "media_type": "audio/wav", "bytes": len(WAV)},
        {"type": "file", "media_type": "application/pdf", "name": "q3.pdf", "bytes": len(PDF)},
    ]
    assert b64(PNG) not in json.dumps([event.to_json() for event in events])


async def test_media_arrive_over_stdio_too(tmp_path: Path) -> None:
    database = tmp_path / "runs.db"
    async with stdio_provider() as provider:
        (result, _), model = await run_show(provider, "image-only", f"sqlite:///{database}")
    assert result.output == "Seen."
    (part,) = model.calls[1].messages[-1].content
    assert isinstance(part, ToolResultPart)
    # An image alone: an empty text value, and the image beside it.
    assert (part.output, part.content) == ("", (ImagePart("image/png", data=b64(PNG)),))


@pytest.mark.parametrize(
    ("kind", "code"),
    [
        ("bad-base64", "MCP_CONTENT_INVALID"),
        ("huge", "MCP_CONTENT_TOO_LARGE"),
        ("many", "MCP_CONTENT_TOO_LARGE"),
        ("too-much", "MCP_CONTENT_TOO_LARGE"),
    ],
)
async def test_broken_or_oversized_media_end_the_call_with_a_stable_code(
    media_url: str, kind: str, code: str
) -> None:
    async with create_mcp_tool_provider(media_url) as provider:
        with pytest.raises(FevexRunError) as caught:
            await provider.call_tool("show", {"kind": kind}, call())
    assert caught.value.code == code
    assert caught.value.details["tool_name"] == "m__show"
    assert len(caught.value.message) < 300


async def test_a_run_whose_server_sends_too_much_fails_with_the_code(
    media_url: str, tmp_path: Path
) -> None:
    async with create_mcp_tool_provider(media_url) as provider:
        with pytest.raises(FevexRunError) as caught:
            await run_show(provider, "many", f"sqlite:///{tmp_path / 'r.db'}")
    assert caught.value.code == "MCP_CONTENT_TOO_LARGE"


async def test_media_types_fevex_does_not_pass_on_become_placeholders(media_url: str) -> None:
    async with create_mcp_tool_provider(media_url) as provider:
        value = await provider.call_tool("show", {"kind": "wrong-types"}, call())
    assert not isinstance(value, ToolOutput)
    assert value == [
        "[image content omitted: 'image/svg+xml' is not passed on]",
        "[image content omitted: the data is not image/png]",
        "[audio content omitted: 'audio/x-evil' is not passed on]",
        "[resource file:///setup.exe: application/x-msdownload content omitted]",
    ]


async def test_embedded_text_is_bounded_like_a_resource_read(media_url: str) -> None:
    async with create_mcp_tool_provider(media_url, max_resource_chars=1000) as provider:
        value = await provider.call_tool("show", {"kind": "long-text"}, call())
    assert value == "[resource file:///big.txt]\n" + "x" * 1000 + "\n[truncated]"
