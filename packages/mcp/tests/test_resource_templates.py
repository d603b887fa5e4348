"""A server's resource templates, offered with ``features=("tools", "resources")``: the
read-only tool ``resources_templates`` lists them, and ``resources_read`` reads a URI built
from one; a URI no listed resource or template describes is still refused. A real server
over Streamable HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from fevex import FevexRunError, ToolContext, create_fevex, define_agent, define_connection
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel
from fevex.tools import ConnectionContext
from fevex_mcp import create_mcp_tool_provider

pytestmark = pytest.mark.anyio


async def no_credential(name: str) -> str:
    raise AssertionError(f"no credential expected, asked for {name!r}")


DISCOVERY = ConnectionContext("wiki", "run-1", "session-1", "assistant", no_credential)


def call(remote: str) -> ToolContext:
    return ToolContext("run-1", "session-1", "assistant", "call-1", f"wiki__{remote}")


@pytest.fixture
async def wiki_url(serve_on_loopback: Any) -> AsyncIterator[str]:
    serve = serve_on_loopback

    server = MCPServer("wiki", log_level="WARNING")

    @server.resource("wiki://pages/{slug}", name="page", mime_type="text/markdown")
    def page(slug: str) -> str:
        return f"# {slug}\nA page about {slug}."

    @server.resource("wiki://index", name="index", mime_type="text/plain")
    def index() -> str:
        return "leases, heartbeats"

    running, task, port = await serve(server.streamable_http_app())
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        running.should_exit = True
        await task


async def test_templates_are_listed_and_a_uri_built_from_one_is_read(wiki_url: str) -> None:
    async with create_mcp_tool_provider(wiki_url, features=("tools", "resources")) as provider:
        tools = {tool.name: tool for tool in await provider.list_tools(DISCOVERY)}
        templates = await provider.call_tool("resources_templates", {}, call("resources_templates"))
        read = await provider.call_tool(
            "resources_read", {"uri": "wiki://pages/leases"}, call("resources_read")
        )
        with pytest.raises(FevexRunError) as refused:
            await provider.call_tool(
                "resources_read", {"uri": "wiki://secrets/keys"}, call("resources_read")
            )
    assert tools["resources_templates"].annotations["readOnlyHint"] is True
    assert templates == {
        "resource_templates": [
            {
                "uri_template": "wiki://pages/{slug}",
                "name": "page",
                "description": "",
                "mime_type": "text/markdown",
            }
        ],
        "withheld_changed": [],
    }
    assert read == {
        "uri": "wiki://pages/leases",
        "contents": [
            {
                "uri": "wiki://pages/leases",
                "mime_type": "text/markdown",
                "text": "# leases\nA page about leases.",
            }
        ],
        "truncated": False,
    }
    assert refused.value.code == "MCP_RESOURCE_NOT_FOUND"


async def test_an_agent_reads_a_templated_resource(wiki_url: str) -> None:
    model = FakeModel(
        {"tool_calls": [{"id": "c1", "name": "wiki__resources_templates", "input": {}}]},
        {
            "tool_calls": [
                {
                    "id": "c2",
                    "name": "wiki__resources_read",
                    "input": {"uri": "wiki://pages/heartbeats"},
                }
            ]
        },
        {"output": "Heartbeats renew leases."},
    )
    remote = ["resources_templates", "resources_read"]
    async with create_mcp_tool_provider(wiki_url, features=("tools", "resources")) as provider:
        app = create_fevex(
            models={"default": model},
            agents=[
                define_agent(
                    name="assistant", instructions="Help.", tools=[f"wiki__{r}" for r in remote]
                )
            ],
            connections=[define_connection(name="wiki", provider=provider, allowlist=remote)],
            run_store=InMemoryRunStore(),
        )
        result = await app.run_agent("assistant", "What are heartbeats?")
    assert result.output == "Heartbeats renew leases."
    outputs: list[Any] = [
        message.content[0].output for message in model.calls[2].messages if message.role == "tool"
    ]
    assert outputs[0]["resource_templates"][0]["uri_template"] == "wiki://pages/{slug}"
    assert outputs[1]["contents"][0]["text"] == "# heartbeats\nA page about heartbeats."
