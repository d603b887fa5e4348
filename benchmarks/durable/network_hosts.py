"""Workers as separate hosts on one machine: Linux network namespaces on a virtual bridge.

:class:`HostNetwork` makes a bridge in the root namespace with an address of its own (where
the PostgreSQL server listens, :func:`listening_on`) and, per host, a network namespace
joined to the bridge by a veth pair, with an address of its own on the bridge's subnet. A
host is cut off from the database by an nftables table in its own namespace that drops
every packet to and from the server's address (:meth:`HostNetwork.cut`); deleting the table
restores it (:meth:`HostNetwork.restore`). Closing the network deletes the namespaces (with
their veth ends and rules) and the bridge; every name carries a random tag, so two runs on
one machine never meet.

It needs root (``CAP_NET_ADMIN``), ``ip`` (iproute2) and ``nft`` (nftables);
:class:`NetworkUnavailable` says which is missing.
"""

from __future__ import annotations

import ipaddress
import os
import random
import shlex
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

__all__ = ["Host", "HostNetwork", "NetworkUnavailable", "listening_on"]

# Every ``ip``/``nft`` call is bounded: a wedged netlink call must not hang the caller.
COMMAND_TIMEOUT = 30


class NetworkUnavailable(RuntimeError):
    """This machine cannot create the namespaces, links or packet filters (the message
    names what is missing)."""


@dataclass(frozen=True, slots=True)
class Host:
    """One host: its network namespace, its root-side veth end and its address."""

    name: str
    namespace: str
    link: str
    address: str

    def command(self, *argv: str) -> list[str]:
        """``argv`` run inside this host's namespace."""
        return ["ip", "netns", "exec", self.namespace, *argv]


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False
    )
    if check and completed.returncode != 0:
        raise NetworkUnavailable(f"`{shlex.join(argv)}` failed: {completed.stderr.strip()}")
    return completed


