"""The test suite's own guard: anything aimed past loopback fails loudly."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from fevex import ToolContext
from fevex_openapi import create_openapi_tool_provider

pytestmark = pytest.mark.anyio


def test_a_raw_connection_past_loopback_is_refused_and_recorded(network: Any) -> None:
    with pytest.raises(RuntimeError, match="tests may only reach loopback"):
        socket.create_connection(("192.0.2.10", 80), timeout=1)
    with pytest.raises(RuntimeError, match="tests may only reach loopback"):
        socket.getaddrinfo("example.com", 443)
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(RuntimeError, match="tests may only reach loopback"):
            raw.connect(("198.51.100.7", 443))
    finally:
        raw.close()
    assert network.take_attempts() == [
        "lookup of 192.0.2.10",
        "lookup of example.com",
        "connection to 198.51.100.7",
    ]


async def test_a_provider_aimed_at_a_public_host_stops_at_the_guard(
    billing: Any, network: Any
) -> None:
    provider = create_openapi_tool_provider(
        document=billing.document(),
        operations={"allow": ["getInvoice"]},
        base_url="https://billing.example.com",
    )
    context = ToolContext("run-1", "session-1", "clerk", "call-1", "billing__getInvoice")

    with pytest.raises(RuntimeError, match="tests may only reach loopback"):
        await provider.call_tool("getInvoice", {"path": {"invoice_id": 1}}, context)

    assert network.take_attempts() == ["lookup of billing.example.com"]


def test_loopback_stays_reachable(billing: Any, network: Any) -> None:
    assert billing.document()["openapi"].startswith("3.1")
    assert network.attempts == []
