"""An EventSource, as browsers implement it (WHATWG HTML §9.2), over its own HTTP/1.1 connection, for tests.

Named events go to their listeners, ``id:`` sets the last event id (frames without one leave it), and each
(re)connection sends ``Last-Event-ID``. The connection is a plain socket read with h11, so a client that drops
it mid-stream closes exactly what it opened.
"""

from __future__ import annotations

import contextlib
import json
import urllib.parse
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import h11
import trio


@dataclass
class Message:
    type: str
    data: str
    last_event_id: str

    def json(self) -> Any:
        return json.loads(self.data)


@dataclass
class SseResponse:
    status: int
    headers: dict[str, str]
    lines: AsyncIterator[str]


@contextlib.asynccontextmanager
async def open_sse(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[SseResponse]:
    """GET ``url`` with ``Accept: text/event-stream``; the response's body as lines (without their ends)."""
    parts = urllib.parse.urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    conn = h11.Connection(h11.CLIENT)
    stream = await trio.open_tcp_stream(parts.hostname, parts.port)
    try:
        sent = {"Host": parts.netloc, "Accept": "text/event-stream", "Cache-Control": "no-cache", **(headers or {})}
        await stream.send_all(conn.send(h11.Request(method="GET", target=target, headers=list(sent.items()))))
        await stream.send_all(conn.send(h11.EndOfMessage()))

        async def next_event() -> Any:
            while True:
                event = conn.next_event()
                if event is not h11.NEED_DATA:
                    return event
                conn.receive_data(await stream.receive_some(65536))

        response = await next_event()
        assert isinstance(response, h11.Response), response

        async def lines() -> AsyncIterator[str]:
            buf = b""
            while True:
                event = await next_event()
                if isinstance(event, h11.Data):
                    buf += event.data
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        yield line.removesuffix(b"\r").decode()
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    return

        # Every generator is closed by its opener (trio warns about one collected unfinished).
        async with contextlib.aclosing(lines()) as body:
            yield SseResponse(response.status_code,
                              {k.decode().lower(): v.decode() for k, v in response.headers}, body)
    finally:
        await stream.aclose()


@dataclass
class EventSource:
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    last_event_id: str = ""
    """What the next connection sends as ``Last-Event-ID`` (set it to resume from a known id)."""
    listeners: dict[str, list[Callable[[Message], None]]] = field(default_factory=dict)
    connections: int = 0

    def add_event_listener(self, kind: str, fn: Callable[[Message], None]) -> None:
        self.listeners.setdefault(kind, []).append(fn)

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[AsyncIterator[Message]]:
        """One connection: yields its messages as they are dispatched (comments are skipped)."""
        headers = dict(self.headers)
        if self.last_event_id:
            headers["Last-Event-ID"] = self.last_event_id
        self.connections += 1
        async with open_sse(self.url, headers) as r:
            assert r.status == 200, r.status
            assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
            async with contextlib.aclosing(self._messages(r.lines)) as messages:
                yield messages

    async def _messages(self, lines: AsyncIterator[str]) -> AsyncIterator[Message]:
        kind, data = "", []
        async for line in lines:
            if not line:  # dispatch
                if data:
                    msg = Message(kind or "message", "\n".join(data), self.last_event_id)
                    for fn in self.listeners.get(msg.type, ()):
                        fn(msg)
                    yield msg
                kind, data = "", []
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                kind = value
            elif name == "data":
                data.append(value)
            elif name == "id" and "\0" not in value:
                self.last_event_id = value
