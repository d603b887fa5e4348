"""What the docs' examples talk to, on this machine: an MCP server of product docs over
Streamable HTTP, MCP servers over stdio, and any ASGI app served by uvicorn in a thread.
OpenAI and DeepSeek are played by fevex-openai's tests' loopback server (``openai_loopback``),
an OpenTelemetry collector by fevex-opentelemetry's (``otlp_receiver``), put on the path
here."""

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
sys.path.insert(0, str(ROOT / "packages" / "opentelemetry" / "tests"))

from openai_loopback import TEST_API_KEY, ChatChunks, LoopbackServer, ResponseEvents
from otlp_receiver import OtlpReceiver

__all__ = [
    "TEST_API_KEY",
    "ChatChunks",
    "DocsServer",
    "LoopbackServer",
    "OtlpReceiver",
    "ResponseEvents",
    "files_command",
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


class ShopServer:
    """An MCP server whose one tool, ``order``, asks the client for an email address
    (elicitation, in its result, as 2026-07-28 servers ask) and records what it got."""

    def __init__(self) -> None:
        from mcp.server.mcpserver import Context, MCPServer
        from mcp.types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

        self.answers: list[Any] = []
        server = MCPServer("shop", log_level="WARNING")
        schema = {
            "type": "object",
            "properties": {
                "email": {"type": "string", "format": "email"},
                "gift": {"type": "boolean", "default": False},
            },
            "required": ["email"],
        }

        async def order(item: str, ctx: Context) -> str | InputRequiredResult:
            responses = ctx.input_responses
            if not responses:
                params = ElicitRequestFormParams(
                    message="Where should the receipt go?", requested_schema=schema
                )
                return InputRequiredResult(input_requests={"email": ElicitRequest(params=params)})
            answer = responses["email"]
            self.answers.append(answer.model_dump(exclude_none=True))
            return f"ordered {item}"

        # Resolved here: the names are local, which string annotations cannot reach.
        order.__annotations__ = {"item": str, "ctx": Context, "return": str | InputRequiredResult}
        server.tool(description="Order an item.", structured_output=False)(order)
        self._app = server.streamable_http_app()

    @contextlib.contextmanager
    def running(self) -> Iterator[str]:
        """Serves it; yields its endpoint's URL."""
        with served(self._app, lifespan="on") as url:
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

# A research server that asks the client's model to summarise (sampling, inside the call on
# a 2026 session) and reads the client's roots.
_RESEARCH_SERVER = """
import json
from typing import Annotated

from mcp.server.mcpserver import ListRoots, MCPServer, Resolve, Sample
from mcp.types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent

server = MCPServer("research", log_level="WARNING")


def ask(topic: str) -> Sample:
    text = TextContent(type="text", text=f"Summarise the paper on {topic}.")
    return Sample([SamplingMessage(role="user", content=text)], max_tokens=512)


def folders() -> ListRoots:
    return ListRoots()


@server.tool(description="Summarise a paper.", structured_output=False)
def summarize(
    topic: str,
    summary: Annotated[CreateMessageResult, Resolve(ask)],
    roots: Annotated[ListRootsResult, Resolve(folders)],
) -> str:
    where = [str(root.uri) for root in roots.roots]
    return json.dumps({"summary": summary.content.text, "roots": where})


server.run("stdio")
"""

# What `npx -y @modelcontextprotocol/server-filesystem ROOT` serves, in part: read_text_file
# under ROOT, the last argument.
_FILES_SERVER = """
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

root = Path(sys.argv[-1]).resolve()
server = MCPServer("files", log_level="WARNING")


@server.tool(description="Read a text file.", structured_output=False)
def read_text_file(path: str) -> str:
    target = (root / path).resolve()
    assert target.is_relative_to(root), "outside the allowed directory"
    return target.read_text()


server.run("stdio")
"""


def _command(folder: Path, name: str, source: str) -> str:
    command = folder / name
    command.write_text(f"#!{sys.executable}\n{source}", encoding="utf-8")
    command.chmod(command.stat().st_mode | stat.S_IXUSR)
    assert os.access(command, os.X_OK)
    return str(command)


def notes_command(folder: Path) -> str:
    """The path of an executable ``notes-mcp`` in ``folder``: a stdio MCP server with a tool,
    a resource and two prompts, run by this interpreter."""
    return _command(folder, "notes-mcp", _NOTES_SERVER)


def research_command(folder: Path) -> str:
    """The path of an executable ``research-mcp`` in ``folder``: a stdio MCP server whose
    ``summarize`` samples the client's model and reads its roots."""
    return _command(folder, "research-mcp", _RESEARCH_SERVER)


def files_command(folder: Path) -> str:
    """The path of an executable ``npx`` in ``folder`` that serves the reference filesystem
    server's ``read_text_file`` for the directory its last argument names."""
    return _command(folder, "npx", _FILES_SERVER)
