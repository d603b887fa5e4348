"""A credential the service echoes back never reaches an error, an event or a run record:
not whole, not cut short by a limit, not as a property name, not in a redirect's host."""

from __future__ import annotations

from typing import Any

import pytest
from openapi_agent_runs import TOKEN, agent_app, bearer, call, recorded_run

from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio

ERROR_BODY_LIMIT = 4096
API_KEY = "Kx9QmZ4tR7wB2nLpV5"


def prefixes(secret: str, shortest: int = 8) -> list[str]:
    return [secret[:size] for size in range(shortest, len(secret) + 1)]


@pytest.mark.parametrize("kept", [8, 16, len(TOKEN) - 1])
async def test_a_credential_across_the_error_body_limit_leaves_no_prefix(
    billing: Any, kept: int
) -> None:
    # Whitespace padding, which the excerpt collapses, then "Bearer <token>" with ``kept``
    # characters of the token before the limit.
    billing.state["echo_at"] = ERROR_BODY_LIMIT - len("Bearer ") - kept
    model = FakeModel(call("billing__getFailingReport", {}))
    app = agent_app(billing, model, ["getFailingReport"])

    recorded = await recorded_run(app, "Report?")

    assert recorded.error is not None
    assert recorded.error.code == "OPENAPI_HTTP_ERROR"
    assert "[redacted]" in recorded.error.message
    assert [p for p in prefixes(TOKEN) if p in recorded.text] == []
    assert billing.seen[0]["authorization"] == f"Bearer {TOKEN}"  # it was sent, and echoed


@pytest.mark.parametrize(
    "headers",
    [{"Authorization": f"Bearer {TOKEN}"}, bearer],
    ids=["header mapping", "headers function with a credential"],
)
async def test_a_credential_used_as_a_response_property_name_is_not_quoted(
    billing: Any, headers: Any
) -> None:
    app = agent_app(
        billing, FakeModel(call("billing__getTally", {})), ["getTally"], headers=headers
    )

    recorded = await recorded_run(app, "Tally?")

    assert recorded.error is not None
    assert recorded.error.code == "OPENAPI_RESPONSE_INVALID"
    # The property is named by its place in the object, not by its name.
    assert "response.<property 0>: expected integer" in recorded.error.message
    assert TOKEN not in recorded.text


async def test_a_credential_in_a_redirect_host_is_not_quoted(billing: Any) -> None:
    # Host names are case-insensitive and come back lower-cased: that spelling counts too.
    billing.state["redirect_to"] = f"http://{API_KEY}.localhost:{billing.port}/"
    model = FakeModel(call("billing__getLatestExport", {}))
    app = agent_app(billing, model, ["getLatestExport"], headers={"X-Api-Key": API_KEY})

    recorded = await recorded_run(app, "Export?")

    assert recorded.error is not None
    assert recorded.error.code == "SSRF_BLOCKED"
    assert "a loopback name" in recorded.error.message
    assert API_KEY.lower() not in recorded.text.lower()
