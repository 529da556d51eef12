"""Free loopback ports for servers about to start: a throwaway cluster, or a server a test or benchmark starts.

The kernel's pick for port 0 comes from its ephemeral range, where every outgoing connection also takes its
local port: between the pick and the server's own bind, a client connecting anywhere (to PostgreSQL, to another
server) can be given that very port, and the server fails with "the port is in use". :func:`free_port` takes
ports from just below that range instead, where no connection is ever given one, one after another from a
random start, and checks each by binding it. Processes started side by side (pytest-xdist's) each take a slice
of their own (:func:`share_ports`), so two of them never pick the same port either.

What remains is a port taken by a process that binds it explicitly between the check and the server's bind: a
server's own start-up failure says so, naming the port.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_SPAN = 12_000
"""How many ports below the ephemeral range are ours to hand out (with Linux's default range, 20768–32767)."""
_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _candidates(index: int, count: int) -> list[int] | None:
    """This process's slice of the ports below the ephemeral range, or None where that range is unknown or too low
    to leave room (then the kernel picks)."""
    try:
        low = int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    start = low - _SPAN
    if start < 10_000:
        return None
    width = _SPAN // count
    return list(range(start + index * width, start + (index + 1) * width))


class _Ports:
    def __init__(self, index: int = 0, count: int = 1) -> None:
        self.slice = _candidates(index, count)
        self.next = random.randrange(len(self.slice)) if self.slice else 0

    def take(self) -> int:
        if self.slice:
            for _ in range(len(self.slice)):
                port = self.slice[self.next]
                self.next = (self.next + 1) % len(self.slice)
                if _binds(port):
                    return port
        with socket.socket() as s:  # no range of our own, or all of it taken: the kernel's pick
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]


def _binds(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


_ports = _Ports()


def share_ports(index: int, count: int) -> None:
    """Make this process take its ports from slice ``index`` of ``count`` (0-based), for ``count`` processes that
    start servers side by side on one machine."""
    global _ports
    if not 0 <= index < count:
        raise ValueError(f"slice {index} of {count} does not exist")
    _ports = _Ports(index, count)


def free_port() -> int:
    """A loopback port nothing is bound to now, which no outgoing connection will be given meanwhile."""
    return _ports.take()
