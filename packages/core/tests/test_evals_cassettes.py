"""Record and replay of model exchanges (``fevex.testing.record_model``/``replay_model``):
a recorded run replays without its model, a changed input fails naming the step, no secret
reaches a cassette, and the pytest option records when asked and replays otherwise."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from fevex import FevexRunError, ToolContext, create_fevex, define_agent, define_tool
from fevex.messages import Message
from fevex.models import ModelInput, ModelResult
from fevex.testing import FakeModel, model_input_json, record_model, replay_model

pytestmark = pytest.mark.anyio

SECRET = "sk-sentinel-7f3a9c-never-in-a-cassette"


class Query(BaseModel):
    account_id: int


@define_tool(name="accounts_get", description="Get an account.", credentials=["accounts-key"])
async def accounts_get(query: Query, context: ToolContext) -> dict[str, Any]:
    key = await context.get_credential("accounts-key")
    return {"id": query.account_id, "status": "active", "authorized": bool(key)}


def scripted_model() -> FakeModel:
    return FakeModel(
        {
            "tool_calls": [{"id": "call-1", "name": "accounts_get", "input": {"account_id": 42}}],
            "usage": {"input_tokens": 12, "output_tokens": 3},
            "provider_state": {"response_id": "resp_1"},
        },
        {"output": "Account 42 is active.", "usage": {"input_tokens": 30, "output_tokens": 6}},
        chunk_size=8,
    )


def app_on(model: Any, *, instructions: str = "Answer.", secret: str = SECRET) -> Any:
    agent = define_agent(
        name="support",
        instructions=instructions,
        tools=["accounts_get"],
        model_options={
            "temperature": 0,
            "api_key": secret,
            "extra_headers": {"Authorization": f"Bearer {secret}"},
            "max_completion_tokens": 100,
        },
    )
    return create_fevex(
        models={"default": model},
        agents=[agent],
        tools=[accounts_get],
        credentials={"accounts-key": secret},
    )


async def record(path: Path, **options: Any) -> Any:
    model = scripted_model()
    result = await app_on(record_model(model, path), **options).run_agent("support", "Is 42 up?")
    assert model.pending == 0
    return result


async def test_a_recorded_run_replays_without_its_model(tmp_path: Path) -> None:
    cassette = tmp_path / "cassettes" / "support.json"
    recorded = await record(cassette)

    data = json.loads(cassette.read_text())
    assert data["format"] == 1
    assert len(data["exchanges"]) == 2
    first, second = data["exchanges"]
    assert first["input_digest"].startswith("sha256:")
    assert first["input"]["options"]["temperature"] == 0
    assert [e["type"] for e in second["events"]] == ["output.delta"] * 3 + ["completed"]
    assert first["events"][-1]["result"]["provider_state"] == {"response_id": "resp_1"}

    replay = replay_model(cassette)
    replayed = await app_on(replay).run_agent("support", "Is 42 up?")
    assert replayed.output == recorded.output == "Account 42 is active."
    assert replayed.usage == recorded.usage
    assert [e.type for e in replayed.events] == [e.type for e in recorded.events]
    assert replay.pending == 0


async def test_no_credential_header_or_api_key_reaches_the_cassette(tmp_path: Path) -> None:
    cassette = tmp_path / "support.json"
    await record(cassette)
    raw = cassette.read_bytes()
    assert SECRET.encode() not in raw
    options = json.loads(raw)["exchanges"][0]["input"]["options"]
    assert options == {
        "api_key": "[redacted]",
        "extra_headers": "[redacted]",
        "max_completion_tokens": 100,
        "temperature": 0,
    }
    # Another key in another environment replays the same cassette.
    other = await app_on(replay_model(cassette), secret="sk-another").run_agent(
        "support", "Is 42 up?"
    )
    assert other.output == "Account 42 is active."


async def test_a_changed_input_fails_naming_the_step_and_the_difference(tmp_path: Path) -> None:
    cassette = tmp_path / "support.json"
    await record(cassette)

    with pytest.raises(FevexRunError) as raised:
        await app_on(replay_model(cassette), instructions="Answer tersely.").run_agent(
            "support", "Is 42 up?"
        )
    error = raised.value
    assert error.code == "CASSETTE_MISMATCH"
    assert error.message.startswith(f"Model step 1 replayed from {cassette}: ")
    assert (
        "differs from exchange 1 at input.messages[0].content[0].text: "
        '''recorded "Answer.", now "Answer tersely."'''
    ) in error.message
    assert "pytest --fevex-record" in error.message
    assert error.details["step"] == 1

    # A change that only the second step sees (the tool's answer) names step 2.
    @define_tool(name="accounts_get", description="Get an account.", credentials=["accounts-key"])
    async def changed(query: Query, context: ToolContext) -> dict[str, Any]:
        return {"id": query.account_id, "status": "closed", "authorized": True}

    agent = define_agent(
        name="support", instructions="Answer.", tools=["accounts_get"],
        model_options={"temperature": 0, "api_key": SECRET, "max_completion_tokens": 100,
                       "extra_headers": {"Authorization": "x"}},
    )  # fmt: skip
    app = create_fevex(
        models={"default": replay_model(cassette)}, agents=[agent], tools=[changed],
        credentials={"accounts-key": SECRET},
    )  # fmt: skip
    with pytest.raises(FevexRunError) as raised:
        await app.run_agent("support", "Is 42 up?")
    assert raised.value.code == "CASSETTE_MISMATCH"
    assert raised.value.message.startswith("Model step 2 replayed from")
    assert "input.messages[3].content[0].output.status" in raised.value.message
    assert 'recorded "active", now "closed"' in raised.value.message


async def test_each_recording_answers_once(tmp_path: Path) -> None:
    cassette = tmp_path / "support.json"
    await record(cassette)
    replay = replay_model(cassette)
    app = app_on(replay)
    await app.run_agent("support", "Is 42 up?")
    with pytest.raises(FevexRunError) as raised:
        await app.run_agent("support", "Is 42 up?")
    assert "Model step 3" in raised.value.message
    assert "every recording of it has been replayed already" in raised.value.message


async def test_a_model_error_is_recorded_and_replayed(tmp_path: Path) -> None:
    cassette = tmp_path / "failing.json"
    limited = FevexRunError(
        "PROVIDER_RATE_LIMITED", "Slow down.", category="model", recoverable=True
    )
    app = app_on(record_model(FakeModel(limited), cassette))
    with pytest.raises(FevexRunError) as recorded:
        await app.run_agent("support", "Is 42 up?")
    assert recorded.value.code == "PROVIDER_RATE_LIMITED"

    with pytest.raises(FevexRunError) as replayed:
        await app_on(replay_model(cassette)).run_agent("support", "Is 42 up?")
    assert (replayed.value.code, replayed.value.message) == ("PROVIDER_RATE_LIMITED", "Slow down.")
    assert replayed.value.recoverable


async def test_a_crash_mid_recording_leaves_the_steps_before_it(tmp_path: Path) -> None:
    cassette = tmp_path / "support.json"
    lookup = {"tool_calls": [{"id": "call-1", "name": "accounts_get", "input": {"account_id": 42}}]}
    model = FakeModel(lookup, RuntimeError("died"))
    with pytest.raises(FevexRunError):
        await app_on(record_model(model, cassette)).run_agent("support", "Is 42 up?")
    replay = replay_model(cassette)
    assert len(replay.exchanges) == 1
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]


async def test_an_abandoned_step_is_not_recorded(tmp_path: Path) -> None:
    cassette = tmp_path / "abandoned.json"
    recorder = record_model(FakeModel({"output": "a long answer"}, chunk_size=2), cassette)
    stream = recorder.stream(ModelInput((Message.user("Hi"),)))
    await stream.__anext__()
    await stream.aclose()  # type: ignore[attr-defined]
    assert recorder.exchanges == []
    assert json.loads(cassette.read_text()) == {"exchanges": [], "format": 1}


async def test_what_cannot_be_recorded_or_read_is_refused(tmp_path: Path) -> None:
    opaque = FakeModel(ModelResult(output="hi", provider_state=object()))
    with pytest.raises(FevexRunError) as raised:
        await app_on(record_model(opaque, tmp_path / "opaque.json")).run_agent("support", "Hi")
    assert raised.value.code == "CASSETTE_INVALID"
    assert "provider_state" in raised.value.message

    with pytest.raises(FevexRunError) as raised:
        replay_model(tmp_path / "never-recorded.json")
    assert raised.value.code == "CASSETTE_NOT_FOUND"
    assert "record it first" in raised.value.message

    bad = tmp_path / "bad.json"
    for text in (
        "not json",
        '{"format": 9, "exchanges": []}',
        '{"format": 1, "exchanges": [{"input_digest": 1, "events": []}]}',
        '{"format": 1, "exchanges": {}}',
        "[" * 100_000,
    ):
        bad.write_text(text)
        with pytest.raises(FevexRunError) as raised:
            replay_model(bad)
        assert raised.value.code == "CASSETTE_INVALID"

    digest = _digest_of(ModelInput((Message.system("Answer."), Message.user("Hi"))))
    bad.write_text(json.dumps({"format": 1, "exchanges": [
        {"input_digest": digest, "input": {}, "events": [{"type": "telepathy"}]}]}))  # fmt: skip
    with pytest.raises(FevexRunError) as raised:
        await create_fevex(
            models={"default": replay_model(bad)},
            agents=[define_agent(name="plain", instructions="Answer.")],
        ).run_agent("plain", "Hi")
    assert raised.value.code == "CASSETTE_INVALID"
    assert "unknown type 'telepathy'" in raised.value.message


def _digest_of(model_input: ModelInput) -> str:
    from fevex._ground.canonical_json import json_digest

    return json_digest(model_input_json(model_input))


PLUGIN_TEST = """
import pytest
from fevex import create_fevex, define_agent
from fevex.testing import FakeModel

