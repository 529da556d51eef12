"""Serving the app with hypercorn's trio worker, as one task of the caller's (root) nursery.

The listening socket is bound here, before hypercorn starts, so that a port already in use fails at once with
a clear :class:`~openmaic.api.errors.AddressInUse` instead of an exception group from deep inside the server.
Run it with ``await nursery.start(serve_api, app, host, port)``; the start value is a :class:`Listening`.

**Idle connections are closed** after ``server.keep_alive_s`` (and at once after a response to
``Connection: close``). hypercorn 0.18 under quart-trio never did either after a first response: the last body
message of a response is where hypercorn recycles the connection (it starts the idle timer, or closes it), and it
does so inside the app's ``send``; quart-trio's receiving task sees the ``http.disconnect`` hypercorn queues on the
way and cancels the app's nursery, so the recycling is cancelled half-way and the connection stays open with no
timer, for as long as the client likes. :class:`_HypercornAdapter` shields that one ``send`` (hypercorn already
shields the socket write inside it), so the recycling completes. A reverse proxy in front adds its own idle
timeouts and connection limits (``deploy/nginx``).

**A response sent before its request's body was read says** ``Connection: close``. hypercorn recycles a
connection only once the request's body has come in whole; otherwise it closes the connection after the response,
without a word in it. A client then takes the connection for kept alive and sends its next request on it, and
loses that request when the close arrives ("server disconnected without sending a response"). Errors answered
before the body is read (a route no path matches, an asset id no route can hold, a refused host) are where this
happens; the header tells the client to open a new connection instead.
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import trio
from hypercorn.config import Config as HyperConfig
from hypercorn.config import Sockets
from hypercorn.trio.run import worker_serve
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, ASGISendEvent, Scope
from hypercorn.utils import wrap_app
from quart_trio import QuartTrio

from openmaic.api.direct_frames import SEND_KEY
from openmaic.api.errors import AddressInUse
from openmaic.api.routing import STATE_KEY, ApiState

__all__ = ["Listening", "serve_api"]

log = logging.getLogger("openmaic.api")


@dataclass(frozen=True)
class Listening:
    """Where the API listens (``port`` is the real one when 0 was asked for)."""

    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def hypercorn_config(app: QuartTrio, host: str, port: int) -> HyperConfig:
    """hypercorn settings for the API: logs through ``logging``, WebSocket messages bounded like JSON bodies."""
    config = HyperConfig()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]  # informational: we bind ourselves
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.include_server_header = False
    state: ApiState | None = app.extensions.get(STATE_KEY)
    if state is not None:
        # A WebSocket message is a command, so it may be no larger than a JSON body. One up to twice that is
        # still read, to be refused as its route refuses such a body (an error frame; the socket stays open);
        # past that hypercorn closes the connection (1009): no command is that large, and reading on would only
        # hold more memory per connection.
        config.websocket_max_message_size = 2 * state.services.config.limits.json_body_bytes
        config.keep_alive_timeout = state.services.config.server.keep_alive_s
    return config


def _declares_body(scope: Scope) -> bool:
    """Whether the request has a body to come (a non-zero ``Content-Length``, or a ``Transfer-Encoding``)."""
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() not in (b"0", b"")):
            return True
    return False


class _HypercornAdapter:
    """The app as hypercorn serves it: the last ``send`` of each HTTP response shielded from the app's own
    cancellation (see the module docstring: without it no idle connection is ever closed); ``Connection: close``
    on a response that starts before the request's body has been received whole; and a WebSocket's ``send`` in
    its scope, for the direct road of live events."""

    def __init__(self, app: QuartTrio) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                scope[SEND_KEY] = send  # the direct road of live events to this socket (openmaic.api.direct_frames)
            await self.app(scope, receive, send)
            return

        body_pending = _declares_body(scope)

        async def receive_() -> Any:
            nonlocal body_pending
            message = await receive()
            if message["type"] == "http.disconnect" or (
                    message["type"] == "http.request" and not message.get("more_body", False)):
                body_pending = False
            return message

        async def send_(message: ASGISendEvent) -> None:
            if message["type"] == "http.response.start" and body_pending:
                headers = list(message.get("headers", ()))
                if not any(name.lower() == b"connection" for name, _ in headers):
                    message = {**message, "headers": [*headers, (b"connection", b"close")]}  # type: ignore[misc]
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                # Shielded: hypercorn finishes the response here and recycles or closes the connection; a
                # cancel from quart-trio's disconnect watcher must not stop it half-way. Nothing in it waits on
                # the client longer than the socket write, which hypercorn shields already.
                with trio.CancelScope(shield=True):
                    await send(message)
            else:
                await send(message)

        await self.app(scope, receive_, send_)


async def serve_api(
    app: QuartTrio,
    host: str,
    port: int,
    *,
    shutdown_trigger: Callable[[], Awaitable[None]] | None = None,
    name: str = "API",
    task_status: trio.TaskStatus[Listening] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` on ``host:port`` until cancelled (or until ``shutdown_trigger`` returns).

    Raises :class:`~openmaic.errors.OpenMaicError` (code ``address_in_use``) at once when the address cannot be
    bound. Reports a :class:`Listening` through ``task_status`` once connections are accepted.
    """
    config = hypercorn_config(app, host, port)
    sock = _bind(host, port, config.backlog)
    sockets = Sockets(secure_sockets=[], insecure_sockets=[sock], quic_sockets=[])
    bound = sock.getsockname()
    listening = Listening(host, bound[1])

    state: ApiState | None = app.extensions.get(STATE_KEY)
    try:
        async with trio.open_nursery() as nursery:
            if state is not None:
                # The live feeds' tasks: started first, so every WebSocket/SSE handler finds them running.
                await nursery.start(state.services.feeds.run)
                await nursery.start(state.services.owner_feeds.run)
            # hypercorn reports a list of URLs when it accepts connections; we report a Listening.
            await nursery.start(_serve, app, config, sockets, shutdown_trigger, nursery.cancel_scope)
            log.info("%s listening on %s", name, listening.url)
            task_status.started(listening)
    finally:
        sock.close()  # the listener is ours: closed however serving ends (a second close is a no-op)


def _bind(host: str, port: int, backlog: int) -> socket.socket:
    """A listening socket for ``host:port`` (as hypercorn would make it), or :class:`AddressInUse`."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # restarts need not wait for TIME_WAIT
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise AddressInUse(
                f"cannot listen on {host}:{port}: the port is in use by another process; stop it or choose "
                "another port (--port / OPENMAIC_PORT)",
                host=host, port=port,
            ) from None  # fmt: skip
        raise AddressInUse(f"cannot listen on {host}:{port}: {exc.strerror or exc}", host=host, port=port) from None
    return sock


async def _serve(
    app: QuartTrio,
    config: HyperConfig,
    sockets: Sockets,
    shutdown_trigger: Callable[[], Awaitable[None]] | None,
    serving: trio.CancelScope,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    try:
        await worker_serve(
            wrap_app(_HypercornAdapter(app), config.wsgi_max_body_size, "asgi"),
            config,
            sockets=sockets,
            shutdown_trigger=shutdown_trigger,
            task_status=task_status,
        )
    finally:
        # hypercorn has drained (or failed): nothing is left to feed, so the live feeds stop with it.
        serving.cancel()
