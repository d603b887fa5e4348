"""The SSRF guard's rules: which hosts and addresses a plugin may reach.

A request may go to a public address, unless the request's host is named in
``allow_hosts`` exactly, alone (``"billing.internal"``) or with the port
(``"127.0.0.1:8080"``). Whether an address is public is decided in one place,
:func:`address_refusal`, from tables of the IANA IPv4 and IPv6 Special-Purpose Address
Registries: an address is refused when the most specific registry range holding it is not
marked globally reachable (deprecated and "N/A" ranges included), and when any IPv4 address
embedded in an IPv6 one (IPv4-compatible, IPv4-mapped, IPv4-translated, NAT64, 6to4,
Teredo server and client) would be refused. Multicast, the deprecated site-local range and
IPv6 space the IETF has not allocated for global unicast are refused as well.

The rules are applied twice: to a URL before it is used (:meth:`HostPolicy.check_url`: a
server at registration and before each call, every redirect target), which catches literal
addresses and ``localhost`` early; and to the addresses a host name actually resolves to,
when the connection is opened (:mod:`fevex.net.transport`), so that DNS cannot send an
allowed name somewhere else.

Refusals are ``SSRF_BLOCKED`` (a :class:`~fevex.FevexConfigurationError` from
``check_url(..., at_definition=True)``, otherwise a :class:`~fevex.FevexRunError`); an
``allow_hosts`` entry that is not ``host`` or ``host:port`` is ``ALLOW_HOSTS_INVALID``.
Messages name the host and port, never a URL's path or query (which may carry a key).
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from fevex.errors import FevexConfigurationError, FevexRunError

__all__ = [
    "IPV4_SPECIAL_PURPOSE",
    "IPV6_SPECIAL_PURPOSE",
    "OTHER_RANGES",
    "AddressRange",
    "HostPolicy",
    "IPAddress",
    "address_refusal",
    "host_refusal",
    "is_public_address",
    "literal_address",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class AddressRange:
    """One row of an address registry: a range, its name there, and whether addresses in it
    are globally reachable (then the guard lets them through)."""

    network: ipaddress.IPv4Network | ipaddress.IPv6Network
    name: str
    globally_reachable: bool


def _table(*rows: tuple[str, str, bool]) -> tuple[AddressRange, ...]:
    return tuple(AddressRange(ipaddress.ip_network(n), name, ok) for n, name, ok in rows)


# IANA IPv4 Special-Purpose Address Registry (RFC 6890 and later), with its "Globally
# Reachable" column. 192.88.99.0/24 is deprecated (RFC 7526).
IPV4_SPECIAL_PURPOSE = _table(
    ("0.0.0.0/8", "This network", False),
    ("0.0.0.0/32", "This host on this network", False),
    ("10.0.0.0/8", "Private-Use", False),
    ("100.64.0.0/10", "Shared Address Space", False),
    ("127.0.0.0/8", "Loopback", False),
    ("169.254.0.0/16", "Link Local", False),
    ("172.16.0.0/12", "Private-Use", False),
    ("192.0.0.0/24", "IETF Protocol Assignments", False),
    ("192.0.0.0/29", "IPv4 Service Continuity Prefix", False),
    ("192.0.0.8/32", "IPv4 dummy address", False),
    ("192.0.0.9/32", "Port Control Protocol Anycast", True),
    ("192.0.0.10/32", "Traversal Using Relays around NAT Anycast", True),
    ("192.0.0.170/32", "NAT64/DNS64 Discovery", False),
    ("192.0.0.171/32", "NAT64/DNS64 Discovery", False),
    ("192.0.2.0/24", "Documentation (TEST-NET-1)", False),
    ("192.31.196.0/24", "AS112-v4", True),
    ("192.52.193.0/24", "AMT", True),
    ("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", False),
    ("192.168.0.0/16", "Private-Use", False),
    ("192.175.48.0/24", "Direct Delegation AS112 Service", True),
    ("198.18.0.0/15", "Benchmarking", False),
    ("198.51.100.0/24", "Documentation (TEST-NET-2)", False),
    ("203.0.113.0/24", "Documentation (TEST-NET-3)", False),
    ("240.0.0.0/4", "Reserved", False),
    ("255.255.255.255/32", "Limited Broadcast", False),
)

# IANA IPv6 Special-Purpose Address Registry (RFC 6890 and later). "N/A" rows (Teredo,
# 6to4: reachability depends on the embedded address) and the deprecated ORCHID block are
# refused.
IPV6_SPECIAL_PURPOSE = _table(
    ("::1/128", "Loopback Address", False),
    ("::/128", "Unspecified Address", False),
    ("::ffff:0:0/96", "IPv4-mapped Address", False),
    ("64:ff9b::/96", "IPv4-IPv6 Translat.", True),
    ("64:ff9b:1::/48", "IPv4-IPv6 Translat.", False),
    ("100::/64", "Discard-Only Address Block", False),
    ("100:0:0:1::/64", "Dummy IPv6 Prefix", False),
    ("2001::/23", "IETF Protocol Assignments", False),
    ("2001::/32", "TEREDO", False),
    ("2001:1::1/128", "Port Control Protocol Anycast", True),
    ("2001:1::2/128", "Traversal Using Relays around NAT Anycast", True),
    ("2001:1::3/128", "DNS-SD Service Registration Protocol Anycast", True),
    ("2001:2::/48", "Benchmarking", False),
    ("2001:3::/32", "AMT", True),
    ("2001:4:112::/48", "AS112-v6", True),
    ("2001:10::/28", "Deprecated (previously ORCHID)", False),
    ("2001:20::/28", "ORCHIDv2", True),
    ("2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs) Prefix", True),
    ("2001:db8::/32", "Documentation", False),
    ("2002::/16", "6to4", False),
    ("2620:4f:8000::/48", "Direct Delegation AS112 Service", True),
    ("3fff::/20", "Documentation", False),
    ("5f00::/16", "Segment Routing (SRv6) SIDs", False),
    ("fc00::/7", "Unique-Local", False),
    ("fe80::/10", "Link-Local Unicast", False),
)

# Ranges the special-purpose registries leave out. Multicast has registries of its own; of
# the IPv6 Address Space Registry only 2000::/3 is global unicast (the special-purpose rows
# above are more specific and win), the rest being reserved by the IETF, deprecated
# site-local space among it; the IPv4-compatible and IPv4-translated forms are deprecated.
OTHER_RANGES = _table(
    ("224.0.0.0/4", "Multicast", False),
    ("::/0", "Reserved by the IETF", False),
    ("2000::/3", "Global Unicast", True),
    ("::/96", "IPv4-compatible IPv6 address, deprecated by RFC 4291", False),
    ("::ffff:0:0:0/96", "IPv4-translated IPv6 address, RFC 2765", False),
    ("fec0::/10", "Site-local, deprecated by RFC 3879", False),
    ("ff00::/8", "Multicast", False),
)

_RANGES = {
    4: tuple(r for r in (*IPV4_SPECIAL_PURPOSE, *OTHER_RANGES) if r.network.version == 4),
    6: tuple(r for r in (*IPV6_SPECIAL_PURPOSE, *OTHER_RANGES) if r.network.version == 6),
}

# IPv6 forms that carry an IPv4 address in their last 32 bits. 64:ff9b:1::/48 embeds one
# too, at a place that depends on the prefix length its operator chose (RFC 6052), and is
# refused whole by the registry.
_IPV4_IN_LAST_32_BITS = tuple(
    ipaddress.IPv6Network(network)
    for network in ("::/96", "::ffff:0:0/96", "::ffff:0:0:0/96", "64:ff9b::/96")
)

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
    """Why ``address`` is not public, naming the range that refuses it; ``None`` when it is
    public. This is the guard's one decision about addresses."""
    refusing = _refusing_range(address)
    if refusing is not None:
        return f"an address in {refusing.network} ({refusing.name})"
    if isinstance(address, ipaddress.IPv6Address):
        for embedded in _embedded_ipv4(address):
            refusing = _refusing_range(embedded)
            if refusing is not None:
                return f"an address that embeds {embedded}, in {refusing.network} ({refusing.name})"
    return None