support = define_agent(name="support", instructions="Answer.")


def real_model():
    return FakeModel({"output": "Hello from the real model."})


def unreachable():
    raise AssertionError("a replay must not build the real model")


def test_support(fevex_cassette, request):
    recording = request.config.getoption("fevex_record")
    model = fevex_cassette(real_model if recording else unreachable)
    app = create_fevex(models={"default": model}, agents=[support])
    assert app.run_agent_sync(support, input="Hi").output == "Hello from the real model."


@pytest.mark.parametrize("who", ["ada"])
def test_named(fevex_cassette, who):
    model = fevex_cassette(FakeModel({"output": who}), name="second")
    app = create_fevex(models={"default": model}, agents=[support])
    assert app.run_agent_sync(support, input=who).output == who
"""


def test_the_pytest_option_records_when_asked_and_replays_otherwise(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_agent=PLUGIN_TEST)
    replayed_first = pytester.runpytest("-p", "no:cacheprovider")
    replayed_first.assert_outcomes(failed=2)
    assert "CASSETTE_NOT_FOUND" in replayed_first.stdout.str()

    pytester.runpytest("-p", "no:cacheprovider", "--fevex-record").assert_outcomes(passed=2)
    folder = pytester.path / "cassettes" / "test_agent"
    assert sorted(path.name for path in folder.iterdir()) == [
        "test_named_ada_-second.json",
        "test_support.json",
    ]
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)


PROVIDER_SECRET = "sek-provider-session-4d1e-never-in-a-cassette"


def stateful_model() -> FakeModel:
    """A model whose provider state carries a session token at several depths, the way a
    provider's conversation handle may (``…_token``, camelCase, inside lists)."""
    state = {
        "response_id": "resp_1",
        "session_token": PROVIDER_SECRET,
        "conversation": {
            "turns": [{"id": 1, "auth": {"sessionToken": PROVIDER_SECRET}}],
            "meta": {"deeper": {"even_deeper": {"session_token": PROVIDER_SECRET}}},
        },
    }
    return FakeModel(
        {
            "tool_calls": [{"id": "call-1", "name": "accounts_get", "input": {"account_id": 42}}],
            "provider_state": state,
        },
        {"output": "Account 42 is active.", "provider_state": {"session_token": PROVIDER_SECRET}},
    )


