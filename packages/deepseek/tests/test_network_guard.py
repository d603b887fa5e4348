"""The guard: any attempt to leave loopback fails loudly, and loopback still works."""

import socket
from typing import Any

import pytest

from fevex.messages import Message
from fevex.models import ModelInput
from fevex_deepseek import create_deepseek


@pytest.fixture
def tripwires(network_guard: Any) -> list[str]:
    """Stand in for the real socket calls: even a broken guard sends nothing anywhere.

    Loopback calls still go through, so a test can use the loopback server meanwhile.
    """
    tripped: list[str] = []
    real_getaddrinfo = network_guard.real_getaddrinfo
    real_connect = network_guard.real_connect

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in (None, "localhost", "127.0.0.1", "::1"):
            tripped.append(f"getaddrinfo {host}")
            raise OSError("tripwire")
        return real_getaddrinfo(host, *args, **kwargs)

    def connect(sock: socket.socket, address: Any) -> Any:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] != "127.0.0.1":
            tripped.append(f"connect {address}")
            raise OSError("tripwire")
        return real_connect(sock, address)

    network_guard.real_getaddrinfo = getaddrinfo
    network_guard.real_connect = connect
    network_guard.real_connect_ex = connect
    return tripped


def test_a_socket_to_a_public_address_is_refused(network_guard: Any, tripwires: list[str]) -> None:
    with pytest.raises(network_guard.error_type, match="only reach loopback"):
        socket.create_connection(("198.51.100.7", 443), timeout=1)
    with pytest.raises(network_guard.error_type):
        socket.getaddrinfo("api.deepseek.com", 443)

    assert tripwires == []
    assert network_guard.blocked == ["198.51.100.7", "api.deepseek.com"]
    network_guard.blocked.clear()  # recorded attempts fail the test at teardown otherwise


@pytest.mark.anyio
async def test_the_adapter_cannot_reach_the_real_provider(
    network_guard: Any, tripwires: list[str]
) -> None:
    provider = create_deepseek(api_key="sk-x", max_retries=0)
    model = provider("deepseek-v4-flash")

    # The guard's error is no network error the adapter could map: it surfaces as itself.
    with pytest.raises(network_guard.error_type, match=r"api\.deepseek\.com"):
        async for _ in model.stream(ModelInput((Message.user("Hi"),))):
            pass
    await model.aclose()

    assert tripwires == []
    assert network_guard.blocked == ["api.deepseek.com"]
    network_guard.blocked.clear()


def test_loopback_stays_reachable(deepseek_server: Any) -> None:
    host, port = deepseek_server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5):
        pass
