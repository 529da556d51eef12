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
  also takes, so frames never interleave;
* whenever any of that does not hold (another server, TLS, a closing or broken connection), :meth:`send`
  answers False and the caller sends the message the ordinary way, which reports the failure as before.

Two callers. The connection's writer task (:meth:`DirectFrames.send`) writes what its queue holds. The stream's
live feed (:meth:`DirectFrames.write_now`, :mod:`openmaic.feeds.live`) writes a live frame itself to a connection
whose writer is idle, with no await and no task hop: trio runs one task at a time, so no other write can start
while that ``os.write`` runs, and it is made only when nobody holds the send lock.

A frame the socket took only in part must be finished before any other byte goes out. The writer finishes its
own at once (trio's ``send_all``, shielded as hypercorn shields its writes: a frame cut off half-way would
corrupt the stream). The feed cannot wait, so it leaves the rest with the connection's :class:`SendLock`, which
this module puts in place of hypercorn's lock (wrapping the same ``trio.Lock``): whoever takes the lock next —
the connection's writer, told to by the caller, or hypercorn sending a pong or the close frame — first writes
that rest; until then the lock counts as held, so no direct write jumps ahead of it.

The hypercorn objects are reached through the ASGI ``send`` callable the server gave this connection
(:data:`SEND_KEY` in its scope; :class:`openmaic.api.server._HypercornAdapter` puts it there), so nothing here is
used unless the server is hypercorn as :mod:`openmaic.api.server` runs it.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import trio

__all__ = ["SEND_KEY", "DirectFrames", "Framed", "SendLock", "payload_of", "text_frame"]

SEND_KEY = "openmaic.asgi_send"
"""The scope key under which the server keeps a WebSocket connection's ASGI ``send`` callable."""


class Framed(bytes):
    """A whole WebSocket frame from :func:`text_frame` (not a message still to be framed)."""

    __slots__ = ()


def text_frame(payload: bytes) -> Framed:
    """The unmasked, final, uncompressed text frame carrying ``payload`` (UTF-8), as a server sends it."""
    n = len(payload)
    if n < 126:
        return Framed(b"\x81" + bytes((n,)) + payload)
    if n < 65536:
        return Framed(b"\x81\x7e" + struct.pack("!H", n) + payload)
    return Framed(b"\x81\x7f" + struct.pack("!Q", n) + payload)


def payload_of(frame: bytes) -> bytes:
    """The payload of a frame from :func:`text_frame` (to send it the ordinary way)."""
    code = frame[1]
    return frame[2 if code < 126 else 4 if code == 126 else 10:]


class SendLock:
    """hypercorn's send lock of one connection (the same ``trio.Lock``), holding what a direct write left
    unwritten: whoever takes it writes that first (see the module docstring)."""

    def __init__(self, lock: trio.Lock, stream: trio.SocketStream) -> None:
        self._lock = lock
        self._stream = stream
        self.rest: memoryview | None = None

    def locked(self) -> bool:
        return self.rest is not None or self._lock.locked()

    def acquire_nowait(self) -> None:
        self._lock.acquire_nowait()

    def release(self) -> None:
        self._lock.release()

    async def __aenter__(self) -> None:
        await self._lock.acquire()
        try:
            await self.finish()
        except BaseException:
            self._lock.release()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()

    async def finish(self) -> None:
        """Write the rest of a frame begun by a direct write, if any. Call holding the lock."""
        rest = self.rest
        if rest is None:
            return
        try:
            with trio.CancelScope(shield=True):  # never leave half a frame on the wire
                await self._stream.send_all(rest)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the socket is gone: the holder's own write meets that and reports it as usual
        finally:
            self.rest = None


class DirectFrames:
    """One connection's direct road to its socket (see the module docstring)."""

    def __init__(self, ws_stream: Any, tcp: Any, lock: SendLock) -> None:
        from hypercorn.protocol.ws_stream import ASGIWebsocketState

        self._connected = ASGIWebsocketState.CONNECTED
        self._wsproto_open = type(ws_stream.connection.state)["OPEN"]
        self._ws_stream = ws_stream
        self._tcp = tcp
        self._lock = lock
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
            lock = tcp.send_lock
            if not isinstance(lock, SendLock):
                # Put ours in place only while nobody holds or waits for hypercorn's: a task already waiting
                # would take the inner lock without finishing a rest (no await from this check to the swap).
                if not isinstance(lock, trio.Lock) or lock.locked() or lock.statistics().tasks_waiting:
                    return None
                lock = tcp.send_lock = SendLock(lock, tcp.stream)
            return cls(ws_stream, tcp, lock)
        except (ImportError, AttributeError):
            return None

    def _open(self) -> bool:
        # Both states read once per frame and connection (the feed asks for every client): the enum members are
        # looked up once, in ``of``. wsproto's ConnectionState is read by name: wsproto comes with hypercorn, it
        # is not a dependency of ours.
        return self._ws_stream.state is self._connected and self._ws_stream.connection.state is self._wsproto_open

    @property
    def unfinished(self) -> bool:
        """A direct write left part of a frame for the next holder of the lock (:meth:`finish` writes it)."""
        return self._lock.rest is not None

    def write_now(self, frame: bytes) -> bool:
        """Write ``frame`` at once if the socket is free and open, with no await; False: not a byte written.
        True with :attr:`unfinished` set: the socket took part of it, and the rest waits for :meth:`finish`."""
        if self._lock.locked() or not self._open():
            return False
        try:
            sent = os.write(self._fd, frame)
        except OSError:  # full (BlockingIOError), reset or closed: the ordinary road meets and reports it
            return False
        if sent < len(frame):
            self._lock.rest = memoryview(frame)[sent:]
        return True

    async def finish(self) -> None:
        """Write what :meth:`write_now` left unwritten (under the send lock, behind any holder)."""
        async with self._lock:
            pass  # taking the lock writes the rest

    async def send(self, frame: bytes) -> bool:
        """Write ``frame`` (from :func:`text_frame`); False when it was not written (send it the ordinary way)."""
        lock = self._lock
        if lock.locked():
            # A write of hypercorn's (or ours, or a rest) is under way: wait our turn, as hypercorn's own writes do.
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
