"""The HTTP client for endpoints owners chose: every address is checked when the server connects, and pinned.

A provider an owner saves on the Models page (or in the workspace settings) names an endpoint the server calls
with its own network position. Checking the URL when it is saved is not enough: a host name may resolve to an
internal address, or resolve to a public one when checked and to an internal one a second later (DNS rebinding).
So the client for those endpoints (:func:`owner_client`) connects through :class:`GuardedBackend`, an httpcore
network backend that resolves the host itself, refuses the connection (:class:`AddressRefused`) when *any*
resolved address is internal (:func:`openmaic.modelconfig.addresses.internal`), and then connects to an address
it checked: nothing resolves the name again between the check and the connect. TLS is unchanged: httpcore starts
it over the connected socket with the URL's host name as SNI and for certificate checks, and the ``Host`` header
is the URL's. Every connection the client makes goes through the backend, redirects included.

The operator's own providers (``openmaic.yml``) never use this client: they may reach whatever the operator says.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import typing
from collections.abc import Awaitable, Callable, Sequence

import httpcore
import httpx
import trio

from openmaic.modelconfig.addresses import internal
from openmaic.models.errors import ProviderError

__all__ = ["AddressRefused", "GuardedBackend", "GuardedClient", "Resolver", "owner_client", "system_resolver"]

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""``(host, port) -> addresses``: how a host name is resolved (tests give their own, to play a rebinding name)."""


class AddressRefused(ProviderError):
    """An owner's endpoint resolved to an address this server does not call for its users."""

    code = "endpoint_refused"


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to for a TCP connection, in the resolver's order."""
    infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: list[str] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = str(sockaddr[0])
        if address not in found:
            found.append(address)
    return found


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves, checks every address, connects to a checked one (see the module docstring)."""

    def __init__(self, *, resolve: Resolver | None = None, refuse: Callable[[str], bool] = internal) -> None:
        self._resolve = resolve or system_resolver
        self._refuse = refuse
        self._inner: httpcore.AsyncNetworkBackend = httpcore.TrioBackend()

    async def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        with trio.move_on_after(float("inf") if timeout is None else timeout) as scope:
            try:
                addresses = list(await self._resolve(host, port))
            except OSError as exc:
                raise httpcore.ConnectError(f"cannot resolve {host}") from exc
        if scope.cancelled_caught:
            raise httpcore.ConnectTimeout(f"resolving {host} timed out")
        if not addresses:
            raise httpcore.ConnectError(f"{host} resolves to no address")
        # Every address is checked, not only the one tried first: a name must not be able to offer a public
        # address to the check and an internal one to a retry.
        refused = [a for a in addresses if self._refuse(a)]
        if refused:
            raise AddressRefused(f"the endpoint's host resolves to an internal address ({refused[0]})", host=host)
        last: Exception | None = None
        for address in addresses:
            try:
                # The checked address itself: no second resolution that a rebinding name could answer otherwise.
                return await self._inner.connect_tcp(str(ipaddress.ip_address(address)), port, timeout=timeout,
                                                     local_address=local_address, socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise AddressRefused("an owner's endpoint cannot be a local socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedClient(httpx.AsyncClient):
    """An ``httpx.AsyncClient`` whose every connection goes through a :class:`GuardedBackend` (the type says so to
    :class:`openmaic.models.retry.Transport`, which uses no other client for an owner's endpoint)."""


def owner_client(*, resolve: Resolver | None = None, refuse: Callable[[str], bool] = internal,
                 ssl_context: ssl.SSLContext | None = None, max_connections: int = 50,
                 max_keepalive: int = 10) -> GuardedClient:
    """A client for owners' endpoints (its owner closes it). No proxy from the environment is used: a proxy would
    connect on our behalf to whatever the name resolves to there. ``resolve``, ``refuse`` and ``ssl_context``
    (the system's trust store by default) are for tests."""
    transport = httpx.AsyncHTTPTransport(trust_env=False)
    # httpx builds its httpcore pool without a way to name the network backend; the pool is built again here with
    # the same settings and the guarded backend (all of it httpcore's public interface).
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=ssl_context or httpx.create_ssl_context(), max_connections=max_connections,
        max_keepalive_connections=max_keepalive, keepalive_expiry=5.0,
        network_backend=GuardedBackend(resolve=resolve, refuse=refuse),
    )
    return GuardedClient(transport=transport, trust_env=False)