class HostNetwork:
    """A bridge with ``server_address`` and ``count`` hosts on it; a context manager that
    tears everything down on exit, also after a failure half-way through setting it up."""

    def __init__(self, count: int) -> None:
        missing = [program for program in ("ip", "nft") if shutil.which(program) is None]
        if missing:
            raise NetworkUnavailable(
                f"{' and '.join(missing)} not found (install iproute2 and nftables)."
            )
        if hasattr(os, "geteuid") and os.geteuid() != 0:
            raise NetworkUnavailable("network namespaces need root (CAP_NET_ADMIN).")
        self.tag = os.urandom(3).hex()
        self.bridge = f"fx{self.tag}br"
        subnet = _free_subnet()
        first, *rest = list(subnet.hosts())
        self.server_address = str(first)
        self.prefix = subnet.prefixlen
        self.hosts = tuple(
            Host(f"host{i}", f"fevex-{self.tag}-host{i}", f"fx{self.tag}h{i}", str(rest[i]))
            for i in range(count)
        )
        self._namespaces: list[str] = []
        self._bridge_made = False

    def __enter__(self) -> HostNetwork:
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _build(self) -> None:
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        self._bridge_made = True
        _run("ip", "addr", "add", f"{self.server_address}/{self.prefix}", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        for host in self.hosts:
            _run("ip", "netns", "add", host.namespace)
            self._namespaces.append(host.namespace)
            peer = f"fx{self.tag}p{host.name.removeprefix('host')}"
            _run("ip", "link", "add", host.link, "type", "veth", "peer", "name", peer)
            _run("ip", "link", "set", peer, "netns", host.namespace, "name", "eth0")
            _run("ip", "link", "set", host.link, "master", self.bridge)
            _run("ip", "link", "set", host.link, "up")
            inside = ("ip", "-n", host.namespace)
            _run(*inside, "addr", "add", f"{host.address}/{self.prefix}", "dev", "eth0")
            _run(*inside, "link", "set", "eth0", "up")
            _run(*inside, "link", "set", "lo", "up")
        # A filter that cannot be made here must fail now, not at the moment of the cut.
        probe = self.hosts[0]
        self.cut(probe)
        self.restore(probe)

    def cut(self, host: Host) -> None:
        """Drop every packet between ``host`` and the server, both ways, from now on."""
        server = self.server_address
        rules = (
            "table inet fevex_cut {\n"
            f"  chain out {{ type filter hook output priority 0; ip daddr {server} drop; }}\n"
            f"  chain in {{ type filter hook input priority 0; ip saddr {server} drop; }}\n"
            "}\n"
        )
        completed = subprocess.run(
            host.command("nft", "-f", "-"),
            input=rules,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
        if completed.returncode != 0:
            raise NetworkUnavailable(
                f"nftables could not drop packets in {host.namespace}: {completed.stderr.strip()}"
            )

    def restore(self, host: Host) -> None:
        """Let ``host``'s packets through again."""
        _run(*host.command("nft", "delete", "table", "inet", "fevex_cut"))

    def is_cut(self, host: Host) -> bool:
        listed = _run(*host.command("nft", "list", "tables"), check=False)
        return "fevex_cut" in listed.stdout

    def close(self) -> None:
        """Delete the namespaces (their veth pairs and rules go with them) and the bridge;
        what is already gone is skipped."""
        for host in self.hosts:
            # Deleting a namespace frees its veth end asynchronously; do not wait for it.
            if host.namespace in self._namespaces:
                _run("ip", "link", "del", host.link, check=False)
        for namespace in reversed(self._namespaces):
            _run("ip", "netns", "del", namespace, check=False)
        self._namespaces.clear()
        if self._bridge_made:
            _run("ip", "link", "del", self.bridge, check=False)
            self._bridge_made = False


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.0.0.0/8 that no address or route of this machine is in."""
    taken = _run("ip", "-4", "route", "show", "table", "all").stdout
    taken += _run("ip", "-4", "addr", "show").stdout
    used = []
    for word in taken.split():
        try:
            used.append(ipaddress.ip_network(word, strict=False))
        except ValueError:
            continue
    chooser = random.Random(os.urandom(8))
    for _ in range(100):
        subnet = ipaddress.ip_network(
            f"10.{chooser.randint(64, 250)}.{chooser.randint(0, 255)}.0/24"
        )
        if not any(subnet.overlaps(other) for other in used if other.prefixlen > 0):
            return subnet
    raise NetworkUnavailable("no free /24 in 10.0.0.0/8 for the hosts' bridge.")


@contextmanager
def listening_on(url: str, address: str, clients: str) -> Iterator[str]:
    """Make the throwaway server of ``fevex_postgres.testing.postgres_server()`` at ``url``
    also listen on ``address`` and trust connections from the subnet ``clients``; yields
    the URL through ``address``. It restarts the server with its own options but for
    ``listen_addresses`` (that server binds only 127.0.0.1, and a command-line setting
    cannot be changed by ``ALTER SYSTEM``)."""
    import psycopg

    from fevex_postgres.testing import find_postgres_bin

    libpq = url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(libpq, autocommit=True) as connection:
        data = _setting(connection, "data_directory")
        hba = _setting(connection, "hba_file")
    with open(hba, "a", encoding="utf-8") as rules:
        rules.write(f"host all all {clients} trust\n")
    # postmaster.opts: the server's command line, which pg_ctl's restart reuses.
    options_file = Path(data) / "postmaster.opts"
    words = shlex.split(options_file.read_text(encoding="utf-8"))[1:]
    options = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word == "-D":
            skip = True
            continue
        if word.startswith("listen_addresses="):
            word = f"{word},{address}"
        options.append(word)
    as_server_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    pg_ctl = str(find_postgres_bin() / "pg_ctl")
    # With its log in a file, the server holds no pipe of ours open.
    log = str(Path(data).parent / "server.log")
    restart = [*as_server_user, pg_ctl, "restart", "-D", data, "-l", log, "-m", "fast", "-w"]
    completed = subprocess.run(
        [*restart, "-o", shlex.join(options)],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"pg_ctl restart failed:\n{completed.stdout}{completed.stderr}")
    parts = urlsplit(url)
    port = parts.port or 5432
    user = f"{parts.username}@" if parts.username else ""
    yield urlunsplit(parts._replace(netloc=f"{user}{address}:{port}"))


def _setting(connection: object, name: str) -> str:
    row = connection.execute(f"SHOW {name}").fetchone()  # type: ignore[attr-defined]
    return str(row[0])


def worker_command(
    host: Host, python: str, app: str, concurrency: int, interval: float
) -> Sequence[str]:
    """``fevex worker`` for ``app``, run inside ``host``, on the store the app opens (no
    ``--store``: an app that builds its own store is refused one)."""
    return host.command(
        python, "-m", "fevex.cli", "worker", "--app", app,
        "--concurrency", str(concurrency), "--interval", str(interval), "--json",
        "--actor", host.name,
    )  # fmt: skip
