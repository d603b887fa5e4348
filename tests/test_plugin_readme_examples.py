"""The python examples of the plugins' READMEs run as written (see ``tests/doc_examples.py``):
against stand-ins on this machine for the services they name (OpenAI, DeepSeek, MCP servers,
an OpenTelemetry collector) and on a real SQLite file and PostgreSQL database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.doc_examples import ROOT, Documents, Example
from tests.doc_stand_ins import (
    TEST_API_KEY,
    ChatChunks,
    DocsServer,
    LoopbackServer,
    OtlpReceiver,
    ResponseEvents,
    ShopServer,
    files_command,
    notes_command,
    research_command,
)

from fevex import create_fevex, define_agent
from fevex.testing import FakeModel
from fevex_deepseek import DeepSeekModel
from fevex_openapi import create_openapi_tool_provider

DOCUMENTS = Documents(
    *[path for path in sorted(ROOT.glob("packages/*/README.md")) if path.parent.name != "core"]
)

pytestmark = pytest.mark.anyio


def test_every_python_block_is_an_example_a_test_runs_or_a_fragment_saying_why() -> None:
    assert DOCUMENTS.unaccounted() == []


def greeter(model: str = "default") -> object:
    return define_agent(name="support", instructions="Answer clearly.", model=model)


@pytest.fixture
def loopback(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    """OpenAI's and DeepSeek's stand-in, named by the environment as a deployment names them."""
    server = LoopbackServer()
    server.start()
    for provider in ("OPENAI", "DEEPSEEK"):
        monkeypatch.setenv(f"{provider}_API_KEY", TEST_API_KEY)
        monkeypatch.setenv(f"{provider}_BASE_URL", server.base_url)
    yield server
    server.stop()


# -- Models ---------------------------------------------------------------------------------


@DOCUMENTS.example("openai-reference")
async def test_an_openai_model_is_named_by_reference(
    example: Example, loopback: LoopbackServer
) -> None:
    loopback.respond(ResponseEvents().message("Hello!").completed().scripted())
    names = await example.run_async()
    async with names["app"] as app:
        assert (await app.run_agent("support", "Hi")).output == "Hello!"
    assert loopback.requests[0].json["model"] == "gpt-5-mini"


@DOCUMENTS.example("openai-provider")
async def test_an_openai_provider_is_built_in_code_also_for_a_compatible_server(
    example: Example, loopback: LoopbackServer
) -> None:
    loopback.respond(ChatChunks().content("Hello", "!").finish().scripted())
    names = await example.run_async(
        create_fevex=create_fevex,  # imported by the example before it
        support=greeter(),
        addresses={"http://127.0.0.1:8000/v1": loopback.base_url},
    )
    # The compatible server's provider, as the example built it, with a model closed here.
    async with names["local"]("qwen3-8b") as model:
        app = create_fevex(models={"default": model}, agents=[greeter()])
        assert (await app.run_agent("support", "Hi")).output == "Hello!"
    ((request,),) = [loopback.requests]
    assert (request.path, request.json["model"]) == ("/v1/chat/completions", "qwen3-8b")
    assert request.headers["authorization"] == "Bearer unused"


@DOCUMENTS.example("deepseek-reference")
async def test_a_deepseek_model_is_named_by_reference(
    example: Example, loopback: LoopbackServer
) -> None:
    loopback.respond(ChatChunks().content("Hello!").finish().scripted())
    names = await example.run_async()
    assert names["result"].output == "Hello!"
    await names["app"].close()
    assert loopback.requests[0].json["model"] == "deepseek-v4-flash"


@DOCUMENTS.example("deepseek-provider")
async def test_a_deepseek_provider_is_built_in_code(example: Example) -> None:
    names = await example.run_async(create_fevex=create_fevex, support=greeter())  # as above
    assert isinstance(names["deepseek"]("deepseek-v4-flash"), DeepSeekModel)
    assert names["app"].agents == ("support",)


# -- Tool providers ---------------------------------------------------------------------------


@DOCUMENTS.example("mcp-http")
async def test_an_mcp_connection_sends_the_credential_the_headers_resolve(example: Example) -> None:
    model = FakeModel(
        {"tool_calls": [{"id": "c1", "name": "docs__search", "input": {"query": "lease"}}]},
        {"output": "See the Leases page."},
    )
    docs = DocsServer()
    with docs.running() as url:
        names = await example.run_async(
            model=model, addresses={"https://docs.example.com/mcp": url}
        )
        result = await names["app"].run_agent("assistant", "What is a lease?")
        await names["app"].close()
        await names["docs"].provider.aclose()
    assert result.output == "See the Leases page."
    assert docs.queries == ["lease"]
    assert set(docs.authorizations) == {"Bearer ..."}


@DOCUMENTS.example("mcp-elicitation")
async def test_a_server_s_question_goes_to_the_app_s_handler(example: Example) -> None:
    model = FakeModel(
        {"tool_calls": [{"id": "c1", "name": "shop__order", "input": {"item": "tea"}}]},
        {"output": "Ordered."},
    )
    shop = ShopServer()
    with shop.running() as url:
        names = await example.run_async(
            model=model, addresses={"https://shop.example.com/mcp": url}
        )
        result = await names["app"].run_agent("buyer", "Order tea.")
        await names["app"].close()
    assert result.output == "Ordered."
    assert shop.answers == [
        {"action": "accept", "content": {"email": "orders@example.com", "gift": False}}
    ]


@DOCUMENTS.example("mcp-stdio")
async def test_a_stdio_server_started_as_configured_reads_the_shared_folder(
    example: Example, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "notes.txt").write_text("Renew the lease on Friday.")
    read_notes = {"id": "c1", "name": "files__read_text_file", "input": {"path": "notes.txt"}}
    model = FakeModel({"tool_calls": [read_notes]}, {"output": "Renew the lease on Friday."})
    names = await example.run_async(
        models={"default": model},
        addresses={'"npx"': f'"{files_command(tmp_path)}"', "/srv": str(tmp_path)},
    )
    (read,) = [message for message in model.calls[1].messages if message.role == "tool"]
    assert read.content[0].output == "Renew the lease on Friday."
    assert names["app"].agents == ("clerk",)


@DOCUMENTS.example("mcp-sampling-and-roots")
async def test_a_server_samples_an_app_model_and_reads_the_roots(
    example: Example, tmp_path: Path
) -> None:
    call = {"id": "c1", "name": "research__summarize", "input": {"topic": "leases"}}
    model = FakeModel({"tool_calls": [call]}, {"output": "Leases expire."})
    helper = FakeModel({"output": "Leases are renewed by heartbeats."})
    names = await example.run_async(
        models={"default": model},
        helper=helper,
        addresses={'"research-mcp"': f'"{research_command(tmp_path)}"'},
    )
    try:
        assert names["result"].output == "Leases expire."
    finally:
        await names["research"].aclose()
    (asked,) = helper.calls
    assert asked.messages[-1].text == "Summarise the paper on leases."
    assert asked.max_output_tokens == 256
    (answered,) = [message for message in model.calls[1].messages if message.role == "tool"]
    assert json.loads(answered.content[0].output) == {
        "summary": "Leases are renewed by heartbeats.",
        "roots": ["file:///srv/papers"],
    }


@DOCUMENTS.example("mcp-resources-and-prompts")
async def test_a_server_s_prompts_become_a_skill_and_context(
    example: Example, tmp_path: Path
) -> None:
    model = FakeModel(
        {
            "tool_calls": [
                {"id": "c1", "name": "notes__resources_read", "input": {"uri": "notes://today"}}
            ]
        },
        {"output": "Renewals are due on Friday."},
    )
    names = await example.run_async(
        models={"default": model}, addresses={'"notes-mcp"': f'"{notes_command(tmp_path)}"'}
    )
    try:
        result = await names["app"].run_agent("a", "What is due?")
    finally:
        await names["notes"].aclose()
    assert result.output == "Renewals are due on Friday."
    first, second = model.calls
    texts = [message.text for message in first.messages]
    assert "Review this Python code for clarity." in texts  # the skill
    assert any("Answer in one paragraph." in text for text in texts)  # the context, as data
    (read,) = [message for message in second.messages if message.role == "tool"]
    assert "Lease renewals are due on Friday." in json.dumps(read.content[0].output)


def operation(operation_id: str, *parameters: str) -> dict[str, object]:
    return {
        "operationId": operation_id,
        "parameters": [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in parameters
        ],
        "responses": {"200": {"description": "OK"}},
    }


def openapi_document(paths: dict[str, dict[str, object]]) -> str:
    return json.dumps(
        {
            "openapi": "3.1.0",
            "info": {"title": "A service", "version": "1"},
            "servers": [{"url": "https://api.example.com"}],
            "paths": paths,
        }
    )


@DOCUMENTS.example("openapi-billing")
async def test_an_allowed_operation_becomes_a_tool_of_the_connection(
    example: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BILLING_TOKEN", "bt-1234")
    invoices = {"/invoices/{id}": {"get": operation("getInvoice", "id")}}
    (tmp_path / "billing-openapi.json").write_text(openapi_document(invoices))
    model = FakeModel({"output": "Which invoice?"})

    names = await example.run_async(model=model)

    result = await names["app"].run_agent("clerk", "My invoice?")
    assert result.output == "Which invoice?"
    (offered,) = model.calls[0].tools
    assert offered.name == "billing__getInvoice"
    assert offered.input_schema["properties"]["path"]["required"] == ["id"]
    await names["app"].close()


@DOCUMENTS.example("openapi-github")
async def test_operation_ids_that_are_not_tool_names_get_names(
    example: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    issues = {
        "/repos/{owner}/{repo}/issues": {"get": operation("issues/list-for-repo", "owner", "repo")},
        "/repos/{owner}/{repo}/issues/{number}": {
            "get": operation("issues/get", "owner", "repo", "number")
        },
    }
    (tmp_path / "api.github.com.json").write_text(openapi_document(issues))

    names = await example.run_async(
        create_openapi_tool_provider=create_openapi_tool_provider,
        github_headers={"Authorization": "Bearer gh-test"},
    )

    assert names["issues"].tool_names == {
        "issues/list-for-repo": "issues_list-for-repo",
        "issues/get": "get_issue",
    }


# -- Traces -----------------------------------------------------------------------------------

# The two examples are one program, run in a process of its own: OpenTelemetry lets a process
# set its global tracer provider once.
OTEL_PROGRAM = """
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, {root!r})

