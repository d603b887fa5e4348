"""Which addresses the SSRF guard (``fevex.net``) lets through, range by range of the IANA
Special-Purpose Address Registries, transcribed here independently of the module's own tables.

Every range of both registries has one address inside it; an address is public only when
its range is globally reachable (the longest matching prefix decides) and every IPv4
address it embeds is public too.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from fevex.net import is_public_address

# (range, registry name, an address inside it, globally reachable). "N/A" and deprecated
# entries are refused: they are not marked globally reachable.
IPV4_SPECIAL_PURPOSE = [
    ("0.0.0.0/8", "This network", "0.1.2.3", False),
    ("0.0.0.0/32", "This host on this network", "0.0.0.0", False),
    ("10.0.0.0/8", "Private-Use", "10.20.30.40", False),
    ("100.64.0.0/10", "Shared Address Space", "100.100.100.200", False),
    ("127.0.0.0/8", "Loopback", "127.255.255.254", False),
    ("169.254.0.0/16", "Link Local", "169.254.169.254", False),
    ("172.16.0.0/12", "Private-Use", "172.31.255.254", False),
    ("192.0.0.0/24", "IETF Protocol Assignments", "192.0.0.200", False),
    ("192.0.0.0/29", "IPv4 Service Continuity Prefix", "192.0.0.1", False),
    ("192.0.0.8/32", "IPv4 dummy address", "192.0.0.8", False),
    ("192.0.0.9/32", "Port Control Protocol Anycast", "192.0.0.9", True),
    ("192.0.0.10/32", "Traversal Using Relays around NAT Anycast", "192.0.0.10", True),
    ("192.0.0.170/32", "NAT64/DNS64 Discovery", "192.0.0.170", False),
    ("192.0.0.171/32", "NAT64/DNS64 Discovery", "192.0.0.171", False),
    ("192.0.2.0/24", "Documentation (TEST-NET-1)", "192.0.2.10", False),
    ("192.31.196.0/24", "AS112-v4", "192.31.196.1", True),
    ("192.52.193.0/24", "AMT", "192.52.193.1", True),
    ("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", "192.88.99.1", False),
    ("192.168.0.0/16", "Private-Use", "192.168.1.1", False),
    ("192.175.48.0/24", "Direct Delegation AS112 Service", "192.175.48.1", True),
    ("198.18.0.0/15", "Benchmarking", "198.19.255.254", False),
    ("198.51.100.0/24", "Documentation (TEST-NET-2)", "198.51.100.7", False),
    ("203.0.113.0/24", "Documentation (TEST-NET-3)", "203.0.113.9", False),
    ("240.0.0.0/4", "Reserved", "250.1.2.3", False),
    ("255.255.255.255/32", "Limited Broadcast", "255.255.255.255", False),
]

IPV6_SPECIAL_PURPOSE = [
    ("::1/128", "Loopback Address", "::1", False),
    ("::/128", "Unspecified Address", "::", False),
    ("::ffff:0:0/96", "IPv4-mapped Address", "::ffff:8.8.8.8", False),
    ("64:ff9b::/96", "IPv4-IPv6 Translat.", "64:ff9b::808:808", True),
    ("64:ff9b:1::/48", "IPv4-IPv6 Translat.", "64:ff9b:1::808:808", False),
    ("100::/64", "Discard-Only Address Block", "100::1", False),
    ("100:0:0:1::/64", "Dummy IPv6 Prefix", "100:0:0:1::1", False),
    ("2001::/23", "IETF Protocol Assignments", "2001:100::1", False),
    # Teredo, with a public server (8.8.8.8) and client (1.1.1.1, obfuscated): "N/A".
    ("2001::/32", "TEREDO", "2001:0:808:808::fefe:fefe", False),
    ("2001:1::1/128", "Port Control Protocol Anycast", "2001:1::1", True),
    ("2001:1::2/128", "Traversal Using Relays around NAT Anycast", "2001:1::2", True),
    ("2001:1::3/128", "DNS-SD Service Registration Protocol Anycast", "2001:1::3", True),
    ("2001:2::/48", "Benchmarking", "2001:2::1", False),
    ("2001:3::/32", "AMT", "2001:3::1", True),
    ("2001:4:112::/48", "AS112-v6", "2001:4:112::1", True),
    ("2001:10::/28", "Deprecated (previously ORCHID)", "2001:10::1", False),
    ("2001:20::/28", "ORCHIDv2", "2001:20::1", True),
    ("2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs) Prefix", "2001:30::1", True),
    ("2001:db8::/32", "Documentation", "2001:db8::1", False),
    # 6to4 of a public address (8.8.8.8): "N/A".
    ("2002::/16", "6to4", "2002:808:808::1", False),
    ("2620:4f:8000::/48", "Direct Delegation AS112 Service", "2620:4f:8000::1", True),
    ("3fff::/20", "Documentation", "3fff::1", False),
    ("5f00::/16", "Segment Routing (SRv6) SIDs", "5f00::1", False),
    ("fc00::/7", "Unique-Local", "fd00:ec2::254", False),
    ("fe80::/10", "Link-Local Unicast", "fe80::1", False),
]

# Ranges outside the two registries that are refused as well.
OTHER_REFUSED = [
    ("224.0.0.0/4", "Multicast (IPv4 Multicast Address Space)", "239.255.255.250"),
    ("ff00::/8", "Multicast (IPv6 Multicast Address Space)", "ff02::1"),
    ("fec0::/10", "Site-local, deprecated (RFC 3879)", "fec0::1"),
    ("::/96", "IPv4-compatible, deprecated (RFC 4291)", "::808:808"),
    ("::ffff:0:0:0/96", "IPv4-translated (RFC 2765)", "::ffff:0:808:808"),
    ("4000::/3", "Reserved by the IETF (IPv6 Address Space)", "4000::1"),
]

# IPv4 hidden in IPv6: each embeds a refused address (loopback, link-local, private).
EMBEDDED = [
    "::127.0.0.1",  # IPv4-compatible
    "::a9fe:a9fe",
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:0:7f00:1",  # IPv4-translated
    "64:ff9b::7f00:1",  # NAT64, well-known prefix
    "64:ff9b::a9fe:a9fe",
    "64:ff9b::a00:1",
    "64:ff9b:1::a9fe:a9fe",  # NAT64, local-use prefix
    "2002:7f00:1::",  # 6to4
    "2002:a9fe:a9fe::1",
    "2001:0:7f00:1::fefe:fefe",  # Teredo with a loopback server
    "2001:0:808:808::80ff:fffe",  # Teredo with an obfuscated loopback client
]

# Public addresses, most of them just outside a refused range.
PUBLIC = [
    "8.8.8.8",
    "1.1.1.1",
    "93.184.216.34",
    "9.255.255.255",
    "11.0.0.0",
    "100.63.255.255",
    "100.128.0.0",
    "126.255.255.255",
    "128.0.0.0",
    "169.253.255.255",
    "169.255.0.0",
    "172.15.255.255",
    "172.32.0.0",
    "192.0.1.0",
    "192.0.3.0",
    "192.88.98.255",
    "192.88.100.0",
    "192.167.255.255",
    "192.169.0.0",
    "198.17.255.255",
    "198.20.0.0",
    "198.51.99.255",
    "198.51.101.0",
    "203.0.112.255",
    "203.0.114.0",
    "223.255.255.255",
    "2606:4700::1111",
    "2001:4860:4860::8888",
    "2606:2800:220:1:248:1893:25c8:1946",
    "2001:200::1",
    "2001:db7:ffff::1",
    "2001:db9::1",
    "2003::1",
    "2620:4f:7fff::1",
    "3ffe:ffff::1",
    "3fff:1000::1",
    "64:ff9b::808:808",
    "64:ff9b::101:101",
]


def _ids(rows: list[tuple[Any, ...]]) -> list[str]:
    return [f"{row[0]} {row[1]}" for row in rows]


@pytest.mark.parametrize(
    ("network", "name", "address", "reachable"),
    IPV4_SPECIAL_PURPOSE + IPV6_SPECIAL_PURPOSE,
    ids=_ids(IPV4_SPECIAL_PURPOSE + IPV6_SPECIAL_PURPOSE),
)
def test_every_special_purpose_range(
    network: str, name: str, address: str, reachable: bool
) -> None:
    assert ipaddress.ip_address(address) in ipaddress.ip_network(network)
    assert is_public_address(ipaddress.ip_address(address)) is reachable


@pytest.mark.parametrize(("network", "name", "address"), OTHER_REFUSED, ids=_ids(OTHER_REFUSED))
def test_ranges_outside_the_registries_that_are_refused(
    network: str, name: str, address: str
) -> None:
    assert ipaddress.ip_address(address) in ipaddress.ip_network(network)
    assert not is_public_address(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", EMBEDDED)
def test_an_embedded_ipv4_address_that_is_not_public_refuses_the_address(address: str) -> None:
    assert not is_public_address(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_allowed(address: str) -> None:
    assert is_public_address(ipaddress.ip_address(address))
