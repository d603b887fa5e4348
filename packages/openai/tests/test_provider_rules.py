"""The rules every provider on this layer shares (DeepSeek's tests check the same ones):
a content filter is MODEL_REFUSAL, broken tool-call JSON is MODEL_INVALID_JSON, a failed
tool call reaches the model as {"error": ...}; a base URL without a scheme is refused at
configuration, and network errors name the host they could not reach."""

from __future__ import annotations

import json
import socket
import traceback
from collections.abc import Callable
from typing import Any

import pytest
from openai_loopback import TEST_API_KEY, ChatChunks, LoopbackServer, ResponseEvents, error_response

from fevex.errors import FevexConfigurationError, FevexRunError
from fevex.messages import Message, ToolCallPart, ToolResultPart
from fevex.models import ModelInput, ToolSpec
from fevex_openai import OpenAIModel, create_openai

pytestmark = pytest.mark.anyio

LOOKUP = ToolSpec(
    "accounts_get",
    "Get an account by ID.",
    {
        "type": "object",
        "properties": {"account_id": {"type": "integer"}},
        "required": ["account_id"],
        "additionalProperties": False,
    },
)


async def failure(model: OpenAIModel, model_input: ModelInput) -> FevexRunError:
    with pytest.raises(FevexRunError) as caught:
        async for _ in model.stream(model_input):
            pass
    return caught.value


async def test_a_content_filter_is_model_refusal(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(ChatChunks().content("Some").finish("content_filter").scripted())

    error = await failure(make_model(api="chat"), ModelInput((Message.user("Hi"),)))

    assert error.code == "MODEL_REFUSAL"
    assert error.details["provider"] == "openai"
    assert "content filter" in error.message


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_tool_arguments_that_are_not_json_are_model_invalid_json(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel], api: str
) -> None:
    body = (
        ResponseEvents().function_call("call_1", "accounts_get", '{"account_id": ').completed()
        if api == "responses"
        else ChatChunks().tool_call(0, "call_1", "accounts_get", '{"account_id": ').finish()
    )
    server.respond(body.scripted())

    error = await failure(make_model(api=api), ModelInput((Message.user("42?"),), (LOOKUP,)))

    # Never passed on as text: a tool that takes a string would run with broken JSON.
    assert error.code == "MODEL_INVALID_JSON"
    assert error.recoverable
    assert (error.details["tool_name"], error.details["tool_call_id"]) == (
        "accounts_get",
        "call_1",
    )


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_a_failed_tool_call_reaches_the_model_as_an_error_object(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel], api: str
) -> None:
    body = ResponseEvents().message("Sorry.").completed() if api == "responses" else ChatChunks()
    if isinstance(body, ChatChunks):
        body = body.content("Sorry.").finish()
    server.respond(body.scripted())
    error = {"code": "TOOL_FAILED", "message": "no such account"}
    messages = (
        Message.user("42?"),
        Message.assistant([ToolCallPart("call_1", "accounts_get", {"account_id": 42})]),
        Message("tool", (ToolResultPart("call_1", "accounts_get", error, is_error=True),)),
    )

    async for _ in make_model(api=api).stream(ModelInput(messages, (LOOKUP,))):
        pass

    request = server.requests[0].json
    if api == "responses":
        (sent,) = [i for i in request["input"] if i.get("type") == "function_call_output"]
        text = sent["output"]
    else:
        (sent,) = [m for m in request["messages"] if m["role"] == "tool"]
        text = sent["content"]
    assert json.loads(text) == {"error": error}


@pytest.mark.parametrize("value", ["127.0.0.1:8767", "localhost:8767/v1", "ftp://127.0.0.1/v1"])
def test_a_base_url_without_an_http_scheme_is_refused_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", value)

    with pytest.raises(FevexConfigurationError) as caught:
        create_openai(api_key=TEST_API_KEY)

    error = caught.value
    assert error.code == "INVALID_MODEL"
    assert value in error.message
    assert "OPENAI_BASE_URL" in error.message
    assert error.details["setting"] == "OPENAI_BASE_URL"


def test_a_base_url_argument_without_a_scheme_is_refused_with_a_suggestion() -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        create_openai(api_key=TEST_API_KEY, base_url="127.0.0.1:8767")

    assert caught.value.code == "INVALID_MODEL"
    assert "'http://127.0.0.1:8767'" in caught.value.message
    assert caught.value.details["setting"] == "base_url"


def test_a_refused_base_url_shows_no_credentials() -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        create_openai(api_key=TEST_API_KEY, base_url="user:s3cret@127.0.0.1:8767/v1?key=k9")

    shown = caught.value.message + repr(caught.value.details)
    assert "s3cret" not in shown
    assert "k9" not in shown


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # nothing listens once it is closed


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_a_network_error_names_the_host_without_credentials(
    make_model: Callable[..., OpenAIModel], api: str
) -> None:
    port = _closed_port()
    model = make_model(
        api=api, base_url=f"http://user:s3cret@127.0.0.1:{port}/v1?token=t0k", timeout=5
    )

    error = await failure(model, ModelInput((Message.user("Hi"),)))

    assert error.code == "PROVIDER_NETWORK_ERROR"
    assert f"127.0.0.1:{port}" in error.message
    assert error.details["host"] == f"127.0.0.1:{port}"
    for secret in ("s3cret", "t0k"):
        assert secret not in error.message
        assert secret not in repr(error.details)


async def test_a_key_the_provider_echoes_reaches_no_traceback(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(error_response(401, f"Incorrect API key provided: {TEST_API_KEY}."))

    error = await failure(make_model(), ModelInput((Message.user("Hi"),)))

    assert error.code == "PROVIDER_AUTHENTICATION"
    printed: Any = "".join(traceback.format_exception(error))
    assert TEST_API_KEY not in printed
    assert "OPENAI_API_KEY" in error.message
