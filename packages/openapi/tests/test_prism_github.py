"""An agent calls GitHub's REST API, as Stoplight Prism mocks it from GitHub's own description.

The description is the real one (OpenAPI 3.0.3, 12.4 MiB, 1,223 operations, every
operationId with a ``/``), from the npm package ``@octokit/openapi``; Prism answers on
loopback with the examples the description holds. Both are installed from npm into a cache
folder the first time (``benchmarks/openapi/npm_packages.py``). GitHub's example for
``repos/get`` leaves out a property its own schema requires (``language``, of the
repository and of its source), so that call is a real answer that breaks the document's
schema.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from fevex import FevexRunError, ToolContext, create_fevex, define_agent, define_connection
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel
from fevex_openapi import create_openapi_tool_provider

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from benchmarks.openapi.npm_packages import (
    NpmUnavailableError,
    github_description,
    npm_package,
)

# On one suite worker: Prism (a Node.js server) starts once, not once per worker.
pytestmark = [pytest.mark.anyio, pytest.mark.xdist_group("prism")]

PRISM = ("@stoplight/prism-cli", "5.16.0")
TOKEN = "ghp_prismtoken0123456789abcdefABCDEF"
OPERATIONS = ["meta/root", "issues/list-for-repo", "repos/get"]


def _installed(install: Any) -> Path:
    try:
        path: Path = install()
    except NpmUnavailableError as error:
        # CI installs npm; a skip there would hide a broken setup.
        if os.environ.get("CI") == "true":
            pytest.fail(str(error))
        pytest.skip(f"npm is not installed: {error}")
    return path


@pytest.fixture(scope="module")
def description() -> bytes:
    return _installed(github_description).read_bytes()


@pytest.fixture(scope="module")
def prism(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``prism mock`` of GitHub's description on a loopback port; its origin."""
    cli = _installed(lambda: npm_package(*PRISM)) / "dist" / "index.js"
    document = _installed(github_description)
    node = "node"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path_factory.mktemp("prism") / "prism.log").open("wb")
    process = subprocess.Popen(
        [node, str(cli), "mock", "-h", "127.0.0.1", "-p", str(port), str(document)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    origin = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None:
                pytest.fail(f"prism exited with {process.returncode}; see {log.name}")
            try:
                if httpx2.get(f"{origin}/zen", timeout=2).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"prism did not answer within 180 s; see {log.name}")
            time.sleep(0.5)
        yield origin
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        log.close()


async def token(context: ToolContext) -> dict[str, str]:
    return {"Authorization": f"Bearer {await context.get_credential('github-token')}"}


def github_app(description: bytes, origin: str, model: FakeModel) -> Any:
    provider = create_openapi_tool_provider(
        document=description,
        operations={"allow": OPERATIONS},
        headers=token,
        base_url=origin,
        allow_hosts=[origin.removeprefix("http://")],
    )
    tools = list(provider.tool_names.values())
    assert tools == ["meta_root", "issues_list-for-repo", "repos_get"]
    connection = define_connection(
        name="github", provider=provider, allowlist=tools, credentials=["github-token"]
    )
    return create_fevex(
        models={"default": model},
        agents=[
            define_agent(
                name="octo",
                instructions="Answer questions about GitHub repositories.",
                tools=[f"github__{name}" for name in tools],
            )
        ],
        connections=[connection],
        credentials={"github-token": TOKEN},
        run_store=InMemoryRunStore(),
    )


def call(name: str, input: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "input": input}]}


async def test_an_agent_calls_githubs_operations_on_a_prism_mock(
    description: bytes, prism: str
) -> None:
    issues_input = {"path": {"owner": "octocat", "repo": "hello"}, "query": {"per_page": 2}}
    model = FakeModel(
        call("github__meta_root", {}, "c1"),
        call("github__issues_list-for-repo", issues_input, "c2"),
        {"output": "The API answers and the repository has issues."},
    )
    app = github_app(description, prism, model)

    result = await app.run_agent("octo", "What does the API offer, and which issues are open?")

    assert result.output == "The API answers and the repository has issues."
    root, issues = [e.payload["output"] for e in result.events if e.type == "tool.completed"]
    assert root["current_user_url"] == "https://api.github.com/user"
    assert isinstance(issues, list)
    assert issues
    assert {"id", "number", "title", "state"} <= issues[0].keys()
    # The model saw the translated 3.0 schemas: per_page's bounds, and no 3.0 keyword.
    specs = {spec.name: spec for spec in model.calls[0].tools}
    query = specs["github__issues_list-for-repo"].input_schema["properties"]["query"]
    assert query["properties"]["per_page"]["type"] == "integer"
    assert "nullable" not in str(specs)


async def test_an_answer_that_breaks_githubs_own_schema_fails_the_run(
    description: bytes, prism: str
) -> None:
    model = FakeModel(
        call("github__repos_get", {"path": {"owner": "octocat", "repo": "hello"}}, "c1"),
        {"output": "unreachable"},
    )
    app = github_app(description, prism, model)

    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("octo", "Tell me about octocat/hello.")

    assert caught.value.code == "OPENAPI_RESPONSE_INVALID"
    assert "repos/get" in caught.value.message
    # The place in the answer, never its values.
    # Prism reports the same two violations of its example (its sl-violations header).
    assert "response.language: required" in caught.value.message
    assert "response.source.language: required" in caught.value.message
    assert "Hello-World" not in caught.value.message
    assert TOKEN not in str(caught.value)
