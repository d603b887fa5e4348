"""The guard that keeps these tests on loopback fires for real provider hosts."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest
from openai_network_guard import BlockedNetworkAccess, NetworkGuard

from fevex.errors import FevexRunError
from fevex.messages import Message
from fevex.models import ModelInput
from fevex_openai import OpenAIModel


@pytest.mark.parametrize("host", ["api.openai.com", "api.deepseek.com", "93.184.215.14"])
def test_connections_to_other_hosts_fail(network_guard: NetworkGuard, host: str) -> None:
    with pytest.raises(BlockedNetworkAccess, match=host):
        socket.create_connection((host, 443), timeout=1)
    assert network_guard.attempts == [f"{host}:443"]
    network_guard.attempts.clear()  # seen; otherwise the guard fails this test at teardown


@pytest.mark.anyio
async def test_a_model_pointed_at_openai_cannot_reach_it(
    network_guard: NetworkGuard, make_model: Callable[..., OpenAIModel]
) -> None:
    model = make_model(base_url="https://api.openai.com/v1")
    with pytest.raises(FevexRunError) as caught:
        async for _ in model.stream(ModelInput((Message.user("Hi"),))):
            pass
    assert caught.value.code == "PROVIDER_NETWORK_ERROR"
    assert network_guard.attempts == ["api.openai.com:443"]
    network_guard.attempts.clear()


def test_loopback_stays_reachable(network_guard: NetworkGuard) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            pass
        with socket.create_connection(("localhost", port), timeout=1):
            pass
    assert network_guard.attempts == []
