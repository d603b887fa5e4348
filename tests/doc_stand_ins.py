"""What the docs' examples talk to, on loopback: an MCP server of product docs over
Streamable HTTP, a notes MCP server over stdio, and any ASGI app served by uvicorn in a
thread. OpenAI and DeepSeek are played by fevex-openai's tests' loopback server
(``openai_loopback``), put on the path here."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn
from tests.doc_examples import ROOT

sys.path.insert(0, str(ROOT / "packages" / "openai" / "tests"))

from openai_loopback import TEST_API_KEY, ChatChunks, LoopbackServer, ResponseEvents

__all__ = [
    "TEST_API_KEY",
    "ChatChunks",
    "DocsServer",
    "LoopbackServer",
    "ResponseEvents",
    "notes_command",
    "served",
]


@contextlib.contextmanager
def served(asgi_app: Any, *, lifespan: str = "off") -> Iterator[str]:
    """``asgi_app`` served by uvicorn on 127.0.0.1 in a thread; yields its URL."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        asgi_app, lifespan=lifespan, ws="none", log_config=None, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30  # a hang guard
    while not server.started:
        assert thread.is_alive(), "the server did not start"
        assert time.monotonic() < deadline, "the server did not start in time"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{listening.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        listening.close()


class DocsServer:
    """An MCP server with one tool, ``search``, that records the Authorization header of
    each HTTP request it gets."""

    def __init__(self) -> None:
        from mcp.server.mcpserver import MCPServer

        self.authorizations: list[str | None] = []
        self.queries: list[str] = []
        server = MCPServer("docs", log_level="WARNING")

        @server.tool(description="Search the documentation.")
        def search(query: str) -> dict[str, list[str]]:
            self.queries.append(query)
            return {"hits": [f"{query}: see the Leases page"]}

        self._app = server.streamable_http_app()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            authorization = headers.get(b"authorization")
            self.authorizations.append(authorization.decode() if authorization else None)
        await self._app(scope, receive, send)

    @contextlib.contextmanager
    def running(self) -> Iterator[str]:
        """Serves it; yields its endpoint's URL."""
        with served(self, lifespan="on") as url:
            yield f"{url}/mcp"


_NOTES_SERVER = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("notes", log_level="WARNING")


@server.tool(description="Add a note.", structured_output=False)
def add(text: str) -> str:
    return "added"


@server.resource("notes://today", name="today", mime_type="text/plain")
def today() -> str:
    return "Lease renewals are due on Friday."


@server.prompt(description="Review code in a language.")
def review(language: str) -> str:
    return f"Review this {language} code for clarity."


@server.prompt(name="house-rules", description="The house rules.")
def house_rules() -> str:
    return "Answer in one paragraph."


server.run("stdio")
"""


def notes_command(folder: Path) -> str:
    """The path of an executable ``notes-mcp`` in ``folder``: a stdio MCP server with a tool,
    a resource and two prompts, run by this interpreter."""
    command = folder / "notes-mcp"
    command.write_text(f"#!{sys.executable}\n{_NOTES_SERVER}", encoding="utf-8")
    command.chmod(command.stat().st_mode | stat.S_IXUSR)
    assert os.access(command, os.X_OK)
    return str(command)