def is_public_address(address: IPAddress) -> bool:
    """Whether the guard lets a connection go to ``address`` (see :func:`address_refusal`)."""
    return address_refusal(address) is None


def _refusing_range(address: IPAddress) -> AddressRange | None:
    """The most specific range holding ``address``, when it is not globally reachable."""
    found: AddressRange | None = None
    for row in _RANGES[address.version]:
        if address in row.network and (
            found is None or row.network.prefixlen > found.network.prefixlen
        ):
            found = row
    return found if found is not None and not found.globally_reachable else None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    embedded: list[ipaddress.IPv4Address] = []
    if any(address in network for network in _IPV4_IN_LAST_32_BITS):
        embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if address.sixtofour is not None:
        embedded.append(address.sixtofour)
    if address.teredo is not None:
        embedded.extend(address.teredo)  # the server, and the client de-obfuscated
    return embedded


def host_refusal(host: str) -> str | None:
    """Why the name ``host`` is refused before any lookup: a literal address that is not
    public, or a loopback name; ``None`` when only its resolved addresses can tell.

    The name is read in its one normal spelling first, so that a trailing dot
    (``localhost.``, ``127.0.0.1.``: the same host to a resolver) is no way around the guard.
    """
    name = _normal_host(host)
    address = literal_address(name)
    if address is not None:
        return address_refusal(address)
    if name == "localhost" or name.endswith(".localhost"):
        return "a loopback name"
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
        raise _invalid(
            f"allow_hosts entries are 'host' or 'host:port' (no scheme or path), not {entry!r}."
        )
    text = entry.strip()
    host, port = text, ""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":") if rest.startswith(":") else rest
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise _invalid(f"allow_hosts entry {entry!r} has an invalid port.")
    if not host:
        raise _invalid(f"allow_hosts entry {entry!r} names no host.")
    return _Entry(_normal_host(host), int(port) if port else None)


