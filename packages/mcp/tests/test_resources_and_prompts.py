"""A server's resources as read-only tools the app allows, its prompts as skills and
context providers, and their lists refreshed by change notifications under the pins."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from fevex import (
    FevexConfigurationError,
    FevexRunError,
    ToolContext,
    create_fevex,
    define_agent,
    define_connection,
)
from fevex.knowledge import ContextProviderDefinition, SkillDefinition
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel
from fevex.tools import ConnectionContext
from fevex_mcp import create_mcp_tool_provider

pytestmark = pytest.mark.anyio


async def no_credential(name: str) -> str:
    raise AssertionError(f"no credential expected, asked for {name!r}")


DISCOVERY = ConnectionContext("notes", "run-1", "session-1", "assistant", no_credential)


def call(remote: str) -> ToolContext:
    return ToolContext("run-1", "session-1", "assistant", "call-1", f"notes__{remote}")


def tool_call(name: str, call_id: str = "call-1", **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "input": arguments}]}


def provider_for(python_server: Any, **options: Any) -> Any:
    return create_mcp_tool_provider(
        command=python_server.command,
        args=python_server.args,
        features=options.pop("features", ("tools", "resources", "prompts")),
        **options,
    )


async def read(provider: Any, uri: str) -> Any:
    return await provider.call_tool("resources_read", {"uri": uri}, call("resources_read"))


async def listing(provider: Any) -> Any:
    return await provider.call_tool("resources_list", {}, call("resources_list"))


# -- resources ----------------------------------------------------------------------


async def test_an_agent_lists_and_reads_resources_the_app_allows(python_server: Any) -> None:
    model = FakeModel(
        tool_call("notes__resources_list"),
        tool_call("notes__resources_read", "call-2", uri="notes://today"),
        {"output": "Friday."},
    )
    async with provider_for(python_server) as provider:
        app = create_fevex(
            models={"default": model},
            agents=[
                define_agent(
                    name="assistant",
                    instructions="Help.",
                    tools=["notes__resources_list", "notes__resources_read"],
                )
            ],
            connections=[
                define_connection(
                    name="notes", provider=provider, allowlist=["resources_list", "resources_read"]
                )
            ],
            run_store=InMemoryRunStore(),
        )
        result = await app.run_agent("assistant", "When are renewals due?")
        events = await app.list_events(result.run_id)
    assert result.output == "Friday."
    listed, text = [event.payload["output"] for event in events if event.type == "tool.completed"]
    uris = {resource["uri"] for resource in listed["resources"]}
    assert uris == {"notes://today", "notes://big", "notes://logo"}
    assert text == {
        "uri": "notes://today",
        "contents": [
            {
                "uri": "notes://today",
                "mime_type": "text/plain",
                "text": "Lease renewals are due on Friday.",
            }
        ],
        "truncated": False,
    }
    # The model saw the read as a tool result (data), under tools only the app allowed.
    assert {spec.name for spec in model.calls[0].tools} == {
        "notes__resources_list",
        "notes__resources_read",
    }


async def test_resource_tools_exist_only_when_resources_are_asked_for(
    python_server: Any,
) -> None:
    async with provider_for(python_server, features=("tools",)) as provider:
        names = {tool.name for tool in await provider.list_tools(DISCOVERY)}
    assert "echo" in names
    assert not {"resources_list", "resources_read"} & names
    async with provider_for(python_server) as provider:
        tools = {tool.name: tool for tool in await provider.list_tools(DISCOVERY)}
    assert tools["resources_read"].annotations["readOnlyHint"] is True
    assert tools["resources_read"].input_schema["required"] == ["uri"]


async def test_only_listed_resources_can_be_read(python_server: Any) -> None:
    async with provider_for(python_server) as provider:
        for uri in ("file:///etc/passwd", "notes://secret", "notes://today/../x"):
            with pytest.raises(FevexRunError) as caught:
                await read(provider, uri)
            assert caught.value.code == "MCP_RESOURCE_NOT_FOUND"


async def test_what_a_read_returns_is_bounded(python_server: Any) -> None:
    async with provider_for(python_server, max_resource_chars=100) as provider:
        big = await read(provider, "notes://big")
        logo = await read(provider, "notes://logo")
    (content,) = big["contents"]
    assert big["truncated"] is True
    assert content["text"] == "x" * 100
    (image,) = logo["contents"]
    assert image["mime_type"] == "image/png"
    assert image["text"] == "[binary content omitted: 106 bytes]"
    assert logo["truncated"] is False


async def test_a_resource_list_change_refreshes_the_list_under_its_pins(
    python_server: Any,
) -> None:
    async with provider_for(python_server) as provider:
        first = await listing(provider)
        assert {item["uri"] for item in first["resources"]} >= {"notes://today"}
        assert await read(provider, "notes://today")
        assert await provider.call_tool("retype", {}, call("retype")) == "retyped"

        async def refreshed() -> Any:
            now = await listing(provider)
            uris = {item["uri"] for item in now["resources"]}
            return now if "notes://tomorrow" in uris else None

        with anyio.fail_after(10):
            now = await refreshed()
            while now is None:
                await anyio.sleep(0.05)
                now = await refreshed()
        # New resources are pinned and offered; one that changed is withheld.
        assert now["withheld_changed"] == ["notes://today"]
        assert "notes://today" not in {item["uri"] for item in now["resources"]}
        tomorrow = await read(provider, "notes://tomorrow")
        assert tomorrow["contents"][0]["text"] == "Nothing is due."
        with pytest.raises(FevexRunError) as caught:
            await read(provider, "notes://today")
        assert caught.value.code == "MCP_RESOURCE_CHANGED"


# -- prompts ------------------------------------------------------------------------


async def test_a_prompt_becomes_a_skill_the_app_names(python_server: Any) -> None:
    async with provider_for(python_server) as provider:
        skill = await provider.prompt_skill(
            "review", name="lease-review", arguments={"language": "Python"}
        )
        model = FakeModel({"output": "Reviewed."})
        app = create_fevex(
            models={"default": model},
            agents=[define_agent(name="reviewer", instructions="Help.", skills=["lease-review"])],
            context_providers=[skill],
            run_store=InMemoryRunStore(),
        )
        await app.run_agent("reviewer", "Review this.")
    assert isinstance(skill, SkillDefinition)
    assert skill.name == "lease-review"
    assert skill.instructions.startswith("Review the Python code for lease handling.")
    assert "Review the Python code" in json.dumps([repr(m) for m in model.calls[0].messages])


async def test_a_prompt_becomes_context_read_for_each_run(python_server: Any) -> None:
    async with provider_for(python_server) as provider:
        context = provider.prompt_context("review", arguments={"language": "Go"})
        model = FakeModel({"output": "One."}, {"output": "Two."})
        app = create_fevex(
            models={"default": model},
            agents=[define_agent(name="reviewer", instructions="Help.", context=["review"])],
            context_providers=[context],
            run_store=InMemoryRunStore(),
        )
        await app.run_agent("reviewer", "Review this.")
        await app.run_agent("reviewer", "And this.")
    assert isinstance(context, ContextProviderDefinition)
    for seen in model.calls:
        shown = json.dumps([repr(message) for message in seen.messages])
        assert "Review the Go code for lease handling." in shown


async def test_prompts_need_the_feature_and_a_listed_prompt(python_server: Any) -> None:
    async with provider_for(python_server, features=("tools",)) as provider:
        with pytest.raises(FevexConfigurationError) as refused:
            provider.prompt_context("review")
        assert refused.value.code == "MCP_FEATURE_UNSUPPORTED"
    async with provider_for(python_server) as provider:
        with pytest.raises(FevexRunError) as caught:
            await provider.prompt_skill("not-a-prompt")
        assert caught.value.code == "MCP_PROMPT_NOT_FOUND"


async def test_a_prompt_whose_arguments_change_is_refused(python_server: Any) -> None:
    async with provider_for(python_server) as provider:
        context = provider.prompt_context("review", arguments={"language": "Go"})
        assert await provider.prompt_skill("review", arguments={"language": "Go"})
        assert await provider.call_tool("reshape", {}, call("reshape")) == "reshaped"
        app = create_fevex(
            models={"default": FakeModel({"output": "never"})},
            agents=[define_agent(name="reviewer", instructions="Help.", context=["review"])],
            context_providers=[context],
            run_store=InMemoryRunStore(),
        )
        codes: list[str] = []
        with anyio.fail_after(10):
            while not codes:
                try:
                    await provider.prompt_skill("review", arguments={"language": "Go"})
                except FevexRunError as error:
                    codes.append(error.code)
                await anyio.sleep(0.05)
        assert codes == ["MCP_PROMPT_CHANGED"]
        with pytest.raises(FevexRunError) as caught:
            await app.run_agent("reviewer", "Review this.")
        assert caught.value.code == "MCP_PROMPT_CHANGED"


async def test_prompts_over_streamable_http(mcp_server: Any) -> None:
    provider = create_mcp_tool_provider(mcp_server.url, features=("tools", "prompts"))
    skill = await provider.prompt_skill("brief", arguments={"topic": "leases"})
    assert skill.instructions == "Write a brief about leases."


async def test_resources_over_streamable_http(mcp_server: Any) -> None:
    async with create_mcp_tool_provider(
        mcp_server.url, features=("tools", "resources")
    ) as provider:
        listed = await listing(provider)
        assert [item["uri"] for item in listed["resources"]] == ["docs://leases"]
        text = await read(provider, "docs://leases")
        assert text["contents"][0]["text"].startswith("# Leases")
    assert mcp_server.recorder.methods.count("resources/read") == 1
