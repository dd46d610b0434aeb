"""Other machines on this one: Linux network namespaces (``ip netns``) on a private /24 (issue 44).

``Network(["b", "c"])``, once ``create()``d: a bridge on the host holding the /24's first address
(``host``, where the test's services listen), and per machine a namespace with one veth pair, the
host's end on the bridge, the namespace's end holding the machine's address (``address[name]``).
A namespace has its own loopback and no route but the /24's: it reaches the services by address
only, and nothing it sends can leave this machine. ``prefix(name)`` is the command prefix that
starts a process in it; ``moved(name)`` the bytes its veth carried so far (both ways).
``delete()`` removes whatever of it exists (namespaces, veth pairs, the bridge), so it is safe to
call after a ``create()`` that failed halfway. Every name starts with ``hg44-`` and a random tag,
so two test sessions on one machine never touch each other's.

``unavailable()``: why namespaces cannot be made here (not root, no ``ip``, ``ip netns add``
refused, as in most containers), or None.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import random
import shutil
import subprocess

IP = shutil.which("ip") or "/usr/sbin/ip"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([IP, *args], capture_output=True, text=True, check=check, timeout=30)


@functools.cache
def unavailable() -> str | None:
    """One line saying why this machine cannot make network namespaces; None when it can."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add); the workers reach the services on 127.0.0.1"
    if not os.path.exists(IP):
        return "no `ip` command (iproute2); the workers reach the services on 127.0.0.1"
    probe = f"hg44-probe-{os.urandom(3).hex()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` refused here ({made.stderr.strip()}); the workers reach the services on 127.0.0.1"
    _ip("netns", "del", probe, check=False)
    return None


def _free_subnet() -> ipaddress.IPv4Network:
    """A 10.44.N.0/24 that no address or route of the host overlaps."""
    words = _ip("-o", "-4", "addr").stdout.split()
    used = [ipaddress.ip_interface(words[k + 1]).network for k, w in enumerate(words[:-1]) if w == "inet"]
    routes = [line.split()[0] for line in _ip("-4", "route").stdout.splitlines()]
    used += [ipaddress.ip_network(r) for r in routes if "/" in r]
    for third in random.sample(range(1, 255), 254):
        net = ipaddress.ip_network(f"10.44.{third}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError("no free 10.44.N.0/24 on this machine")


class Network:
    """A bridge and one namespace per machine name (see the module docstring)."""

    def __init__(self, machines: list[str]):
        self.tag = f"hg44-{os.urandom(2).hex()}"  # + "-br", "-bh": at most 15 characters, the kernel's limit
        self.machines = list(machines)
        self.subnet = _free_subnet()
        hosts = list(self.subnet.hosts())
        self.host = str(hosts[0])
        self.address = {name: str(hosts[k + 1]) for k, name in enumerate(self.machines)}
        self.bridge = f"{self.tag}-br"

    def namespace(self, name: str) -> str:
        return f"{self.tag}-{name}"

    def veth(self, name: str) -> str:
        """The host's end of the machine's veth pair (the namespace's end: ``…n``)."""
        return f"{self.tag}-{name}h"

    def create(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.host}/{self.subnet.prefixlen}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for name in self.machines:
            ns, outside, inside = self.namespace(name), self.veth(name), f"{self.tag}-{name}n"
            _ip("netns", "add", ns)
            _ip("link", "add", outside, "type", "veth", "peer", "name", inside, "netns", ns)
            _ip("link", "set", outside, "master", self.bridge)
            _ip("link", "set", outside, "up")
            _ip("-n", ns, "addr", "add", f"{self.address[name]}/{self.subnet.prefixlen}", "dev", inside)
            _ip("-n", ns, "link", "set", inside, "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    def prefix(self, name: str) -> list[str]:
        """What goes before a command to start it inside machine ``name``'s namespace."""
        return [IP, "netns", "exec", self.namespace(name)]

    def moved(self, name: str) -> int:
        """Bytes through machine ``name``'s veth so far, both ways (its traffic with every service)."""
        stats = f"/sys/class/net/{self.veth(name)}/statistics"
        return sum(int(open(f"{stats}/{way}_bytes").read()) for way in ("rx", "tx"))

    def routes(self, name: str) -> list[str]:
        return _ip("-n", self.namespace(name), "-4", "route").stdout.splitlines()

    def delete(self) -> None:
        """Remove the namespaces, veth pairs and bridge that exist (their processes stopped first)."""
        for name in self.machines:
            _ip("link", "del", self.veth(name), check=False)
            _ip("netns", "del", self.namespace(name), check=False)
        _ip("link", "del", self.bridge, check=False)

    def left(self) -> list[str]:
        """What of this network still exists (for a test of ``delete``)."""
        links = _ip("-o", "link").stdout.replace("@", " ").replace(":", " ")
        return sorted({n for n in _ip("netns", "list").stdout.split() + links.split() if n.startswith(self.tag)})
