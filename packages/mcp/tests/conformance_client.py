"""The client program the official MCP conformance suite runs (``test_conformance.py``).

``@modelcontextprotocol/conformance`` starts one server per scenario and runs
``python conformance_client.py <server URL>`` against it, with the scenario's name in
``MCP_CONFORMANCE_SCENARIO`` and, for some, what the app would be configured with (a
pre-registered client's id and secret, a private key) as JSON in ``MCP_CONFORMANCE_CONTEXT``.
Its checks then say whether the client behaved as the MCP specification requires.

The program is an app as a user writes it, on fevex's public API only: a provider and a
connection to the server's URL, and an agent whose scripted model calls the one tool that
scenario's server offers. It exits 0 when the run ends as the scenario expects, and
otherwise 1 with the fevex error on stderr (2 for a scenario it does not know).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx2

from fevex import FevexError, create_fevex, define_agent, define_connection
from fevex.models import ModelInput, ModelResult, ToolCall
from fevex.testing import FunctionModel, ModelFunction
from fevex_mcp import (
    ElicitationRequest,
    ElicitationResponse,
    MCPOAuth,
    create_mcp_tool_provider,
)

CONNECTION = "conformance"


@dataclass(frozen=True)
class Task:
    """The agent calls the server's ``tool`` with ``arguments``; the run is expected to
    complete, or to end with the error code ``ends_with``."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    ends_with: str | None = None


# The tools are those the scenarios' servers offer (the suite's src/scenarios/client).
TASKS = {
    # Its server lists no tools: the run performs the handshake the scenario checks,
    # discovers nothing, and ends there.
    "initialize": Task("add_numbers", ends_with="CONNECTION_TOOL_NOT_FOUND"),
    "tools_call": Task("add_numbers", {"a": 2, "b": 3}),
    "sse-retry": Task("test_reconnection"),
    "elicitation-sep1034-client-defaults": Task("test_client_elicitation_defaults"),
}
# Every server of the auth suites offers this tool behind OAuth.
AUTHORIZED_TASK = Task("test-tool")


def task_for(scenario: str) -> Task | None:
    if scenario.startswith("auth/"):
        return AUTHORIZED_TASK
    return TASKS.get(scenario)


CIMD_URL = "https://conformance-test.local/client-metadata.json"


async def provider_options(scenario: str, context: dict[str, Any], url: str) -> dict[str, Any]:
    """What ``create_mcp_tool_provider`` is given besides the URL for ``scenario``.

    - ``auth/*``, but the two below: OAuth with the authorization code flow, the
      authorization URL followed headlessly (a GET without following redirects, ``code``
      and ``state`` taken from the ``Location`` it answers with); for
      ``auth/basic-cimd`` the client ID metadata document
      ``https://conformance-test.local/client-metadata.json``, for
      ``auth/pre-registration`` the context's ``client_id`` and ``client_secret``.
    - ``auth/client-credentials-basic`` and ``auth/client-credentials-jwt``: client
      credentials, with the context's ``client_id`` and ``client_secret``, or
      ``private_key_pem`` and ``signing_algorithm``, for the issuer the app is
      configured with (here read from the server's protected-resource metadata, which
      the suite's context does not name).

    The suite's authorization servers listen on other loopback ports than its MCP
    servers: the app allows that host, as an app allows a private address it trusts.

    - ``elicitation-sep1034-client-defaults``: an elicitation handler that accepts with
      no values, so that every field takes the server's schema default.
    """
    if scenario == "elicitation-sep1034-client-defaults":
        return {"elicitation": accept_with_defaults}
    if not scenario.startswith("auth/"):
        return {}
    allowed = {"allow_hosts": [urlsplit(url).hostname or ""]}
    if scenario.startswith("auth/client-credentials-"):
        issuer = await issuer_of(url)
        if "private_key_pem" in context:
            credential = {
                "private_key": context["private_key_pem"],
                "signing_algorithm": context["signing_algorithm"],
            }
        else:
            credential = {"client_secret": context["client_secret"]}
        return {
            "oauth": MCPOAuth(
                grant="client_credentials",
                client_id=context["client_id"],
                issuer=issuer,
                **credential,
                **allowed,
            )
        }
    client: dict[str, Any] = {}
    if scenario == "auth/basic-cimd":
        client = {"client_metadata_url": CIMD_URL}
    elif scenario == "auth/pre-registration":
        client = {"client_id": context["client_id"], "client_secret": context["client_secret"]}
    return {"oauth": MCPOAuth(redirect=follow_headlessly, **client, **allowed)}


async def accept_with_defaults(request: ElicitationRequest) -> ElicitationResponse:
    """The user accepts the form as the server filled it in."""
    return ElicitationResponse.accept()


async def follow_headlessly(authorization_url: str) -> str:
    """The user agent's part: the suite's authorization server redirects at once."""
    async with httpx2.AsyncClient(follow_redirects=False) as http:
        response = await http.get(authorization_url)
    return response.headers["location"]


async def issuer_of(url: str) -> str:
    """The first authorization server the MCP server's protected-resource metadata names
    (RFC 9728: at the well-known path before the server's own)."""
    parts = urlsplit(url)
    metadata = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}"
    async with httpx2.AsyncClient() as http:
        response = await http.get(metadata)
        response.raise_for_status()
    servers: list[str] = response.json()["authorization_servers"]
    return servers[0]


def calling(task: Task) -> ModelFunction:
    """A model that calls the task's tool once, then answers."""

    def step(model_input: ModelInput) -> ModelResult | str:
        if model_input.messages[-1].role == "tool":
            return "Called."
        (tool,) = model_input.tools
        return ModelResult(tool_calls=[ToolCall("call-1", tool.name, task.arguments)])

    return step


async def run(url: str, scenario: str, context: dict[str, Any]) -> int:
    task = task_for(scenario)
    if task is None:
        print(f"conformance_client.py knows no scenario {scenario!r}", file=sys.stderr)
        return 2
    provider = create_mcp_tool_provider(url, **await provider_options(scenario, context, url))
    app = create_fevex(
        models={"default": FunctionModel(calling(task))},
        agents=[
            define_agent(
                name="caller",
                instructions="Call the tool you are given.",
                tools=[f"{CONNECTION}__{task.tool}"],
            )
        ],
        connections=[define_connection(name=CONNECTION, provider=provider, allowlist=[task.tool])],
        run_store="memory://",
    )
    try:
        result = await app.run_agent("caller", f"Call {task.tool}.")
    except FevexError as error:
        print(error, file=sys.stderr)
        return 0 if error.code == task.ends_with else 1
    finally:
        await app.close()
    print(result.output)
    return 0 if task.ends_with is None else 1


def main() -> int:
    (url,) = sys.argv[1:]
    scenario = os.environ["MCP_CONFORMANCE_SCENARIO"]
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT", "{}"))
    return asyncio.run(run(url, scenario, context))


if __name__ == "__main__":
    sys.exit(main())
