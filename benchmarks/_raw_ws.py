"""A minimal WebSocket client (RFC 6455) for benchmarks: just enough to follow a stream, at little CPU per message.

The fan-out benchmark runs 1,000 clients on the same two cores as the server. trio-websocket (wsproto) spends
about as much CPU receiving a message as the server spends sending it, so with it the benchmark partly measures
its own clients. This client does the opening handshake (checking ``Sec-WebSocket-Accept``), reads unmasked server
frames (any length, fragmented or not), answers pings, and hands back each complete message's payload bytes.
It never sends data frames.
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct

import trio

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_CLOSE, _PING, _PONG = 0x8, 0x9, 0xA


class Closed(Exception):
    """The server closed the connection (``code`` from its close frame, or None when the socket just ended)."""

    def __init__(self, code: int | None) -> None:
        super().__init__(f"closed ({code})")
        self.code = code


class RawWebSocket:
    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self._buf = bytearray()
        self._parts: list[bytes] = []

    @classmethod
    async def connect(cls, host: str, port: int, path: str) -> RawWebSocket:
        stream = await trio.open_tcp_stream(host, port)
        key = base64.b64encode(os.urandom(16))
        await stream.send_all(
            b"GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (path.encode(), host.encode(), port, key)
        )
        ws = cls(stream)
        while b"\r\n\r\n" not in ws._buf:
            await ws._fill()
        head, _, rest = bytes(ws._buf).partition(b"\r\n\r\n")
        ws._buf = bytearray(rest)
        status, *lines = head.decode("latin-1").split("\r\n")
        if not status.startswith("HTTP/1.1 101"):
            await stream.aclose()
            raise ConnectionError(f"WebSocket handshake refused: {status}")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
        expected = base64.b64encode(hashlib.sha1(key + _GUID).digest()).decode()
        if headers.get("sec-websocket-accept") != expected:
            await stream.aclose()
            raise ConnectionError("WebSocket handshake: wrong Sec-WebSocket-Accept")
        return ws

    async def _fill(self) -> None:
        data = await self._stream.receive_some(65536)
        if not data:
            raise Closed(None)
        self._buf += data

    async def _frame(self) -> tuple[bool, int, bytes]:
        buf = self._buf
        while True:
            if len(buf) >= 2:
                b0, b1 = buf[0], buf[1]
                n, start = b1 & 0x7F, 2
                if n == 126 and len(buf) >= 4:
                    n, start = struct.unpack_from("!H", buf, 2)[0], 4
                elif n == 127 and len(buf) >= 10:
                    n, start = struct.unpack_from("!Q", buf, 2)[0], 10
                if n < 126 or start > 2:
                    if b1 & 0x80:
                        raise ConnectionError("a server frame must not be masked")
                    if len(buf) >= start + n:
                        payload = bytes(buf[start:start + n])
                        del buf[:start + n]
                        return bool(b0 & 0x80), b0 & 0x0F, payload
            await self._fill()
            buf = self._buf

    async def _send_control(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        await self._stream.send_all(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked)

    async def get_message(self) -> bytes:
        """The next data message's payload (text or binary). Raises :class:`Closed` when the server closes."""
        while True:
            fin, opcode, payload = await self._frame()
            if opcode == _PING:
                await self._send_control(_PONG, payload)
            elif opcode == _PONG:
                continue
            elif opcode == _CLOSE:
                code = struct.unpack_from("!H", payload)[0] if len(payload) >= 2 else None
                raise Closed(code)
            else:
                self._parts.append(payload)
                if fin:
                    message = b"".join(self._parts)
                    self._parts.clear()
                    return message

    async def aclose(self) -> None:
        await self._stream.aclose()