from fevex import define_agent
from fevex.testing import FakeModel
from tests.doc_examples import Documents

documents = Documents(Path({readme!r}))
setup, exporter = (documents.get(name) for name in {names!r})
names = setup.run()
names["models"] = {{"default": FakeModel({{"output": "Hello!"}})}}
names["support"] = define_agent(name="support", instructions="Greet.")
asyncio.run(exporter.run_async(**names))
"""


@DOCUMENTS.example("otel-setup", "otel-exporter")
def test_the_application_s_opentelemetry_setup_receives_fevex_s_spans(
    examples: list[Example],
) -> None:
    readme = str(examples[0].block.path)
    program = OTEL_PROGRAM.format(
        root=str(ROOT), readme=readme, names=[example.name for example in examples]
    )
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("FEVEX_", "OTEL_")) and "proxy" not in name.lower()
    }
    with OtlpReceiver() as receiver:
        environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = receiver.endpoint
        completed = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(program)],
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        spans = receiver.spans()
    assert completed.returncode == 0, completed.stderr
    assert sorted(span.name for span in spans) == ["chat default", "invoke_agent support"]
    (resource,) = {
        attribute.value.string_value
        for request in receiver.requests
        for spans_of in request.resource_spans
        for attribute in spans_of.resource.attributes
        if attribute.key == "service.name"
    }
    assert resource == "support-desk"


# -- Run stores -------------------------------------------------------------------------------


def greeting_models() -> dict[str, FakeModel]:
    return {"default": FakeModel({"output": "Hello!"})}


@DOCUMENTS.example("postgres-url")
async def test_a_postgresql_store_is_named_by_url(example: Example, postgres_url: str) -> None:
    names = await example.run_async(
        models=greeting_models(),
        support=greeter(),
        addresses={"postgresql+psycopg://fevex@db.internal:5432/fevex": postgres_url},
    )
    async with names["app"] as app:
        result = await app.run_agent("support", "Hi")
    async with create_fevex(run_store=postgres_url) as other_process:
        assert (await other_process.get_run(result.run_id)).output == "Hello!"


@DOCUMENTS.example("postgres-store")
async def test_a_postgresql_store_is_opened_with_pool_options(
    example: Example, postgres_url: str
) -> None:
    await example.run_async(
        create_fevex=create_fevex,  # imported by the example before it
        models=greeting_models(),
        support=greeter(),
        addresses={"postgresql+psycopg://fevex@db.internal:5432/fevex": postgres_url},
    )
    async with create_fevex(run_store=postgres_url) as other_process:
        (run,) = await other_process.list_runs()
    assert (run.status, run.output) == ("completed", "Hello!")


@DOCUMENTS.example("postgres-server")
def test_a_throwaway_postgresql_server_runs_for_a_test(
    example: Example, postgres_server_url: str
) -> None:
    names = example.run()  # `postgres_server_url`: skipped, as it is, without PostgreSQL
    assert names["url"].startswith("postgresql+psycopg://postgres@127.0.0.1:")


@DOCUMENTS.example("sqlite-url")
def test_a_sqlite_store_is_named_by_url_in_code_or_the_environment(
    example: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FEVEX_RUN_STORE", f"sqlite:///{tmp_path / 'from-the-environment.db'}")
    names = example.run(models=greeting_models(), support=greeter())
    with names["app"] as app:
        run_id = app.run_agent_sync("support", "Hi").run_id
    with create_fevex(run_store="sqlite:///.fevex/runs.db") as other_process:
        assert other_process.get_run_sync(run_id).output == "Hello!"


@DOCUMENTS.example("sqlite-store")
async def test_a_sqlite_store_is_built_with_its_options(
    example: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "var" / "runs.db"
    await example.run_async(
        create_fevex=create_fevex,  # imported by the example before it
        models=greeting_models(),
        support=greeter(),
        addresses={"/var/lib/app/runs.db": str(runs)},
    )
    assert runs.is_file()
    async with create_fevex(run_store=f"sqlite:///{runs}") as other_process:
        (run,) = await other_process.list_runs()
    assert (run.status, run.output) == ("completed", "Hello!")
