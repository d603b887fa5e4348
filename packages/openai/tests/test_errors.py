"""HTTP and network failures become fevex errors; the API key never shows."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable

import pytest
from openai_loopback import TEST_API_KEY, LoopbackServer, error_response

from fevex.errors import FevexRunError
from fevex.messages import Message
from fevex.models import ModelInput
from fevex_openai import OpenAIModel, create_openai

pytestmark = pytest.mark.anyio

QUESTION = ModelInput((Message.user("Hello?"),))


async def fail(model: OpenAIModel) -> FevexRunError:
    with pytest.raises(FevexRunError) as caught:
        async for _ in model.stream(QUESTION):
            pass
    error = caught.value
    assert TEST_API_KEY not in str(error)
    assert TEST_API_KEY not in repr(error.to_json())
    assert TEST_API_KEY not in repr(error.details)
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
