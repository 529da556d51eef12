"""Which network addresses an owner's endpoint may reach, and which endpoint URLs are written plainly enough to judge.

A provider an owner saves on the Models page names an endpoint the *server* calls. Unless the operator allows it
(``server.allow_local_endpoints``), such an endpoint must not reach the server's own network: loopback, private,
link-local, unique-local, CGNAT (100.64/10), ``0.0.0.0/8``, multicast, unspecified and every other address that is
not globally routable, and the same addresses behind an IPv6 form that carries an IPv4 one (IPv4-mapped, 6to4,
NAT64). :func:`internal` says which; :mod:`openmaic.models.guard` applies it to every address a name resolves to,
when the server connects, so a name that resolves (or is rebound) to an internal address is refused too.

:func:`endpoint_problem` is the check made when the endpoint is saved: a URL whose host is written in a form that
parsers disagree on (``127.1``, ``2130706433``, ``0x7f000001``, ``0177.0.0.1``, ``0``, a trailing dot, user
information, a backslash) is refused outright, so what is judged is what will be called.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

__all__ = ["LOCAL_NAMES", "endpoint_problem", "internal", "local_name"]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_CGNAT = ipaddress.ip_network("100.64.0.0/10")


def _embedded(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for (mapped, 6to4, NAT64's well-known prefix), if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def internal(address: Address | str) -> bool:
    """Whether ``address`` is one an owner's endpoint may not reach: anything not globally routable, multicast, or
    an IPv6 form of such an IPv4 address. A string that is not an address (or has a zone) counts as internal."""
    if isinstance(address, str):
        try:
            address = ipaddress.ip_address(address)
        except ValueError:
            return True
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            return True  # a zone names a local interface
        inner = _embedded(address)
        if inner is not None and internal(inner):
            return True
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return True  # not global, but spelled out: the carrier's network is someone's internal one
    return not address.is_global or address.is_multicast or address.is_unspecified


def local_name(host: str) -> bool:
    """Whether ``host`` (lower case) is a name for this machine itself."""
    return host in LOCAL_NAMES or host.endswith(".localhost")


def endpoint_problem(url: str, *, allow_local: bool) -> str | None:
    """Why an owner may not save ``url`` as an endpoint, or ``None``. With ``allow_local`` only its form is judged
    (the operator lets owners reach local and private addresses)."""
    if any(c.isspace() or ord(c) < 0x20 or c == "\\" for c in url):
        return "The base URL contains spaces, control characters or backslashes"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError:
        return "The base URL is not a valid URL"
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return "The base URL must start with http:// or https:// and name a host"
    if "@" in parts.netloc:
        return "The base URL must not carry a user name or password; enter the key as the API key"
    host = parts.hostname or ""
    if parts.netloc.split("@")[-1].startswith("["):
        try:
            address: Address = ipaddress.IPv6Address(host)
        except ValueError:
            return "The base URL's IPv6 address is not valid (zones are not accepted)"
    else:
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return "The base URL's host name is not valid"
        labels = host.split(".")
        if host.endswith(".") or not all(_LABEL.match(label) for label in labels):
            return "The base URL's host name is not valid (write it without a trailing dot)"
        if not _NUMERIC_LABEL.match(labels[-1]):
            if local_name(host) and not allow_local:
                return _LOCAL
            return None
        # A host ending in a number is an IPv4 address to every parser; only the usual dotted form is accepted,
        # since the short, decimal, octal and hexadecimal forms are read differently by different parsers.
        try:
            address = ipaddress.IPv4Address(host)
        except ValueError:
            return "Write an IP address in the base URL in its usual dotted form (such as 203.0.113.7)"
        if str(address) != host:
            return "Write an IP address in the base URL in its usual dotted form (such as 203.0.113.7)"
    if internal(address) and not allow_local:
        return _LOCAL
    return None


_LOCAL = "The base URL points at a local or private network address, which this server does not call for its users"
