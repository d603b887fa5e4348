"""HTTP and network failures become fevex errors; the API key never shows, nowhere a caller
or its error reporter looks (the chained exceptions, and the locals of fevex's frames)."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Callable

import pytest
from openai_loopback import (
    TEST_API_KEY,
    ChatChunks,
    LoopbackServer,
    ResponseEvents,
    Scripted,
    error_response,
)

from fevex import create_fevex, define_agent
from fevex.errors import FevexRunError
from fevex.messages import Message
from fevex.models import ModelInput
from fevex.testing import places_holding
from fevex_openai import OpenAIModel, create_openai

pytestmark = pytest.mark.anyio

QUESTION = ModelInput((Message.user("Hello?"),))
KEY = TEST_API_KEY.encode()


async def fail(model: OpenAIModel) -> FevexRunError:
    with pytest.raises(FevexRunError) as caught:
        async for _ in model.stream(QUESTION):
            pass
    error = caught.value
    assert TEST_API_KEY not in repr(error.to_json())
    # The SDK's exceptions hold the request, its headers included: none is chained.
    assert (error.__cause__, error.__context__) == (None, None)
    assert places_holding(TEST_API_KEY, error) == []
    return error


@pytest.mark.parametrize("api", ["responses", "chat"])
@pytest.mark.parametrize("status", [401, 403])
async def test_rejected_credentials(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel], api: str, status: int
) -> None:
    server.respond(error_response(status, "Incorrect API key provided.", code="invalid_api_key"))
    error = await fail(make_model(api=api))
    assert error.code == "PROVIDER_AUTHENTICATION"
    assert "Incorrect API key provided." in error.message
    assert not error.recoverable
    assert error.details["status_code"] == status
    assert error.details["provider_code"] == "invalid_api_key"


@pytest.mark.parametrize(
    ("headers", "retry_after"),
    [({"retry-after": "7"}, 7.0), ({"retry-after-ms": "1500", "retry-after": "2"}, 1.5)],
)
async def test_rate_limit_with_retry_after(
    server: LoopbackServer,
    make_model: Callable[..., OpenAIModel],
    headers: dict[str, str],
    retry_after: float,
) -> None:
    server.respond(
        error_response(
            429,
            "Rate limit reached for requests.",
            code="rate_limit_exceeded",
            type="requests",
            headers={**headers, "x-request-id": "req_123"},
        )
    )
    error = await fail(make_model())
    assert error.code == "PROVIDER_RATE_LIMITED"
    assert error.recoverable
    assert error.details["retry_after"] == retry_after
    assert error.details["request_id"] == "req_123"
    assert len(server.requests) == 1, "the SDK must not retry on its own by default"


async def test_the_sdk_retries_only_when_asked(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    limited = error_response(429, "Slow down.", headers={"retry-after-ms": "10"})
    server.respond(limited, limited)
    error = await fail(make_model(max_retries=1))
    assert error.code == "PROVIDER_RATE_LIMITED"
    assert len(server.requests) == 2


async def test_an_exhausted_quota_is_not_worth_retrying(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel]
) -> None:
    server.respond(error_response(429, "You exceeded your quota.", code="insufficient_quota"))
    error = await fail(make_model())
    assert error.code == "PROVIDER_RATE_LIMITED"
    assert not error.recoverable


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_context_length(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel], api: str
) -> None:
    server.respond(
        error_response(
            400,
            "This model's maximum context length is 128000 tokens.",
            code="context_length_exceeded",
        )
    )
    error = await fail(make_model(api=api))
    assert error.code == "PROVIDER_CONTEXT_LENGTH"
    assert "128000" in error.message


@pytest.mark.parametrize(("status", "recoverable"), [(400, False), (404, False), (503, True)])
async def test_other_statuses_are_provider_errors(
    server: LoopbackServer,
    make_model: Callable[..., OpenAIModel],
    status: int,
    recoverable: bool,
) -> None:
    server.respond(error_response(status, f"Status {status} happened."))
    error = await fail(make_model())
    assert error.code == "PROVIDER_ERROR"
    assert f"Status {status} happened." in error.message
    assert error.recoverable is recoverable
    assert error.category == "model"


async def test_an_unreachable_server_is_a_network_error(
    make_model: Callable[..., OpenAIModel],
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens once it is closed
    error = await fail(make_model(base_url=f"http://127.0.0.1:{port}/v1", timeout=5))
    assert error.code == "PROVIDER_NETWORK_ERROR"
    assert error.recoverable


async def test_the_key_reaches_no_log_record(
    server: LoopbackServer,
    make_model: Callable[..., OpenAIModel],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.respond(error_response(401, "Incorrect API key provided.", code="invalid_api_key"))
    with caplog.at_level(logging.DEBUG):
        await fail(make_model())
    assert caplog.records, "the SDK logs its requests at DEBUG"
    assert all(TEST_API_KEY not in record.getMessage() for record in caplog.records)


def test_the_key_is_not_in_reprs() -> None:
    provider = create_openai(api_key=TEST_API_KEY, base_url="http://127.0.0.1:9/v1")
    model = provider("gpt-test")
    for shown in (repr(provider), repr(model), repr(model.settings)):
        assert TEST_API_KEY not in shown


def _json_escaped(response: Scripted) -> Scripted:
    """The response with the key written as JSON ``\\u`` escapes, which read back as the key."""
    escaped = "".join(f"\\u{ord(character):04x}" for character in TEST_API_KEY)
    response.body = response.body.replace(TEST_API_KEY.encode(), escaped.encode())
    return response


ECHOES = {
    "in the message": error_response(401, f"Incorrect API key provided: {TEST_API_KEY}."),
    "as the error code": error_response(401, "Incorrect API key provided.", code=TEST_API_KEY),
    "in a header": error_response(
        401, "Incorrect API key provided.", headers={"x-request-id": TEST_API_KEY}
    ),
    "JSON-escaped": _json_escaped(
        error_response(401, f"Incorrect API key provided: {TEST_API_KEY}.")
    ),
}


@pytest.mark.parametrize("api", ["responses", "chat"])
@pytest.mark.parametrize("echo", list(ECHOES))
async def test_a_key_the_provider_echoes_in_an_error_status_reaches_no_part_of_the_error(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel], api: str, echo: str
) -> None:
    server.respond(ECHOES[echo])

    error = await fail(make_model(api=api))

    assert error.code == "PROVIDER_AUTHENTICATION"
    assert "[redacted]" in error.message + repr(error.details)


STREAM_ECHOES = {
    "a chat error frame": (
        "chat",
        Scripted(body=b"data: %s\n\n" % json.dumps({"error": {"message": TEST_API_KEY}}).encode()),
    ),
    "a responses error event": (
        "responses",
        ResponseEvents().error("server_error", f"Bad key {TEST_API_KEY}").scripted(),
    ),
    "a failed response": (
        "responses",
        ResponseEvents().failed("server_error", f"Bad key {TEST_API_KEY}").scripted(),
    ),
    "a chat event that is not JSON": (
        "chat",
        Scripted(body=ChatChunks().content("Hi").body(done=False) + b"data: %s\n\n" % KEY),
    ),
    "a responses event that is not JSON": (
        "responses",
        Scripted(body=b"event: error\ndata: {%s}\n\n" % KEY),
    ),
}


@pytest.mark.parametrize("echo", list(STREAM_ECHOES))
async def test_a_key_the_provider_echoes_in_its_stream_reaches_no_part_of_the_error(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel], echo: str
) -> None:
    api, script = STREAM_ECHOES[echo]
    server.respond(script)

    error = await fail(make_model(api=api))

    assert error.code == "PROVIDER_ERROR"
    assert error.recoverable


@pytest.mark.parametrize("echo", ["a responses error event", "a chat event that is not JSON"])
async def test_a_run_that_fails_on_an_echoed_key_raises_an_error_that_holds_it_nowhere(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel], echo: str
) -> None:
    api, script = STREAM_ECHOES[echo]
    server.respond(script)
    app = create_fevex(
        agents=[define_agent(name="support", instructions="Answer.", model="provider")],
        models={"provider": make_model(api=api)},
    )
    try:
        with pytest.raises(FevexRunError) as caught:
            await app.run_agent("support", input="Hello?")
    finally:
        await app.close()

    assert caught.value.code == "PROVIDER_ERROR"
    assert places_holding(TEST_API_KEY, caught.value) == []
