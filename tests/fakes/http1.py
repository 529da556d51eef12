"""The HTTP/1.1 the fake provider servers speak: one request per connection, read whole; answers written whole."""

from __future__ import annotations

from http import HTTPStatus

import trio


async def read_request(stream: trio.SocketStream) -> tuple[str, str, dict[str, str], bytes] | None:
    """``(method, path, lower-cased headers, body)`` of the request on ``stream``; None if the client hung up."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        data = await stream.receive_some(65536)
        if not data:
            return None
        rest += data
    return method, path, headers, rest[:length]


def response_head(status: int, content_type: str, length: int | None, extra: dict[str, str] | None = None) -> bytes:
    """A response's status line and headers (``connection: close``), up to the blank line."""
    reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Status"
    head = [f"HTTP/1.1 {status} {reason}", f"content-type: {content_type}",
            *([f"content-length: {length}"] if length is not None else []), "connection: close",
            *(f"{k}: {v}" for k, v in (extra or {}).items())]  # fmt: skip
    return ("\r\n".join(head) + "\r\n\r\n").encode()
