"""An httpx2 transport whose connections pass the SSRF guard.

The guard sits where the socket is opened: httpcore2 (httpx2's connection layer) asks a
network backend to connect to ``host:port``; this backend resolves the host once, refuses
the connection unless every address is allowed, then connects to one of those very
addresses. A DNS answer cannot change between the check and the connection (rebinding),
and TLS still verifies the certificate against the host name. Every connection goes
through here, redirects included. No proxy is ever used: the transport takes none and
ignores the environment's.

Importing this module imports httpx2 and httpcore2, which the core does not depend on: a
plugin that uses the transport names them among its own dependencies (fevex-openapi and
fevex-mcp do). ``import fevex`` and ``import fevex.net`` never load this module; reading
``fevex.net.GuardedTransport`` (or ``from fevex.net import GuardedTransport``) does.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import AsyncIterator, Iterable
from typing import Any, NoReturn

import anyio
import httpcore2
import httpx2

from fevex.errors import FevexRunError
from fevex.net.host_policy import HostPolicy, IPAddress

__all__ = ["GuardedNetworkBackend", "GuardedTransport"]

# httpcore2 exceptions and the httpx2 exceptions that callers of a transport expect.
_EXCEPTIONS: tuple[tuple[type[Exception], type[Exception]], ...] = (
    (httpcore2.ConnectTimeout, httpx2.ConnectTimeout),
    (httpcore2.ReadTimeout, httpx2.ReadTimeout),
    (httpcore2.WriteTimeout, httpx2.WriteTimeout),
    (httpcore2.PoolTimeout, httpx2.PoolTimeout),
    (httpcore2.TimeoutException, httpx2.TimeoutException),
    (httpcore2.ConnectError, httpx2.ConnectError),
    (httpcore2.ReadError, httpx2.ReadError),
    (httpcore2.WriteError, httpx2.WriteError),
    (httpcore2.RemoteProtocolError, httpx2.RemoteProtocolError),
    (httpcore2.LocalProtocolError, httpx2.LocalProtocolError),
    (httpcore2.UnsupportedProtocol, httpx2.UnsupportedProtocol),
    (httpcore2.ProtocolError, httpx2.ProtocolError),
    (httpcore2.NetworkError, httpx2.NetworkError),
)


def _reraise(error: Exception) -> NoReturn:
    """Raise ``error`` as the httpx2 exception it corresponds to, or as itself."""
    for source, target in _EXCEPTIONS:
        if isinstance(error, source):
            raise target(str(error)) from error
    raise error


class GuardedNetworkBackend(httpcore2.AsyncNetworkBackend):
    """Opens TCP connections only to addresses the :class:`HostPolicy` allows."""

    def __init__(self, policy: HostPolicy) -> None:
        self._policy = policy
        self._backend = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        if self._policy.allows(host, port):
            targets = [host]
        else:
            # Names that are local by definition never reach the resolver: a lookup of
            # ``localhost.`` may fail, which would report a refusal as an outage.
            self._policy.check_host(host, port)
            addresses = await self._resolve(host, port, timeout)
            self._policy.check_resolved(host, port, addresses)
            targets = [str(address) for address in addresses]
        failure: Exception | None = None
        for target in targets:
            try:
                return await self._backend.connect_tcp(
                    target,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as error:
                failure = error
        assert failure is not None
        raise failure

    async def _resolve(self, host: str, port: int, timeout: float | None) -> list[IPAddress]:
        try:
            with anyio.fail_after(timeout):
                answers = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except TimeoutError:
            raise httpcore2.ConnectTimeout(f"resolving {host} timed out") from None
        except OSError as error:
            raise httpcore2.ConnectError(f"could not resolve {host}: {error}") from None
        addresses: list[IPAddress] = []
        for *_, sockaddr in answers:
            address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
            if address not in addresses:
                addresses.append(address)
        if not addresses:
            raise httpcore2.ConnectError(f"{host} resolved to no address")
        return addresses

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise FevexRunError("SSRF_BLOCKED", "Refused to connect to a Unix socket.", category="tool")

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class _ResponseStream(httpx2.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._stream:
                yield chunk
        except Exception as error:
            _reraise(error)

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()


class GuardedTransport(httpx2.AsyncBaseTransport):
    """An httpx2 transport over an httpcore2 pool that connects through the guard."""

    def __init__(self, policy: HostPolicy) -> None:
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(),
            network_backend=GuardedNetworkBackend(policy),
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        assert isinstance(request.stream, httpx2.AsyncByteStream)
        core_request = httpcore2.Request(
            method=request.method,
            url=httpcore2.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = await self._pool.handle_async_request(core_request)
        except Exception as error:
            _reraise(error)
        return httpx2.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()
