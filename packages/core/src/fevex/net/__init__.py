"""The SSRF guard: which hosts and addresses a plugin may reach when it fetches a URL that a
document, a server or a redirect named.

One guard for every plugin that fetches what someone else names (fevex-openapi's calls and
their redirects, fevex-mcp's OAuth discovery): :class:`HostPolicy` holds the rules (public
addresses only, unless ``allow_hosts`` names the host, from the IANA special-purpose
registries; see :mod:`fevex.net.host_policy`), and :class:`GuardedTransport` is an httpx2
transport that applies them to the addresses a name resolves to, where the socket is opened
(:mod:`fevex.net.transport`).

The codes: ``SSRF_BLOCKED`` for a refusal, ``ALLOW_HOSTS_INVALID`` for an ``allow_hosts``
entry that is not ``host`` or ``host:port`` (docs/errors.md).

``import fevex`` does not import this package, and this package's rules use the standard
library only. The transport needs httpx2 and httpcore2, which the core does not depend on:
``GuardedTransport`` and ``GuardedNetworkBackend`` are imported when first read, and a
plugin that uses them lists httpx2 and httpcore2 among its own dependencies.
"""

from typing import TYPE_CHECKING

from fevex._ground.lazy_exports import lazy_exports
from fevex.net.host_policy import (
    IPV4_SPECIAL_PURPOSE,
    IPV6_SPECIAL_PURPOSE,
    OTHER_RANGES,
    AddressRange,
    HostPolicy,
    IPAddress,
    address_refusal,
    host_refusal,
    is_public_address,
    literal_address,
)

if TYPE_CHECKING:
    from fevex.net.transport import GuardedNetworkBackend, GuardedTransport
else:
    __getattr__, __dir__ = lazy_exports(
        __name__, {"fevex.net.transport": ("GuardedNetworkBackend", "GuardedTransport")}
    )

__all__ = [
    "IPV4_SPECIAL_PURPOSE",
    "IPV6_SPECIAL_PURPOSE",
    "OTHER_RANGES",
    "AddressRange",
    "GuardedNetworkBackend",
    "GuardedTransport",
    "HostPolicy",
    "IPAddress",
    "address_refusal",
    "host_refusal",
    "is_public_address",
    "literal_address",
]
