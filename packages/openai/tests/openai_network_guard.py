"""A guard that makes any attempt to reach a host off this machine fail loudly.

Name lookups and connections for anything but loopback raise ``BlockedNetworkAccess`` and
are recorded, so a test fails even when the code under test turns the error into a
recoverable provider error.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest

__all__ = ["BlockedNetworkAccess", "NetworkGuard"]


class BlockedNetworkAccess(OSError):
    """A test tried to reach a host that is not on this machine."""


class NetworkGuard:
    def __init__(self) -> None:
        self.attempts: list[str] = []

    def check(self, host: Any, port: Any) -> None:
        if isinstance(host, bytes):
            host = host.decode()
        if _is_local(host):
            return
        target = f"{host}:{port}"
        self.attempts.append(target)
        raise BlockedNetworkAccess(f"tests must stay on loopback, but one tried to reach {target}")

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        original_getaddrinfo = socket.getaddrinfo
        original_connect = socket.socket.connect
        original_connect_ex = socket.socket.connect_ex
        guard = self

        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            guard.check(host, port)
            return original_getaddrinfo(host, port, *args, **kwargs)

        def connect(self: socket.socket, address: Any) -> None:
            if self.family in (socket.AF_INET, socket.AF_INET6):
                guard.check(address[0], address[1])
            original_connect(self, address)

        def connect_ex(self: socket.socket, address: Any) -> int:
            if self.family in (socket.AF_INET, socket.AF_INET6):
                guard.check(address[0], address[1])
            return original_connect_ex(self, address)

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        monkeypatch.setattr(socket.socket, "connect", connect)
        monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


def _is_local(host: Any) -> bool:
    if host is None:
        return True
    host = str(host)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False  # a name that is not localhost, such as api.openai.com