async def test_provider_state_is_scrubbed_at_any_depth_and_still_replays(tmp_path: Path) -> None:
    cassette = tmp_path / "stateful.json"
    model = stateful_model()
    recorded = await app_on(record_model(model, cassette)).run_agent("support", "Is 42 up?")
    # The model saw its real state on the second step: only the cassette is scrubbed.
    assert model.calls[1].provider_state["session_token"] == PROVIDER_SECRET

    raw = cassette.read_bytes()
    assert PROVIDER_SECRET.encode() not in raw
    assert b"sek-" not in raw
    first, second = json.loads(raw)["exchanges"]
    returned = first["events"][-1]["result"]["provider_state"]
    assert returned == {
        "response_id": "resp_1",
        "session_token": "[redacted]",
        "conversation": {
            "turns": [{"id": 1, "auth": "[redacted]"}],
            "meta": {"deeper": {"even_deeper": {"session_token": "[redacted]"}}},
        },
    }
    assert second["input"]["provider_state"] == returned
    assert second["events"][-1]["result"]["provider_state"] == {"session_token": "[redacted]"}

    # The replay hands the scrubbed state back; the next step's input still matches.
    replay = replay_model(cassette)
    replayed = await app_on(replay).run_agent("support", "Is 42 up?")
    assert replayed.output == recorded.output == "Account 42 is active."
    assert replay.pending == 0


def test_secret_looking_keys_are_recognised_in_every_spelling() -> None:
    state = {
        "sessionToken": "a",
        "Session-Token": "b",
        "accessToken": "c",
        "idToken": "d",
        "max_completion_tokens": 100,
        "maxTokens": 5,
        "response_id": "r",
    }
    kept = model_input_json(ModelInput((Message.user("Hi"),), provider_state=[state]))
    assert kept["provider_state"] == [
        {
            "sessionToken": "[redacted]",
            "Session-Token": "[redacted]",
            "accessToken": "[redacted]",
            "idToken": "[redacted]",
            "max_completion_tokens": 100,
            "maxTokens": 5,
            "response_id": "r",
        }
    ]
