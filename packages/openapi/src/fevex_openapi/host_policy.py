"""The SSRF guard's rules: which hosts and addresses a provider may reach.

A request may go to a public address. Loopback, link-local (which holds the cloud metadata
services), private, unique-local, carrier-grade NAT, unspecified, multicast, reserved and
documentation addresses are refused, unless the request's host is named in ``allow_hosts``
exactly, alone (``"billing.internal"``) or with the port (``"127.0.0.1:8080"``).

The rules are applied twice: to a URL before it is used (the server at registration and
before each call, every redirect target), which catches literal addresses and ``localhost``
early; and to the addresses a host name actually resolves to, when the connection is opened
(:mod:`fevex_openapi.transport`), so that DNS cannot send an allowed name somewhere else.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from fevex_openapi.errors import configuration_error, run_error

__all__ = ["HostPolicy", "IPAddress", "address_refusal", "literal_address"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_METADATA = frozenset(
    ipaddress.ip_address(address)
    for address in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, Oracle
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IPv6
        "100.100.100.200",  # Alibaba Cloud
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LEGACY_IPV4 = re.compile(r"[0-9a-fA-FxX.]+")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def literal_address(host: str) -> IPAddress | None:
    """``host`` as an IP address when it is one, including legacy IPv4 spellings that
    resolvers accept (``2130706433``, ``0x7f.1``, ``127.1``)."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        pass
    if _LEGACY_IPV4.fullmatch(host) and any(c.isdigit() for c in host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def address_refusal(address: IPAddress) -> str | None:
    """Why ``address`` is not public (``None`` when it is)."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            reason = address_refusal(embedded)
            if reason is not None:
                return reason
    if address in _METADATA:
        return "a cloud metadata address"
    for reason, applies in (
        ("a loopback address", address.is_loopback),
        ("a link-local address", address.is_link_local),
        ("an unspecified address", address.is_unspecified),
        ("a multicast address", address.is_multicast),
        ("a private address", address.is_private),
        ("not a public address", not address.is_global),
    ):
        if applies:
            return reason
    return None


def _normal_host(host: str) -> str:
    """One spelling per host: lower case, no brackets or trailing dot, IPv6 compressed,
    international names in their ASCII (punycode) form."""
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if not host.isascii():
        with contextlib.suppress(UnicodeError):
            host = host.encode("idna").decode("ascii")
    return host


@dataclass(frozen=True, slots=True)
class _Entry:
    host: str
    port: int | None


def _parse_entry(entry: object) -> _Entry:
    if not isinstance(entry, str) or not entry.strip() or "/" in entry or "@" in entry:
        raise configuration_error(
            "OPENAPI_ALLOW_HOSTS_INVALID",
            f"allow_hosts entries are 'host' or 'host:port' (no scheme or path), not {entry!r}.",
        )
    text = entry.strip()
    host, port = text, ""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":") if rest.startswith(":") else rest
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise configuration_error(
            "OPENAPI_ALLOW_HOSTS_INVALID", f"allow_hosts entry {entry!r} has an invalid port."
        )
    if not host:
        raise configuration_error(
            "OPENAPI_ALLOW_HOSTS_INVALID", f"allow_hosts entry {entry!r} names no host."
        )
    return _Entry(_normal_host(host), int(port) if port else None)


class HostPolicy:
    """The hosts one provider may reach; see the module documentation."""

    def __init__(self, allow_hosts: Iterable[str] = ()) -> None:
        if isinstance(allow_hosts, str):
            raise configuration_error(
                "OPENAPI_ALLOW_HOSTS_INVALID", "allow_hosts is a list of hosts, not one string."
            )
        self._allowed = frozenset(_parse_entry(entry) for entry in allow_hosts)

    def allows(self, host: str, port: int) -> bool:
        """Whether ``host`` (as in the URL) was explicitly allowed, on ``port``."""
        host = _normal_host(host)
        return _Entry(host, None) in self._allowed or _Entry(host, port) in self._allowed

    def check_url(self, url: str, *, at_definition: bool = False) -> tuple[str, int]:
        """Refuse ``url`` when its scheme or host is not allowed; returns host and port.

        Host names are only refused here when they are local by definition
        (``localhost``); the addresses they resolve to are checked on connection.
        """
        refuse = _refuser(at_definition)
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            raise refuse("a malformed URL", "(unparsable)", False) from None
        host = parts.hostname or ""
        if parts.scheme not in _DEFAULT_PORTS or not host:
            raise refuse("only http and https URLs with a host", host or "(no host)", False)
        if parts.username is not None or parts.password is not None:
            raise refuse("a URL with user information", host, False)
        port = port or _DEFAULT_PORTS[parts.scheme]
        if self.allows(host, port):
            return host, port
        address = literal_address(host)
        reason = address_refusal(address) if address is not None else None
        if address is None and (host == "localhost" or host.endswith(".localhost")):
            reason = "a loopback name"
        if reason is not None:
            raise refuse(reason, _shown(host, port), True)
        return host, port

    def check_resolved(self, host: str, port: int, addresses: Iterable[IPAddress]) -> None:
        """Refuse the connection unless every address ``host`` resolved to is allowed."""
        if self.allows(host, port):
            return
        for address in addresses:
            reason = address_refusal(address)
            if reason is not None:
                raise run_error(
                    "SSRF_BLOCKED",
                    f"Refused to connect to {_shown(host, port)}: it resolves to {reason}. "
                    "Add the host to allow_hosts if this service is meant to reach it.",
                    details={"host": host, "port": port},
                )


def _shown(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _refuser(at_definition: bool) -> Callable[[str, str, bool], Exception]:
    def refuse(reason: str, host: str, allowable: bool) -> Exception:
        message = f"Refused to reach {host}: {reason}."
        if allowable:
            message += " Add the host to allow_hosts if this service is meant to reach it."
        if at_definition:
            return configuration_error("SSRF_BLOCKED", message, {"host": host})
        return run_error("SSRF_BLOCKED", message, details={"host": host})

    return refuse
