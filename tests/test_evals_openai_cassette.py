"""A cassette recorded against the loopback server that speaks OpenAI's wire format (the
one fevex-openai's tests use) replays with the server stopped, and holds none of the
secrets the recording used: the API key, a default header, a key sent in the request body
through the model options, or a tool's credential."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from fevex import ToolContext, create_fevex, define_agent, define_tool
from fevex.evals import exact_output, run_evaluation, tool_selection
from fevex.testing import record_model, replay_model
from fevex_openai import create_openai

sys.path.insert(0, str(Path(__file__).parents[1] / "packages" / "openai" / "tests"))

from openai_loopback import LoopbackServer, ResponseEvents

pytestmark = pytest.mark.anyio

API_KEY = "sk-sentinel-api-key-4d1c"
HEADER = "sentinel-default-header-9b2e"
OPTION_KEY = "sentinel-option-key-77aa"
CREDENTIAL = "sentinel-tool-credential-5e0f"
SECRETS = (API_KEY, HEADER, OPTION_KEY, CREDENTIAL)


class AccountQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    account_id: int


@define_tool(name="accounts_get", description="Get an account by ID.", credentials=["accounts"])
async def accounts_get(query: AccountQuery, context: ToolContext) -> dict[str, Any]:
    assert await context.get_credential("accounts") == CREDENTIAL
    return {"id": query.account_id, "status": "active"}


def support_app(model: Any) -> Any:
    support = define_agent(
        name="support",
        instructions="Answer account questions clearly.",
        tools=["accounts_get"],
        model_options={"temperature": 0, "metadata": {"api_key": OPTION_KEY}},
    )
    return create_fevex(
        models={"default": model},
        agents=[support],
        tools=[accounts_get],
        credentials={"accounts": CREDENTIAL},
    )


DATASET = [
    {
        "id": "active",
        "input": "What is the status of account 42?",
        "expected": {"output": "Account 42 is active.", "tools": ["accounts_get"]},
    }
]


async def test_a_cassette_recorded_on_the_wire_replays_with_the_server_stopped(
    tmp_path: Path,
) -> None:
    from fevex.evals import dataset_from_json

    cassette = tmp_path / "support.json"
    server = LoopbackServer()
    server.start()
    try:
        server.respond(
            ResponseEvents("resp_1")
            .reasoning("I should look up account 42.")
            .function_call("call_42", "accounts_get", '{"account_', 'id": 42}')
            .completed(40, 12, reasoning=8)
            .scripted(),
            ResponseEvents("resp_2")
            .message("Account 42 ", "is active.")
            .completed(60, 9)
            .scripted(),
        )
        provider = create_openai(
            api_key=API_KEY, base_url=server.base_url, default_headers={"X-Team": HEADER}
        )
        recorder = record_model(provider("gpt-test"), cassette)
        app = support_app(recorder)
        try:
            recorded = await run_evaluation(
                app, suite_name="wire", agent_name="support",
                dataset=dataset_from_json(DATASET), scorers=[exact_output(), tool_selection()],
            )  # fmt: skip
        finally:
            await recorder.aclose()
            await app.close()
        # The secrets were really in play: the server received each of them.
        assert len(server.requests) == 2
        for request in server.requests:
            assert request.headers["authorization"] == f"Bearer {API_KEY}"
            assert request.headers["x-team"] == HEADER
            assert request.json["metadata"] == {"api_key": OPTION_KEY}
    finally:
        server.stop()

    assert recorded.cases[0].status == "passed", recorded.cases[0]
    raw = cassette.read_bytes()
    for secret in SECRETS:
        assert secret.encode() not in raw, secret
    assert b'"api_key": "[redacted]"' in raw

    replay = replay_model(cassette)
    replayed = await run_evaluation(
        support_app(replay), suite_name="wire", agent_name="support",
        dataset=dataset_from_json(DATASET), scorers=[exact_output(), tool_selection()],
    )  # fmt: skip
    [case] = replayed.cases
    assert case.status == "passed"
    assert case.output == "Account 42 is active."
    assert case.tool_calls == ("accounts_get",)
    assert case.usage == recorded.cases[0].usage
    assert replay.pending == 0
