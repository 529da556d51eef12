"""Which ``Host`` a request may name: the defence against DNS rebinding, before any route runs.

A page on ``http://rebind.attacker.example:8000`` whose name the attacker then points at 127.0.0.1 talks to a
local server as *its own origin*: the browser sends ``Origin`` and ``Host`` both naming the attacker's domain, so
every same-origin check (:mod:`openmaic.api.origins`) passes, and the page reads and writes the whole API of a
default local install. What no such page can choose is a ``Host`` that is one of the server's real names. So every
HTTP request and WebSocket handshake, on the API's port and on the admin listener's, must name:

* an IP address (``127.0.0.1:8000``, ``[::1]``, a pod's address: what Kubernetes probes and Prometheus send). A
  rebinding page always addresses the server by a *name* (its own domain): a page served from an address is that
  address's own origin. Only the canonical forms are addresses; ``2130706433`` is a name like any other;
* ``localhost`` or a name under ``.localhost`` (browsers resolve these to loopback themselves);
* the configured listen host (``server.host`` / ``--host``) when it is a name;
* a name in ``server.allowed_hosts``: exact (``openmaic.example.org``), every subdomain (``*.example.org``), or
  ``"*"`` to turn the check off (a proxy in front that checks ``Host`` itself).

Anything else is a 421 ``HOST_NOT_ALLOWED`` in the API's error envelope; a request without ``Host`` (HTTP/1.0, not a
browser) passes. Ports are not judged: a rebinding page cannot pick the server's name, whatever port it names.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from openmaic.errors import OpenMaicError

__all__ = ["HostNotAllowed", "HostPolicy", "host_name"]


class HostNotAllowed(OpenMaicError):
    """This server does not answer for the host the request names."""

    code = "host_not_allowed"
    status = 421
    error_code = "HOST_NOT_ALLOWED"


def host_name(header: str) -> str | None:
    """The host of a ``Host`` header value, lower case, without its port, brackets or one trailing dot (``None``
    when it is not a host)."""
    try:
        parts = urlsplit(f"http://{header.strip()}")
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError:
        return None
    if parts.path or parts.query or parts.fragment or "@" in parts.netloc or not parts.hostname:
        return None
    host = parts.hostname.lower()
    return host[:-1] if host.endswith(".") and not host.endswith("..") else host


class HostPolicy:
    """The names a request may use (see the module docstring)."""

    def __init__(self, allowed: Iterable[str], *, listen_host: str | None = None) -> None:
        entries = [a.strip().lower().rstrip(".") for a in allowed]
        self.any = "*" in entries
        self.names = frozenset(e for e in entries if not e.startswith("*.")) | {"localhost"}
        self.suffixes = tuple(e[1:] for e in entries if e.startswith("*.")) + (".localhost",)
        if listen_host:
            self.names |= {listen_host.strip("[]").lower().rstrip(".")}

    def allows(self, host: str) -> bool:
        """Whether ``host`` (as :func:`host_name` gives it) is one of this server's."""
        if self.any:
            return True
        try:
            ipaddress.ip_address(host)
            return True
        except ValueError:
            pass
        return host in self.names or host.endswith(self.suffixes)

    def check(self, request: Any) -> None:
        """Raise :class:`HostNotAllowed` unless ``request``'s ``Host`` is allowed."""
        header = request.headers.get("Host")
        if header is None or self.any:
            return
        host = host_name(header)
        if host is None or not self.allows(host):
            shown = header if len(header) <= 100 else header[:100] + "…"
            raise HostNotAllowed(
                f"this server does not answer for the host {shown!r}; if it is one of its names, add it to "
                "server.allowed_hosts in openmaic.yml", host=shown,
            )  # fmt: skip
