"""The SSRF guard's rules (``fevex.net.HostPolicy``): which URLs and hosts are refused before
anything is resolved, what ``allow_hosts`` lifts, and the codes a refusal carries.

The addresses range by range are in ``test_net_address_ranges.py``; the connection layer,
which checks what a name resolves to, in ``test_net_transport.py``.
"""

from __future__ import annotations

import ipaddress
import subprocess
import sys
from typing import Any

import pytest

from fevex import FevexConfigurationError, FevexRunError
from fevex.net import HostPolicy, address_refusal, host_refusal, is_public_address, literal_address


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://169.254.169.254/latest", "169.254.0.0/16 (Link Local)"),
        ("http://[fe80::1]:8080", "fe80::/10 (Link-Local Unicast)"),
        ("http://10.1.2.3", "10.0.0.0/8 (Private-Use)"),
        ("http://[fd12::1]", "fc00::/7 (Unique-Local)"),
        ("http://0.0.0.0:80", "0.0.0.0/32 (This host on this network)"),
        ("http://[::ffff:127.0.0.1]", "::ffff:0:0/96 (IPv4-mapped Address)"),
        ("http://[64:ff9b::7f00:1]", "embeds 127.0.0.1, in 127.0.0.0/8 (Loopback)"),
        ("http://2130706433", "127.0.0.0/8 (Loopback)"),
        ("http://0x7f.1", "127.0.0.0/8 (Loopback)"),
        ("https://localhost:8000", "a loopback name"),
        ("http://api.localhost", "a loopback name"),
        ("http://LOCALHOST.:8000", "a loopback name"),
        ("http://127.0.0.1.:8000", "127.0.0.0/8 (Loopback)"),
    ],
)
def test_a_url_that_is_not_public_is_refused(url: str, reason: str) -> None:
    policy = HostPolicy()
    with pytest.raises(FevexConfigurationError) as at_definition:
        policy.check_url(url, at_definition=True)
    with pytest.raises(FevexRunError) as at_run:
        policy.check_url(url)
    for caught in (at_definition.value, at_run.value):
        assert caught.code == "SSRF_BLOCKED"
        assert reason in caught.message
        assert "allow_hosts" in caught.message
        assert caught.details["host"]
    assert at_run.value.category == "tool"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("file:///etc/passwd", "only http and https URLs with a host"),
        ("gopher://93.184.216.34/", "only http and https URLs with a host"),
        ("http:///no-host", "only http and https URLs with a host"),
        ("http://user:secret@93.184.216.34/", "a URL with user information"),
        ("http://93.184.216.34:99999/", "a malformed URL"),
    ],
)
def test_a_url_of_another_shape_is_refused_whatever_allow_hosts_says(url: str, reason: str) -> None:
    policy = HostPolicy(["93.184.216.34"])
    with pytest.raises(FevexRunError) as caught:
        policy.check_url(url)
    assert caught.value.code == "SSRF_BLOCKED"
    assert reason in caught.value.message
    # Nothing to allow: the message does not suggest allow_hosts, nor quote a secret.
    assert "allow_hosts" not in caught.value.message
    assert "secret" not in caught.value.message


def test_a_refusal_names_the_host_and_port_never_the_path_or_query() -> None:
    with pytest.raises(FevexRunError) as caught:
        HostPolicy().check_url("http://10.0.0.7:8080/admin/keys?token=sk_live_123")
    assert "10.0.0.7:8080" in caught.value.message
    assert "admin" not in caught.value.message
    assert "sk_live_123" not in caught.value.message


def test_a_public_url_passes_with_its_host_and_port() -> None:
    policy = HostPolicy()
    assert policy.check_url("https://api.example.com/v1") == ("api.example.com", 443)
    assert policy.check_url("http://93.184.216.34:8080/x") == ("93.184.216.34", 8080)


def test_allow_hosts_lifts_the_rule_for_exactly_the_host_and_port_it_names() -> None:
    policy = HostPolicy(["127.0.0.1:8080", "billing.internal"])
    assert policy.check_url("http://127.0.0.1:8080/") == ("127.0.0.1", 8080)
    assert policy.check_url("http://billing.internal:9999/") == ("billing.internal", 9999)
    with pytest.raises(FevexRunError):
        policy.check_url("http://127.0.0.1:8081/")
    with pytest.raises(FevexRunError):
        policy.check_url("http://localhost:8080/")


@pytest.mark.parametrize(
    "entry", ["http://127.0.0.1", "127.0.0.1:0", "127.0.0.1:http", "", "user@host", 8080, ":80"]
)
def test_malformed_allow_hosts_entries_are_refused(entry: Any) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        HostPolicy([entry])
    assert caught.value.code == "ALLOW_HOSTS_INVALID"


def test_allow_hosts_spellings() -> None:
    policy = HostPolicy(["[::1]:8080", "Billing.Internal.", "127.0.0.1:9000"])
    assert policy.allows("::1", 8080)
    assert not policy.allows("::1", 8081)
    assert policy.allows("billing.internal", 443)
    assert policy.allows("127.0.0.1", 9000)
    assert not policy.allows("127.0.0.2", 9000)
    with pytest.raises(FevexConfigurationError) as caught:
        HostPolicy("127.0.0.1")
    assert caught.value.code == "ALLOW_HOSTS_INVALID"


def test_check_host_refuses_local_names_and_leaves_others_to_their_addresses() -> None:
    policy = HostPolicy(["localhost:8000"])
    policy.check_host("localhost", 8000)
    policy.check_host("api.example.com", 443)
    with pytest.raises(FevexRunError) as caught:
        policy.check_host("localhost.", 8001)
    assert caught.value.code == "SSRF_BLOCKED"
    assert caught.value.details == {"host": "localhost.", "port": 8001}


def test_check_resolved_refuses_a_name_when_any_of_its_addresses_is_not_public() -> None:
    policy = HostPolicy()
    public = ipaddress.ip_address("93.184.216.34")
    policy.check_resolved("api.example.com", 443, [public])
    with pytest.raises(FevexRunError) as caught:
        policy.check_resolved(
            "api.example.com", 443, [public, ipaddress.ip_address("169.254.169.254")]
        )
    assert caught.value.code == "SSRF_BLOCKED"
    assert "resolves to an address in 169.254.0.0/16 (Link Local)" in caught.value.message


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "::1", "169.254.169.254", "fd00:ec2::254", "64:ff9b::a9fe:a9fe", "2002:7f00:1::"],
)
def test_addresses_that_are_not_public(address: str) -> None:
    assert not is_public_address(ipaddress.ip_address(address))
    assert address_refusal(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"])
def test_public_addresses(address: str) -> None:
    assert is_public_address(ipaddress.ip_address(address))


def test_legacy_ipv4_spellings_are_read_as_addresses() -> None:
    assert literal_address("127.1") == ipaddress.ip_address("127.0.0.1")
    assert literal_address("017700000001") == ipaddress.ip_address("127.0.0.1")
    assert literal_address("cafe.example") is None
    assert host_refusal("0x7f.1.") == "an address in 127.0.0.0/8 (Loopback)"
    assert host_refusal("example.com") is None


def test_the_rules_load_no_http_client_and_the_transport_loads_when_read() -> None:
    probe = (
        "import sys, fevex.net\n"
        "before = 'httpx2' in sys.modules\n"
        "fevex.net.GuardedTransport\n"
        "print(before, 'httpx2' in sys.modules, 'fevex.net.transport' in sys.modules)"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["False", "True", "True"]