class HostPolicy:
    """The hosts one provider may reach; see the module documentation."""

    def __init__(self, allow_hosts: Iterable[str] = ()) -> None:
        if isinstance(allow_hosts, str):
            raise _invalid("allow_hosts is a list of hosts, not one string.")
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
        reason = host_refusal(host)
        if reason is not None:
            raise refuse(reason, _shown(host, port), True)
        return host, port

    def check_host(self, host: str, port: int) -> None:
        """Refuse a connection to ``host`` before it is resolved, when the name itself is
        local or a refused literal address (see :func:`host_refusal`)."""
        if self.allows(host, port):
            return
        reason = host_refusal(host)
        if reason is not None:
            raise _blocked(
                f"Refused to connect to {_shown(host, port)}: {reason}. "
                "Add the host to allow_hosts if this service is meant to reach it.",
                details={"host": host, "port": port},
            )

    def check_resolved(self, host: str, port: int, addresses: Iterable[IPAddress]) -> None:
        """Refuse the connection unless every address ``host`` resolved to is allowed."""
        if self.allows(host, port):
            return
        for address in addresses:
            reason = address_refusal(address)
            if reason is not None:
                raise _blocked(
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
            return FevexConfigurationError("SSRF_BLOCKED", message, details={"host": host})
        return _blocked(message, details={"host": host})

    return refuse


def _blocked(message: str, *, details: dict[str, Any] | None = None) -> FevexRunError:
    # The tool category: the guard stands between a tool and what it reaches.
    return FevexRunError("SSRF_BLOCKED", message, details=details, category="tool")


def _invalid(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("ALLOW_HOSTS_INVALID", message)
