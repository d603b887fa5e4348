"""``create_http_app``'s options and the public names of ``fevex.http`` and
``fevex.channels``. The app is called in process here (``httpx2.ASGITransport``): these are
its settings, not the server's behaviour, which the other modules test over loopback."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

import fevex.channels
import fevex.http
from fevex import FevexConfigurationError, create_fevex, define_agent
from fevex.http import ERROR_STATUS, create_http_app
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio


def fevex_app() -> Any:
    return create_fevex(
        models={"default": FakeModel()}, agents=[define_agent(name="a", instructions="x")]
    )


def test_public_names() -> None:
    assert set(fevex.http.__all__) == {
        "ERROR_STATUS", "AsyncFevexClient", "Authenticate", "FevexClient", "FevexHttpApp",
        "FevexHttpError", "Forbidden", "RunPage", "create_http_app",
    }  # fmt: skip
    assert set(fevex.channels.__all__) == {
        "ChannelAdapter", "ChannelEvent", "ChannelMessage", "ChannelOutput", "ChannelResult",
        "conversation_session_id", "delivery_run_id", "handle_channel_input",
        "handle_channel_input_sync",
    }  # fmt: skip
    for module in (fevex.http, fevex.channels):
        for name in module.__all__:
            assert hasattr(module, name), name


@pytest.mark.parametrize(
    "options",
    [
        {},  # neither authenticate nor allow_anonymous
        {"allow_anonymous": True, "event_page_size": 0},
        {"allow_anonymous": True, "event_page_size": 1001},
        {"allow_anonymous": True, "poll_interval": 0},
        {"allow_anonymous": True, "max_body_size": 0},
        {"allow_anonymous": True, "cors_origins": "https://a.example"},
        {"authenticate": "not callable"},
        {"allow_anonymous": True, "allowed_hosts": "agents.example"},
        {"allow_anonymous": True, "allowed_hosts": []},
        {"allow_anonymous": True, "allowed_hosts": ["agents.*"]},
        {"allow_anonymous": True, "allowed_hosts": [""]},
        {"allow_anonymous": True, "allow_cross_site_requests": "yes"},
        # The console's pages act with the visitor's credentials: always guarded.
        {"allow_anonymous": True, "ui": True, "allow_cross_site_requests": True},
    ],
)
def test_unsafe_or_unusable_options_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(FevexConfigurationError) as refused:
        create_http_app(fevex_app(), **options)
    assert refused.value.code == "INVALID_CONFIG"


async def test_configured_origins_get_cors_headers_and_others_do_not() -> None:
    app = create_http_app(
        fevex_app(), allow_anonymous=True, cors_origins=["https://console.example"]
    )
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://localhost") as http:
        allowed = await http.options(
            "/v1/runs",
            headers={
                "Origin": "https://console.example",
                "Access-Control-Request-Method": "GET",
                "Access-Control-Request-Headers": "Last-Event-ID",
            },
        )
        other = await http.get("/v1/runs", headers={"Origin": "https://evil.example"})
    assert allowed.headers["access-control-allow-origin"] == "https://console.example"
    assert "access-control-allow-origin" not in other.headers


async def test_an_app_that_opts_out_serves_cross_site_posts() -> None:
    cross_site = {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
    answers = []
    for opted_out in (False, True):
        app = create_http_app(
            fevex_app(), allow_anonymous=True, allow_cross_site_requests=opted_out
        )
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://localhost") as http:
            response = await http.post("/v1/agents/a/runs", json={"input": "x"}, headers=cross_site)
            answers.append((response.status_code, (response.json()["error"] or {}).get("code")))
        await app.fevex.close()
    assert answers == [(403, "CROSS_SITE_REQUEST"), (201, None)]
    with pytest.raises(FevexConfigurationError) as refused:
        create_http_app(
            fevex_app(), allow_anonymous=True, allow_cross_site_requests=True
        ).with_console()
    assert refused.value.code == "INVALID_CONFIG"


async def test_allowed_hosts_replace_the_loopback_hosts() -> None:
    app = create_http_app(fevex_app(), allow_anonymous=True, allowed_hosts=["agents.example"])
    answers = {}
    transport = httpx2.ASGITransport(app=app)
    for host in ("agents.example", "localhost", "127.0.0.1", "evil.example"):
        async with httpx2.AsyncClient(transport=transport, base_url=f"http://{host}") as http:
            answers[host] = (await http.get("/v1/runs")).status_code
    assert answers == {
        "agents.example": 200,
        "localhost": 400,
        "127.0.0.1": 400,
        "evil.example": 400,
    }
    added = app.with_allowed_hosts(["desk.example"])
    assert added.allowed_hosts == ("agents.example", "desk.example")
    default = create_http_app(fevex_app(), allow_anonymous=True).with_allowed_hosts(["10.0.0.5"])
    assert default.allowed_hosts == ("localhost", "127.0.0.1", "[::1]", "10.0.0.5")


def test_every_status_in_the_table_is_an_error_status() -> None:
    assert all(400 <= status < 600 for status in ERROR_STATUS.values())
    assert ERROR_STATUS["INVALID_CURSOR"] == 400
    assert ERROR_STATUS["UNAUTHENTICATED"] == 401
    assert ERROR_STATUS["REQUEST_TOO_LARGE"] == 413
