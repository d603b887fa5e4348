"""The provider at its own boundary: what it accepts, what it refuses and why, how it
binds to one identity and how results and failures come back."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from fevex import FevexConfigurationError, FevexRunError, ToolContext
from fevex.tools import ConnectionContext, RemoteTool, ToolProvider
from fevex_mcp import MCPToolProvider, create_mcp_tool_provider
from fevex_mcp.operations import MAX_PAGES

pytestmark = pytest.mark.anyio

SECRET = "tok-5e1f0a2b9c"


async def no_credential(name: str) -> str:
    raise AssertionError(f"no credential expected, asked for {name!r}")


async def token(name: str) -> str:
    assert name == "docs-token"
    return SECRET


def discovery(get_credential: Any = token) -> ConnectionContext:
    return ConnectionContext("docs", "run-1", "session-1", "assistant", get_credential)


def call(remote: str, get_credential: Any = token) -> ToolContext:
    return ToolContext(
        "run-1", "session-1", "assistant", "call-1", f"docs__{remote}", credentials=get_credential
    )


async def bearer(context: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {await context.get_credential('docs-token')}"}


async def test_tools_come_back_as_the_server_describes_them(mcp_server: Any) -> None:
    async with create_mcp_tool_provider(mcp_server.url) as provider:
        assert isinstance(provider, MCPToolProvider)
        assert isinstance(provider, ToolProvider)
        tools = {tool.name: tool for tool in await provider.list_tools(discovery())}
        assert set(tools) >= {"search", "lookup", "delete", "notes"}
        search = tools["search"]
        assert isinstance(search, RemoteTool)
        assert search.description == "Search the documentation."
        assert search.input_schema["required"] == ["query"]
        assert search.annotations == {"readOnlyHint": True}
        # Untouched: the provider leaves bounding and labelling to the core.
        assert tools["notes"].description == mcp_server.poisoned_description


async def test_every_page_of_a_listing_is_read(paging_server: Any) -> None:
    async with create_mcp_tool_provider(paging_server.url) as provider:
        tools = await provider.list_tools(discovery())
        assert [tool.name for tool in tools] == ["page0", "page1", "page2"]
        paging_server.pages[0] = MAX_PAGES + 1
        with pytest.raises(FevexRunError) as caught:
            await provider.list_tools(discovery())
        assert caught.value.code == "MCP_PROTOCOL_ERROR"


async def test_results_are_json_values(mcp_server: Any) -> None:
    async with create_mcp_tool_provider(mcp_server.url) as provider:
        assert await provider.call_tool("search", {"query": "q"}, call("search")) == {
            "hits": ["q: a lease is renewed by its holder's heartbeat"]
        }
        assert await provider.call_tool("lookup", {"term": "t"}, call("lookup")) == (
            "t means a time-limited claim"
        )
        assert await provider.call_tool("gallery", {}, call("gallery")) == [
            "first",
            "second",
            # Declared image/png, but its bytes ("hello") are no PNG: see test_media.py.
            "[image content omitted: the data is not image/png]",
        ]
        with pytest.raises(FevexRunError) as caught:
            await provider.call_tool("search", ["not", "an", "object"], call("search"))
        assert caught.value.code == "MCP_ARGUMENTS_INVALID"


async def test_an_error_excerpt_is_bounded_and_never_echoes_a_header(mcp_server: Any) -> None:
    async with create_mcp_tool_provider(mcp_server.url, headers=bearer) as provider:
        with pytest.raises(FevexRunError) as caught:
            await provider.call_tool("quota", {"query": "q"}, call("quota"))
        error = caught.value
        assert error.code == "MCP_TOOL_ERROR"
        assert "Quota exceeded for [redacted]" in error.message
        assert SECRET not in error.message
        assert "Traceback" not in error.message
        assert len(error.message) < 400
        assert mcp_server.recorder.calls[0].authorization == f"Bearer {SECRET}"


async def test_headers_bind_the_provider_to_one_identity(mcp_server: Any) -> None:
    identities = iter(["alice", "alice", "bob"])

    def headers(context: Any) -> dict[str, str]:
        return {"Authorization": f"Bearer {next(identities)}"}

    provider = create_mcp_tool_provider(mcp_server.url, headers=headers)
    await provider.list_tools(discovery())
    await provider.call_tool("lookup", {"term": "t"}, call("lookup"))
    with pytest.raises(FevexRunError) as caught:
        await provider.list_tools(discovery())
    assert caught.value.code == "MCP_IDENTITY_CHANGED"
    assert "bob" not in caught.value.message
    assert mcp_server.recorder.authorizations == {"Bearer alice"}
    await provider.aclose()
    # The same set, spelled with other cases and order, is the same identity.
    spelled = iter([{"A": "1", "b": "2"}, {"B": "2", "a": "1"}])
    async with create_mcp_tool_provider(
        mcp_server.url, headers=lambda context: next(spelled)
    ) as same:
        await same.list_tools(discovery())
        await same.list_tools(discovery())


async def test_header_callables_that_fail_are_reported_without_values(mcp_server: Any) -> None:
    def broken(context: Any) -> dict[str, str]:
        raise ValueError(f"vault said no to {SECRET}")

    with pytest.raises(FevexRunError) as caught:
        await create_mcp_tool_provider(mcp_server.url, headers=broken).list_tools(discovery())
    assert caught.value.code == "MCP_HEADERS_FAILED"
    assert SECRET not in caught.value.message

    async def bad(context: Any) -> Any:
        return {"Authorization": f"Bearer {SECRET}\r\nX-Injected: 1"}

    with pytest.raises(FevexRunError) as caught:
        await create_mcp_tool_provider(mcp_server.url, headers=bad).list_tools(discovery())
    assert caught.value.code == "MCP_HEADERS_INVALID"
    assert SECRET not in caught.value.message

    async def undeclared(name: str) -> str:
        raise FevexRunError("CREDENTIAL_NOT_DECLARED", f"{name!r} was not declared")

    with pytest.raises(FevexRunError) as caught:
        await create_mcp_tool_provider(mcp_server.url, headers=bearer).list_tools(
            discovery(undeclared)
        )
    assert caught.value.code == "CREDENTIAL_NOT_DECLARED"
    assert mcp_server.recorder.requests == []


@pytest.mark.parametrize(
    ("url", "options"),
    [
        ("http://127.0.0.1/mcp", {"transport": "sse"}),
        ("sse://127.0.0.1/sse", {}),
        ("ws://127.0.0.1/mcp", {}),
    ],
)
def test_legacy_sse_and_other_schemes_are_refused(url: Any, options: dict[str, Any]) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        create_mcp_tool_provider(url, **options)
    assert caught.value.code == "MCP_TRANSPORT_UNSUPPORTED"
    assert "Streamable HTTP" in caught.value.message


@pytest.mark.parametrize(
    "url",
    ["stdio://docs-server", "npx -y @acme/docs-mcp", "./docs_server.py", ["python", "docs.py"]],
)
def test_a_command_line_given_as_url_points_to_command(url: Any) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        create_mcp_tool_provider(url)
    assert caught.value.code == "MCP_INVALID_URL"
    assert "command=" in caught.value.message


@pytest.mark.parametrize(
    "options",
    [
        {"url": "http://127.0.0.1/mcp", "transport": "stdio"},
        {"url": "http://127.0.0.1/mcp", "command": "server"},
        {"transport": "stdio"},
        {"command": ""},
        {"command": "server", "args": "--flag value"},
        {"command": "server", "args": ["ok", 3]},
        {"command": "server", "env": {"BAD NAME": "x"}},
        {"command": "server", "env": {"TOKEN": 7}},
        {"command": "server", "inherit_env": "PATH"},
        {"command": "server", "cwd": "/definitely/not/a/directory"},
        {"command": "server", "startup_timeout": 0},
        {"command": "server", "call_timeout": float("nan")},
    ],
)
def test_malformed_stdio_commands_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        create_mcp_tool_provider(**options)
    assert caught.value.code == "MCP_COMMAND_INVALID"


def test_a_stdio_server_takes_no_headers() -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        create_mcp_tool_provider(command="server", headers={"X-Token": SECRET})
    assert caught.value.code == "MCP_HEADERS_INVALID"
    assert SECRET not in caught.value.message


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("", "MCP_INVALID_URL"),
        ("example.com/mcp", "MCP_INVALID_URL"),
        ("http:///mcp", "MCP_INVALID_URL"),
        ("http://127.0.0.1:99999/mcp", "MCP_INVALID_URL"),
        ("http://user:pass@127.0.0.1/mcp", "MCP_INVALID_URL"),
        (None, "MCP_INVALID_URL"),
    ],
)
def test_malformed_urls_are_refused(url: Any, code: str) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        create_mcp_tool_provider(url)
    assert caught.value.code == code
    assert "user:pass" not in caught.value.message


@pytest.mark.parametrize(
    "headers",
    [
        {"Mcp-Session-Id": "forged"},
        {"Content-Type": "text/plain"},
        {"X-Count": 1},
        {"X-Token": f"{SECRET}\r\nX-Injected: 1"},
        {"bad name": "x"},
        {"X-A": "1", "x-a": "2"},
        42,
    ],
)
def test_malformed_headers_are_refused(headers: Any) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        create_mcp_tool_provider("http://127.0.0.1/mcp", headers=headers)
    assert caught.value.code == "MCP_HEADERS_INVALID"
    assert SECRET not in caught.value.message


def test_the_url_shown_never_carries_its_query() -> None:
    provider = create_mcp_tool_provider("https://docs.example/mcp?api_key=abc123")
    assert provider.url == "https://docs.example/mcp"
    assert "abc123" not in repr(provider)


async def test_transport_failures_have_their_own_codes(mcp_server: Any) -> None:
    missing = create_mcp_tool_provider(mcp_server.url.replace("/mcp", "/nothing"))
    with pytest.raises(FevexRunError) as caught:
        await missing.list_tools(discovery())
    assert (caught.value.code, caught.value.details["status"]) == ("MCP_HTTP_ERROR", 404)

    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))  # bound, never listening: the port refuses
        port = holder.getsockname()[1]
        closed = create_mcp_tool_provider(f"http://127.0.0.1:{port}/mcp")
        with pytest.raises(FevexRunError) as caught:
            await closed.list_tools(discovery())
    assert caught.value.code == "MCP_UNREACHABLE"
    assert caught.value.recoverable


async def test_the_guard_keeps_tests_on_loopback(network_guard: Any) -> None:
    provider = create_mcp_tool_provider("http://192.0.2.1/mcp")
    with pytest.raises(RuntimeError) as caught:
        await provider.list_tools(discovery())
    # Not folded into MCP_UNREACHABLE: the guard's own error surfaces.
    assert type(caught.value).__name__ == "OffLoopbackConnection"
    assert network_guard.attempts == [("192.0.2.1", 80)]
    network_guard.attempts.clear()


async def test_a_hostile_output_schema_cannot_stall_a_call(mcp_server: Any) -> None:
    """The server promises an output pattern that backtracks for minutes on what it
    returns; the call answers at once, its output untrusted data as any other."""
    provider = create_mcp_tool_provider(mcp_server.url)
    outcome: list[Any] = []

    def call_elsewhere() -> None:
        # On its own thread and loop: a stalled check would block this thread, not the
        # test's loop (which serves the MCP server).
        outcome.append(asyncio.run(provider.call_tool("tally", {}, call("tally"))))

    worker = threading.Thread(target=call_elsewhere, daemon=True)
    worker.start()
    await asyncio.to_thread(worker.join, 60)
    assert not worker.is_alive(), "the call stalled on the server's output schema"
    assert outcome == [{"word": "a" * 30 + "!"}]
