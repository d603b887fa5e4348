"""The SSRF guard as this plugin uses it: servers checked at registration and before each
call, every redirect hop checked, resolved addresses checked where the connection is opened.

The guard itself (``fevex.net``: its rules, address ranges and transport) is tested with the
core, in ``packages/core/tests/test_net_*.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from fevex import FevexConfigurationError, FevexRunError, ToolContext
from fevex_openapi import create_openapi_tool_provider

pytestmark = pytest.mark.anyio

SECRET = "sk_internal_9a8b7c6d5e4f"


def context(tool: str = "billing__getInvoice") -> ToolContext:
    return ToolContext("run-1", "session-1", "clerk", "call-1", tool)


def with_server(document: dict[str, Any], url: str) -> dict[str, Any]:
    return {**document, "servers": [{"url": url}]}


def provider(document: dict[str, Any], allow: list[str], **options: Any) -> Any:
    return create_openapi_tool_provider(document=document, operations={"allow": allow}, **options)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://169.254.169.254/latest", "169.254.0.0/16 (Link Local)"),
        ("http://169.254.10.1", "169.254.0.0/16 (Link Local)"),
        ("http://[fe80::1]:8080", "fe80::/10 (Link-Local Unicast)"),
        ("http://10.1.2.3", "10.0.0.0/8 (Private-Use)"),
        ("http://172.16.0.9", "172.16.0.0/12 (Private-Use)"),
        ("http://192.168.1.1", "192.168.0.0/16 (Private-Use)"),
        ("http://[fd12::1]", "fc00::/7 (Unique-Local)"),
        ("http://0.0.0.0:80", "0.0.0.0/32 (This host on this network)"),
        ("http://224.0.0.1", "224.0.0.0/4 (Multicast)"),
        ("http://100.64.0.1", "100.64.0.0/10 (Shared Address Space)"),
        ("http://[::ffff:127.0.0.1]", "::ffff:0:0/96 (IPv4-mapped Address)"),
        ("http://[64:ff9b::7f00:1]", "embeds 127.0.0.1, in 127.0.0.0/8 (Loopback)"),
        ("http://[::127.0.0.1]", "::/96 (IPv4-compatible IPv6 address"),
        ("http://2130706433", "127.0.0.0/8 (Loopback)"),
        ("http://0x7f.1", "127.0.0.0/8 (Loopback)"),
        ("http://localhost:8000", "a loopback name"),
        ("http://api.localhost", "a loopback name"),
        # A trailing dot names the same host (issue 21, item 8).
        ("http://localhost.:8000", "a loopback name"),
        ("http://api.localhost.", "a loopback name"),
        ("http://127.0.0.1.:8000", "127.0.0.0/8 (Loopback)"),
        ("http://0x7f.1.", "127.0.0.0/8 (Loopback)"),
    ],
)
def test_a_server_that_is_not_public_is_refused_at_registration(
    billing: Any, url: str, reason: str
) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        provider(with_server(billing.document(), url), ["getInvoice"])
    assert caught.value.code == "SSRF_BLOCKED"
    assert reason in caught.value.message
    assert caught.value.details["host"]


def test_the_real_service_on_loopback_needs_explicit_permission(billing: Any) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        provider(billing.document(), ["getInvoice"])
    assert caught.value.code == "SSRF_BLOCKED"
    assert f"127.0.0.1:{billing.port}" in caught.value.message
    # Permission is for that host and port only.
    with pytest.raises(FevexConfigurationError):
        provider(billing.document(), ["getInvoice"], allow_hosts=["127.0.0.1:1"])
    provider(billing.document(), ["getInvoice"], allow_hosts=[f"127.0.0.1:{billing.port}"])
    provider(billing.document(), ["getInvoice"], allow_hosts=["127.0.0.1"])


def test_base_url_is_checked_like_a_server(billing: Any) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        provider(billing.document(), ["getInvoice"], base_url="http://169.254.169.254")
    assert caught.value.code == "SSRF_BLOCKED"


@pytest.mark.parametrize(
    "allow_hosts",
    [["http://127.0.0.1"], ["127.0.0.1:0"], ["127.0.0.1:http"], [""], ["user@host"], [8080]],
)
def test_malformed_allow_hosts_keep_this_plugins_code(billing: Any, allow_hosts: Any) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        provider(billing.document(), ["getInvoice"], allow_hosts=allow_hosts)
    assert caught.value.code == "OPENAPI_ALLOW_HOSTS_INVALID"
    assert "allow_hosts" in caught.value.message
    # Raised in place of the core's ALLOW_HOSTS_INVALID, not chained to it.
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None


def test_allow_hosts_as_one_string_is_refused(billing: Any) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        provider(billing.document(), ["getInvoice"], allow_hosts="127.0.0.1")
    assert caught.value.code == "OPENAPI_ALLOW_HOSTS_INVALID"


def test_allow_hosts_spellings_reach_the_service(billing: Any) -> None:
    # The same host, with its port, with a trailing dot or alone: each names it.
    for entry in (f"127.0.0.1:{billing.port}", "127.0.0.1.", "127.0.0.1"):
        provider(billing.document(), ["getInvoice"], allow_hosts=[entry])
    with pytest.raises(FevexConfigurationError):
        provider(billing.document(), ["getInvoice"], allow_hosts=["127.0.0.2"])


async def test_a_redirect_to_an_ipv4_compatible_loopback_address_is_refused_before_connecting(
    billing: Any, internal: Any, network: Any
) -> None:
    # ::127.0.0.1 is loopback written as a deprecated IPv4-compatible IPv6 address.
    billing.state["redirect_to"] = f"http://[::127.0.0.1]:{internal.port}/admin"
    exports = provider(
        billing.document(), ["getLatestExport"], allow_hosts=[f"127.0.0.1:{billing.port}"]
    )

    with pytest.raises(FevexRunError) as caught:
        await exports.call_tool("getLatestExport", {}, context())

    assert caught.value.code == "SSRF_BLOCKED"
    assert f"[::127.0.0.1]:{internal.port}" in caught.value.message
    assert network.attempts == []  # no connection was even tried
    assert internal.seen == []


async def test_a_redirect_to_another_loopback_port_is_refused(billing: Any, internal: Any) -> None:
    billing.state["redirect_to"] = f"http://127.0.0.1:{internal.port}/admin"
    exports = provider(
        billing.document(), ["getLatestExport"], allow_hosts=[f"127.0.0.1:{billing.port}"]
    )

    with pytest.raises(FevexRunError) as caught:
        await exports.call_tool("getLatestExport", {}, context())

    assert caught.value.code == "SSRF_BLOCKED"
    assert f"127.0.0.1:{internal.port}" in caught.value.message
    assert [hit["path"] for hit in billing.seen] == ["/exports/latest"]
    assert internal.seen == []


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/iam/",
        "//169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "file:///etc/passwd",
    ],
)
async def test_a_redirect_to_the_metadata_service_or_a_file_is_refused(
    billing: Any, target: str
) -> None:
    billing.state["redirect_to"] = target
    exports = provider(
        billing.document(), ["getLatestExport"], allow_hosts=[f"127.0.0.1:{billing.port}"]
    )

    with pytest.raises(FevexRunError) as caught:
        await exports.call_tool("getLatestExport", {}, context())

    assert caught.value.code == "SSRF_BLOCKED"


async def test_a_same_origin_redirect_is_followed(billing: Any) -> None:
    legacy = provider(
        billing.document(),
        ["getLegacyInvoice"],
        allow_hosts=[f"127.0.0.1:{billing.port}"],
        headers={"Authorization": f"Bearer {SECRET}"},
    )

    answer = await legacy.call_tool("getLegacyInvoice", {"path": {"invoice_id": 5}}, context())

    assert answer["id"] == 5
    assert [hit["path"] for hit in billing.seen] == ["/invoices/5/legacy", "/invoices/5"]
    assert [hit["authorization"] for hit in billing.seen] == [f"Bearer {SECRET}"] * 2


async def test_configured_headers_never_follow_a_redirect_to_another_origin(
    billing: Any, internal: Any
) -> None:
    billing.state["redirect_to"] = f"http://127.0.0.1:{internal.port}/elsewhere"
    exports = provider(
        billing.document(),
        ["getLatestExport"],
        allow_hosts=[f"127.0.0.1:{billing.port}", f"127.0.0.1:{internal.port}"],
        headers={"Authorization": f"Bearer {SECRET}", "X-Request-Note": SECRET},
    )

    answer = await exports.call_tool("getLatestExport", {}, context())

    assert answer == {"internal": True, "authorization": None}
    assert billing.seen[0]["authorization"] == f"Bearer {SECRET}"
    assert internal.seen[0]["authorization"] is None
    assert internal.seen[0]["x-request-note"] is None


async def test_redirects_are_capped(billing: Any) -> None:
    billing.state["redirect_to"] = "/exports/latest"  # to itself, forever
    exports = provider(
        billing.document(),
        ["getLatestExport"],
        allow_hosts=[f"127.0.0.1:{billing.port}"],
        max_redirects=3,
    )

    with pytest.raises(FevexRunError) as caught:
        await exports.call_tool("getLatestExport", {}, context())

    assert caught.value.code == "OPENAPI_TOO_MANY_REDIRECTS"
    assert len(billing.seen) == 4


async def test_a_name_that_resolves_to_loopback_is_refused_where_it_connects(
    billing: Any, network: Any
) -> None:
    network.names["billing.rebind.test"] = ["127.0.0.1"]
    invoices = provider(
        billing.document(),
        ["getInvoice"],
        base_url=f"http://billing.rebind.test:{billing.port}",
    )

    with pytest.raises(FevexRunError) as caught:
        await invoices.call_tool("getInvoice", {"path": {"invoice_id": 1}}, context())

    assert caught.value.code == "SSRF_BLOCKED"
    assert "billing.rebind.test" in caught.value.message
    assert "127.0.0.0/8 (Loopback)" in caught.value.message
    assert billing.seen == []


async def test_one_forbidden_answer_among_public_ones_refuses_the_name(
    billing: Any, network: Any
) -> None:
    network.names["mixed.rebind.test"] = ["93.184.216.34", "127.0.0.1"]
    invoices = provider(
        billing.document(), ["getInvoice"], base_url=f"http://mixed.rebind.test:{billing.port}"
    )

    with pytest.raises(FevexRunError) as caught:
        await invoices.call_tool("getInvoice", {"path": {"invoice_id": 1}}, context())

    assert caught.value.code == "SSRF_BLOCKED"
    assert network.attempts == []  # not even the public address was dialled


async def test_an_allowed_name_connects_to_what_it_resolves_to(billing: Any, network: Any) -> None:
    network.names["billing.internal.test"] = ["127.0.0.1"]
    invoices = provider(
        billing.document(),
        ["getInvoice"],
        base_url=f"http://billing.internal.test:{billing.port}",
        allow_hosts=[f"billing.internal.test:{billing.port}"],
    )

    answer = await invoices.call_tool("getInvoice", {"path": {"invoice_id": 3}}, context())

    assert answer["id"] == 3


@pytest.mark.parametrize("host", ["localhost.", "127.0.0.1.", "LOCALHOST.", "api.localhost."])
async def test_a_trailing_dot_loopback_base_url_is_blocked_not_a_failed_request(
    billing: Any, network: Any, host: str
) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        provider(billing.document(), ["getInvoice"], base_url=f"http://{host}:{billing.port}")
    assert caught.value.code == "SSRF_BLOCKED"
    assert network.attempts == []


@pytest.mark.parametrize("host", ["localhost.", "127.0.0.1.", "LocalHost."])
async def test_a_redirect_to_a_trailing_dot_loopback_host_is_blocked_before_any_lookup(
    billing: Any, internal: Any, network: Any, host: str
) -> None:
    billing.state["redirect_to"] = f"http://{host}:{internal.port}/admin"
    exports = provider(
        billing.document(), ["getLatestExport"], allow_hosts=[f"127.0.0.1:{billing.port}"]
    )
    with pytest.raises(FevexRunError) as caught:
        await exports.call_tool("getLatestExport", {}, context())
    assert caught.value.code == "SSRF_BLOCKED"
    assert network.attempts == []
    assert internal.seen == []
