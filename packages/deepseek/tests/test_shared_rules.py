"""The rules DeepSeek shares with every provider on fevex-openai's layer (fevex-openai's
tests check the same ones): a content filter is MODEL_REFUSAL, broken tool-call JSON is
MODEL_INVALID_JSON, a failed tool call reaches the model as {"error": ...}; a base URL
without a scheme is refused at configuration, and network errors name the host."""

import json
import socket
from typing import Any

import pytest

from fevex.errors import FevexConfigurationError, FevexRunError
from fevex.messages import Message, ToolCallPart, ToolResultPart
from fevex.models import ModelInput, ToolSpec
from fevex_deepseek import create_deepseek

pytestmark = pytest.mark.anyio

ACCOUNTS = ToolSpec(
    "accounts_get",
    "Get an account by ID.",
    {
        "type": "object",
        "properties": {"account_id": {"type": "integer"}},
        "required": ["account_id"],
        "additionalProperties": False,
    },
)


async def _failure(model: Any, drain: Any, model_input: ModelInput) -> FevexRunError:
    with pytest.raises(FevexRunError) as caught:
        await drain(model, model_input)
    return caught.value


async def test_a_content_filter_is_model_refusal(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.stream(wire.chunk(content="Some"), wire.chunk(finish_reason="content_filter"))

    error = await _failure(deepseek(), drain, ModelInput((Message.user("Hi"),)))

    assert error.code == "MODEL_REFUSAL"
    assert error.details["provider"] == "deepseek"
    assert "DeepSeek's content filter" in error.message


async def test_tool_arguments_that_are_not_json_are_model_invalid_json(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.stream(
        wire.chunk(tool_calls=[wire.call_start(0, "call_1", "accounts_get", '{"account_id": ')]),
        wire.chunk(finish_reason="tool_calls"),
    )

    error = await _failure(deepseek(), drain, ModelInput((Message.user("Go."),), (ACCOUNTS,)))

    # Never passed on as text: a tool that takes a string would run with broken JSON.
    assert error.code == "MODEL_INVALID_JSON"
    assert error.recoverable
    assert (error.details["tool_name"], error.details["tool_call_id"]) == (
        "accounts_get",
        "call_1",
    )


async def test_a_failed_tool_call_reaches_the_model_as_an_error_object(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.stream(wire.chunk(content="Sorry."), wire.chunk(finish_reason="stop"))
    error = {"code": "TOOL_FAILED", "message": "no such account"}
    messages = (
        Message.user("42?"),
        Message.assistant([ToolCallPart("call_1", "accounts_get", {"account_id": 42})]),
        Message("tool", (ToolResultPart("call_1", "accounts_get", error, is_error=True),)),
    )

    await drain(deepseek(), ModelInput(messages, (ACCOUNTS,)))

    (sent,) = [m for m in deepseek_server.bodies[0]["messages"] if m["role"] == "tool"]
    assert json.loads(sent["content"]) == {"error": error}


@pytest.mark.parametrize(
    ("options", "setting"),
    [
        ({"base_url": "127.0.0.1:8767"}, "base_url"),
        ({"beta_base_url": "api.deepseek.com/beta"}, "beta_base_url"),
    ],
)
def test_a_base_url_without_a_scheme_is_refused(options: dict[str, str], setting: str) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        create_deepseek(api_key="sk-x", **options)

    error = caught.value
    assert error.code == "INVALID_MODEL"
    assert next(iter(options.values())) in error.message
    assert "did you mean 'http://" in error.message
    assert error.details["setting"] == setting


def test_a_base_url_from_the_environment_is_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_BASE_URL", "localhost:8767")

    with pytest.raises(FevexConfigurationError) as caught:
        create_deepseek(api_key="sk-x")

    assert caught.value.code == "INVALID_MODEL"
    assert "DEEPSEEK_BASE_URL" in caught.value.message


async def test_a_network_error_names_the_host_without_credentials(drain: Any) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens once it is closed
    model = create_deepseek(
        api_key="sk-x", base_url=f"http://me:s3cret@127.0.0.1:{port}?token=t0k", max_retries=0
    )("deepseek-v4-flash")
    try:
        error = await _failure(model, drain, ModelInput((Message.user("Hi"),)))
    finally:
        await model.aclose()

    assert error.code == "PROVIDER_NETWORK_ERROR"
    assert error.recoverable
    assert f"DeepSeek at 127.0.0.1:{port}" in error.message
    assert error.details["host"] == f"127.0.0.1:{port}"
    for secret in ("s3cret", "t0k"):
        assert secret not in error.message
        assert secret not in repr(error.details)
