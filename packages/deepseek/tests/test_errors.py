"""Provider failures become fevex errors with stable codes, and never carry the key."""

import socket
from typing import Any

import pytest

from fevex.errors import FevexRunError
from fevex.messages import Message
from fevex.models import ModelInput, OutputDelta
from fevex.testing import places_holding

pytestmark = pytest.mark.anyio

ASK = ModelInput((Message.user("Hello"),))
KEY = "sk-loopback-test-key"


async def _failure(model: Any, drain: Any, model_input: ModelInput = ASK) -> FevexRunError:
    with pytest.raises(FevexRunError) as caught:
        await drain(model, model_input)
    return caught.value


async def test_rejected_credentials_keep_the_message_but_not_the_key(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.fail(
        401,
        wire.error(f"Authentication Fails, Your api key: {KEY} is invalid", "authentication_error"),
        {"x-request-id": KEY},
    )

    error = await _failure(deepseek(), drain)

    assert error.code == "PROVIDER_AUTHENTICATION"
    assert not error.recoverable
    assert "Authentication Fails" in error.message
    assert KEY not in repr(error.to_json())
    # The SDK's exception holds the request and its headers, and its message here holds
    # the key: it is neither chained nor the context, and no frame of fevex's keeps it.
    assert (error.__cause__, error.__context__) == (None, None)
    assert places_holding(KEY, error) == []


@pytest.mark.parametrize(
    "frame",
    [
        {"error": {"message": f"Your api key: {KEY} is invalid", "type": "server_error"}},
        f"data: {{{KEY}}}\n\n",
    ],
    ids=["an error frame", "a frame that is not JSON"],
)
async def test_a_key_echoed_in_the_stream_reaches_no_part_of_the_error(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any, frame: Any
) -> None:
    deepseek_server.stream(wire.chunk(content="Partial "), frame)

    error = await _failure(deepseek(), drain)

    assert (error.code, error.recoverable) == ("PROVIDER_ERROR", True)
    assert (error.__cause__, error.__context__) == (None, None)
    assert places_holding(KEY, error) == []


@pytest.mark.parametrize(
    ("headers", "retry_after"),
    [({"retry-after": "7"}, 7.0), ({"retry-after-ms": "1500"}, 1.5), ({}, None)],
)
async def test_rate_limits_are_recoverable_with_the_wait_the_provider_asked_for(
    deepseek: Any,
    deepseek_server: Any,
    wire: Any,
    drain: Any,
    headers: dict[str, str],
    retry_after: float | None,
) -> None:
    deepseek_server.fail(429, wire.error("Rate Limit Reached", "rate_limit_error"), headers)

    error = await _failure(deepseek(), drain)

    assert error.code == "PROVIDER_RATE_LIMITED"
    assert error.recoverable
    assert error.details.get("retry_after") == retry_after


async def test_the_sdk_retries_a_rate_limit_before_the_stream_starts(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.fail(429, wire.error("Rate Limit Reached"), {"retry-after-ms": "10"})
    deepseek_server.stream(wire.chunk(content="Hi."), wire.chunk(finish_reason="stop"))

    step = await drain(deepseek(max_retries=1), ASK)

    assert step.result.output == "Hi."
    assert len(deepseek_server.requests) == 2


async def test_an_overlong_prompt_is_a_context_length_error(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.fail(
        400,
        wire.error(
            "This model's maximum context length is 131072 tokens. However, you requested "
            "140000 tokens (139000 in the messages, 1000 in the completion). Please reduce "
            "the length of the messages or completion."
        ),
    )

    error = await _failure(deepseek(), drain)

    assert error.code == "PROVIDER_CONTEXT_LENGTH"
    assert not error.recoverable
    assert "131072" in error.message


@pytest.mark.parametrize(
    ("status", "message", "recoverable"),
    [
        (402, "Insufficient Balance", False),
        (422, "Invalid parameter: temperature", False),
        (500, "Server Error", True),
        (503, "Server Overloaded", True),
    ],
)
async def test_other_statuses_are_provider_errors(
    deepseek: Any,
    deepseek_server: Any,
    wire: Any,
    drain: Any,
    status: int,
    message: str,
    recoverable: bool,
) -> None:
    deepseek_server.fail(status, wire.error(message))

    error = await _failure(deepseek(), drain)

    assert error.code == "PROVIDER_ERROR"
    assert error.recoverable is recoverable
    assert error.details["status_code"] == status
    assert message in error.message


async def test_an_error_event_mid_stream_fails_the_step_after_its_deltas(
    deepseek: Any, deepseek_server: Any, wire: Any
) -> None:
    deepseek_server.stream(
        wire.chunk(content="Partial "),
        wire.error("The inference service hit an internal error", "server_error"),
    )
    deltas = []

    with pytest.raises(FevexRunError) as caught:
        async for event in deepseek().stream(ASK):
            if isinstance(event, OutputDelta):  # inside its text block
                deltas.append(event.delta)

    assert deltas == ["Partial "]
    assert caught.value.code == "PROVIDER_ERROR"
    assert caught.value.recoverable
    assert "internal error" in caught.value.message


async def test_a_connection_cut_mid_stream_is_a_network_error(
    deepseek: Any, deepseek_server: Any, wire: Any, drain: Any
) -> None:
    deepseek_server.stream(wire.chunk(content="Partial "), done=False, drop=True)

    error = await _failure(deepseek(), drain)

    assert error.code == "PROVIDER_NETWORK_ERROR"
    assert error.recoverable


async def test_an_unreachable_server_is_a_network_error(deepseek: Any, drain: Any) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]

    error = await _failure(deepseek(base_url=f"http://127.0.0.1:{closed_port}"), drain)

    assert error.code == "PROVIDER_NETWORK_ERROR"
    assert error.recoverable


@pytest.mark.parametrize(
    ("finish_reason", "code", "recoverable"),
    [
        ("content_filter", "MODEL_REFUSAL", False),
        ("insufficient_system_resource", "PROVIDER_ERROR", True),
    ],
)
async def test_finish_reasons_that_end_an_answer_early_are_errors(
    deepseek: Any,
    deepseek_server: Any,
    wire: Any,
    drain: Any,
    finish_reason: str,
    code: str,
    recoverable: bool,
) -> None:
    deepseek_server.stream(wire.chunk(content="Some"), wire.chunk(finish_reason=finish_reason))

    error = await _failure(deepseek(), drain)

    assert (error.code, error.recoverable) == (code, recoverable)
