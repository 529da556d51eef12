"""Writing a WebSocket text frame straight to the client's socket, past quart's and hypercorn's send path.

Profiled with ``python -m benchmarks.fanout --py-spy …`` (1,000 clients on one stream), about half of the API
process's CPU went into ``ws.send`` for each client and event: quart's wrapper, hypercorn's ASGI dispatch,
wsproto's framing, hypercorn's protocol chain, a lock, a shielded cancel scope and trio's ``send_all`` — each a
few Python calls and most a scheduling checkpoint — around the one thing that must happen per client, the
``send`` system call (a quarter of that half). A server's text frame is only a 2–10 byte header before the
UTF-8 payload (RFC 6455 §5.2, unmasked), so we build it ourselves and, when the socket takes it at once, write
it with one non-blocking ``os.write`` under hypercorn's own send lock and no await at all.

It is only a faster road to the same bytes, taken only where it is exactly equivalent:

* the connection is hypercorn's HTTP/1.1 over a plain TCP socket, in the open state, and negotiated no
  extension (a compressed connection, permessage-deflate, needs wsproto's per-connection framing);
* the bytes go out under hypercorn's ``send_lock``, which every write of hypercorn's (pongs, the close frame)
  also takes, so frames never interleave; a frame the socket took only in part is finished under that lock by
  trio's ``send_all``, shielded as hypercorn shields its own writes (a frame cut off half-way would corrupt the
  stream);
* whenever any of that does not hold (another server, TLS, a closing or broken connection), :meth:`send`
  answers False and the caller sends the message the ordinary way, which reports the failure as before.

The hypercorn objects are reached through the ASGI ``send`` callable the server gave this connection
(:data:`SEND_KEY` in its scope; :class:`openmaic.api.server._RecycleShielded` puts it there), so nothing here is
used unless the server is hypercorn as :mod:`openmaic.api.server` runs it.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import trio

__all__ = ["SEND_KEY", "DirectFrames", "text_frame"]

SEND_KEY = "openmaic.asgi_send"
"""The scope key under which the server keeps a WebSocket connection's ASGI ``send`` callable."""


def text_frame(payload: bytes) -> bytes:
    """The unmasked, final, uncompressed text frame carrying ``payload`` (UTF-8), as a server sends it."""
    n = len(payload)
    if n < 126:
        return b"\x81" + bytes((n,)) + payload
    if n < 65536:
        return b"\x81\x7e" + struct.pack("!H", n) + payload
    return b"\x81\x7f" + struct.pack("!Q", n) + payload


class DirectFrames:
    """One connection's direct road to its socket (see the module docstring)."""

    def __init__(self, ws_stream: Any, tcp: Any) -> None:
        self._ws_stream = ws_stream
        self._tcp = tcp
        self._fd = tcp.stream.socket.fileno()

    @classmethod
    def of(cls, ws: Any) -> DirectFrames | None:
        """The direct road of quart websocket ``ws``, or None when its server is not one we know to be safe."""
        try:
            from hypercorn.protocol.ws_stream import WSStream
            from hypercorn.trio.tcp_server import TCPServer

            ws_stream = getattr(ws.scope.get(SEND_KEY), "__self__", None)
            if not isinstance(ws_stream, WSStream) or ws_stream.connection is None:
                return None
            if ws_stream.connection._proto.extensions:  # permessage-deflate: wsproto frames each message itself
                return None
            tcp = getattr(getattr(ws_stream.send, "__self__", None), "send", None)
            tcp = getattr(tcp, "__self__", None)
            if not isinstance(tcp, TCPServer) or not isinstance(tcp.stream, trio.SocketStream):
                return None  # TLS (an SSLStream), or a protocol chain we do not know
            return cls(ws_stream, tcp)
        except (ImportError, AttributeError):
            return None

    def _open(self) -> bool:
        from hypercorn.protocol.ws_stream import ASGIWebsocketState

        # wsproto's ConnectionState by name: wsproto comes with hypercorn, it is not a dependency of ours.
        return (self._ws_stream.state == ASGIWebsocketState.CONNECTED
                and self._ws_stream.connection.state.name == "OPEN")  # fmt: skip

    async def send(self, frame: bytes) -> bool:
        """Write ``frame`` (from :func:`text_frame`); False when it was not written (send it the ordinary way)."""
        lock: trio.Lock = self._tcp.send_lock
        if lock.locked():
            # A write of hypercorn's (or ours) is under way: wait our turn, as hypercorn's own writes do.
            async with lock:
                return await self._write(frame, 0)
        lock.acquire_nowait()  # no await between the check and here: nobody else can hold it
        try:
            return await self._write(frame, None)
        finally:
            lock.release()

    async def _write(self, frame: bytes, sent: int | None) -> bool:
        # Called holding the send lock. ``sent`` None: try one non-blocking write first.
        if not self._open():
            return False
        if sent is None:
            try:
                sent = os.write(self._fd, frame)
            except BlockingIOError:
                sent = 0
            except OSError:
                return False  # reset or closed: the ordinary road reports it (hypercorn sees the socket end)
            if sent == len(frame):
                return True
        try:
            with trio.CancelScope(shield=True):  # never leave half a frame on the wire
                await self._tcp.stream.send_all(memoryview(frame)[sent:])
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False  # the ordinary road then meets the broken socket and ends the connection as usual
        return True
