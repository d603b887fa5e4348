"""The SSRF guard where the socket opens (``fevex.net.GuardedTransport``): a real HTTP server
on loopback, and name lookups answered by the test for the names it invents.

Every lookup and every connection the tests make is recorded; anything aimed past loopback
fails at once, so that a test cannot leave the machine even when the guard is wrong.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx2
import pytest

from fevex import FevexRunError
from fevex.net import GuardedNetworkBackend, GuardedTransport, HostPolicy

pytestmark = pytest.mark.anyio


@dataclass
class Server:
    port: int
    seen: list[dict[str, str]] = field(default_factory=list)


@pytest.fixture(scope="module")
def _server() -> Iterator[Server]:
    server = Server(port=0)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            server.seen.append({"path": self.path, "host": self.headers.get("host", "")})
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


@pytest.fixture
def server(_server: Server) -> Server:
    _server.seen.clear()
    return _server


@dataclass
class Network:
    names: dict[str, list[str]] = field(default_factory=dict)
    lookups: list[str] = field(default_factory=list)
    dialled: list[str] = field(default_factory=list)


def _loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture
def network(monkeypatch: pytest.MonkeyPatch) -> Network:
    recorded = Network()
    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode("ascii") if isinstance(host, bytes) else str(host)
        recorded.lookups.append(name)
        if name in recorded.names:
            return [
                (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, int(port)))
                for address in recorded.names[name]
            ]
        if not _loopback(name):
            raise OSError(f"tests may only reach loopback; refused a lookup of {name}")
        return real_getaddrinfo(host, port, *args, **kwargs)

    def dial(address: Any) -> None:
        recorded.dialled.append(str(address[0]))
        if not _loopback(str(address[0])):
            raise OSError(f"tests may only reach loopback; refused {address[0]}")

    def connect(self: socket.socket, address: Any) -> None:
        dial(address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        dial(address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    return recorded


async def _get(policy: HostPolicy, url: str) -> Any:
    async with httpx2.AsyncClient(transport=GuardedTransport(policy)) as client:
        return await client.get(url, timeout=10)


async def test_an_allowed_host_is_reached(server: Server, network: Network) -> None:
    policy = HostPolicy([f"127.0.0.1:{server.port}"])
    answer = await _get(policy, f"http://127.0.0.1:{server.port}/invoices/1")
    assert answer.status_code == 200
    assert answer.json() == {"ok": True}
    assert server.seen == [{"path": "/invoices/1", "host": f"127.0.0.1:{server.port}"}]


async def test_loopback_that_is_not_allowed_is_refused_before_a_connection(
    server: Server, network: Network
) -> None:
    with pytest.raises(FevexRunError) as caught:
        await _get(HostPolicy(), f"http://127.0.0.1:{server.port}/")
    assert caught.value.code == "SSRF_BLOCKED"
    assert f"127.0.0.1:{server.port}" in caught.value.message
    assert network.dialled == []
    assert server.seen == []


async def test_a_name_that_resolves_to_loopback_is_refused_where_it_connects(
    server: Server, network: Network
) -> None:
    network.names["billing.rebind.test"] = ["127.0.0.1"]
    with pytest.raises(FevexRunError) as caught:
        await _get(HostPolicy(), f"http://billing.rebind.test:{server.port}/")
    assert caught.value.code == "SSRF_BLOCKED"
    assert "billing.rebind.test" in caught.value.message
    assert "127.0.0.0/8 (Loopback)" in caught.value.message
    assert network.lookups == ["billing.rebind.test"]
    assert network.dialled == []
    assert server.seen == []


async def test_one_forbidden_answer_among_public_ones_refuses_the_name(
    server: Server, network: Network
) -> None:
    network.names["mixed.rebind.test"] = ["93.184.216.34", "127.0.0.1"]
    with pytest.raises(FevexRunError) as caught:
        await _get(HostPolicy(), f"http://mixed.rebind.test:{server.port}/")
    assert caught.value.code == "SSRF_BLOCKED"
    assert network.dialled == []  # not even the public address was dialled


async def test_an_allowed_name_connects_to_the_address_it_resolved_to(
    server: Server, network: Network
) -> None:
    network.names["billing.internal.test"] = ["127.0.0.1"]
    policy = HostPolicy([f"billing.internal.test:{server.port}"])
    answer = await _get(policy, f"http://billing.internal.test:{server.port}/x")
    assert answer.status_code == 200
    # The request still names the host it was sent to.
    assert server.seen == [{"path": "/x", "host": f"billing.internal.test:{server.port}"}]


async def test_a_public_name_is_dialled_at_the_address_that_was_checked(
    network: Network,
) -> None:
    # The name resolves once, to a public address; that very address is dialled (the test's
    # network refuses it, which shows where the connection went).
    network.names["api.example.test"] = ["93.184.216.34"]
    with pytest.raises(httpx2.ConnectError):
        await _get(HostPolicy(), "http://api.example.test/")
    assert network.lookups == ["api.example.test"]
    assert network.dialled == ["93.184.216.34"]


@pytest.mark.parametrize("host", ["localhost.", "127.0.0.1.", "0x7f.1.", "api.localhost."])
async def test_the_connection_layer_refuses_a_trailing_dot_loopback_name_itself(
    server: Server, network: Network, host: str
) -> None:
    # Whatever reaches the socket layer (a URL check skipped or changed later) is refused
    # there by name, before the resolver is asked: a refusal, not a failed lookup.
    backend = GuardedNetworkBackend(HostPolicy())
    with pytest.raises(FevexRunError) as caught:
        await backend.connect_tcp(host, server.port, timeout=5)
    assert caught.value.code == "SSRF_BLOCKED"
    assert network.lookups == []
    assert network.dialled == []


async def test_a_unix_socket_is_refused() -> None:
    backend = GuardedNetworkBackend(HostPolicy(["localhost"]))
    with pytest.raises(FevexRunError) as caught:
        await backend.connect_unix_socket("/var/run/docker.sock")
    assert caught.value.code == "SSRF_BLOCKED"


async def test_a_closed_port_is_an_httpx2_connect_error(network: Network) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    with pytest.raises(httpx2.ConnectError):
        await _get(HostPolicy([f"127.0.0.1:{closed}"]), f"http://127.0.0.1:{closed}/")


async def test_no_proxy_of_the_environment_is_used(
    server: Server, network: Network, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    policy = HostPolicy([f"127.0.0.1:{server.port}"])
    async with httpx2.AsyncClient(transport=GuardedTransport(policy), trust_env=True) as client:
        answer = await client.get(f"http://127.0.0.1:{server.port}/direct", timeout=10)
    assert answer.status_code == 200
    assert server.seen == [{"path": "/direct", "host": f"127.0.0.1:{server.port}"}]
