"""A fake media provider: a real HTTP/1.1 server on 127.0.0.1 speaking the media protocols the server uses.

* ``POST /v1/images/generations`` — OpenAI images: ``{"data": [{"b64_json": …}]}`` (or ``{"url": …}`` pointing
  back at ``GET /files/<name>`` when ``image_as_url``);
* ``POST /v1/audio/speech`` — OpenAI speech: an MP3 body (a real MPEG-1 Layer III frame sequence of silence);
* ``POST /v1/videos`` (multipart form) → a video object; ``GET /v1/videos/<id>`` → its status, ``in_progress``
  for ``video_polls`` polls and then ``completed``; ``GET /v1/videos/<id>/content[?variant=thumbnail]`` → MP4 or
  PNG bytes;
* ``POST /search`` — Tavily: ``{"results": [{title, url, content, score}]}``.

Every request is recorded (``requests``: method, path, lower-cased headers, decoded body). Failures are scripted
per route with ``fail(route, Status(…), …)``: the next requests to that route get them, in order
(``Status(0)`` hangs up without answering). ``route`` is
one of ``images``, ``speech``, ``videos.submit``, ``videos.poll``, ``videos.content``, ``search``.
``fail_when(route, predicate, status)`` fails every request whose decoded body matches (e.g. one prompt).
``hold(route)`` makes requests to a route wait until ``release(route)`` (a video task "in flight").
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import json
import struct
import zlib
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio

from tests.fakes.http1 import read_request, response_head


@dataclass(frozen=True)
class Status:
    """An HTTP error (or any status) with a JSON body and extra headers."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


def tiny_png(seed: int = 0) -> bytes:
    """A real 2×2 PNG (its colour from ``seed``)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    pixel = bytes([seed % 256, (seed * 7) % 256, (seed * 13) % 256])
    raw = (b"\x00" + pixel * 2) * 2
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))  # fmt: skip


def silent_mp3(frames: int = 8) -> bytes:
    """A real MP3: MPEG-1 Layer III, 128 kbit/s, 44.1 kHz frames of silence (417 bytes each)."""
    header = b"\xff\xfb\x90\x64"
    return (header + b"\x00" * 413) * frames


def tiny_mp4() -> bytes:
    """The start of an MP4 (an ``ftyp`` box and an empty ``mdat``): enough for every check on our side."""
    ftyp = b"ftypisom" + b"\x00\x00\x02\x00" + b"isomiso2mp41"
    return struct.pack(">I", 8 + len(ftyp)) + ftyp + struct.pack(">I", 8) + b"mdat"


class FakeMediaServer:
    """Start with ``open_fake_media()``."""

    def __init__(self, *, video_polls: int = 1, image_as_url: bool = False) -> None:
        self.port = 0
        self.video_polls = video_polls
        self.image_as_url = image_as_url
        self.requests: list[RecordedRequest] = []
        self.errors: list[str] = []
        self.counts: Counter[str] = Counter()
        self._failures: dict[str, deque[Status]] = {}
        self._conditional: list[tuple[str, Callable[[Any], bool], Status]] = []
        self._held: dict[str, trio.Event] = {}
        self.waiting: Counter[str] = Counter()
        self._tasks: dict[str, int] = {}
        self._n = 0

    @property
    def url(self) -> str:
        """A ``base_url`` for an ``openai`` provider."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def tavily_url(self) -> str:
        """A ``base_url`` for a ``tavily`` provider."""
        return f"http://127.0.0.1:{self.port}"

    def fail(self, route: str, *statuses: Status) -> None:
        self._failures.setdefault(route, deque()).extend(statuses)

    def fail_when(self, route: str, predicate: Callable[[Any], bool], status: Status) -> None:
        self._conditional.append((route, predicate, status))

    def clear_failures(self) -> None:
        self._failures.clear()
        self._conditional.clear()

    def hold(self, route: str) -> None:
        self._held[route] = trio.Event()

    def release(self, route: str) -> None:
        event = self._held.pop(route, None)
        if event is not None:
            event.set()

    def of(self, route: str) -> list[RecordedRequest]:
        """The requests made to ``route``."""
        return [r for r in self.requests if _route(r.method, r.path) == route]

    async def run(self, *, task_status: trio.TaskStatus[FakeMediaServer] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started(self)
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, stream: trio.SocketStream) -> None:
        try:
            async with stream:
                await self._serve_one(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except Exception as exc:  # recorded for the test; one bad request must not stop the server
            self.errors.append(repr(exc))

    async def _serve_one(self, stream: trio.SocketStream) -> None:
        request = await read_request(stream)
        if request is None:
            return
        method, path, headers, raw = request
        body = _decode_body(headers.get("content-type", ""), raw)
        self.requests.append(RecordedRequest(method=method, path=path, headers=headers, body=body))
        route = _route(method, path)
        self.counts[route] += 1
        held = self._held.get(route)
        if held is not None:
            self.waiting[route] += 1
            await held.wait()
        queued = self._failures.get(route)
        if queued:
            await self._send(stream, queued.popleft())
            return
        for r, predicate, status in self._conditional:
            if r == route and predicate(body):
                await self._send(stream, status)
                return
        await self._answer(stream, route, path, body)

    async def _answer(self, stream: trio.SocketStream, route: str, path: str, body: Any) -> None:
        self._n += 1
        if route == "images":
            png = tiny_png(self._n)
            if self.image_as_url:
                item = {"url": f"http://127.0.0.1:{self.port}/files/image-{self._n}.png"}
            else:
                item = {"b64_json": base64.b64encode(png).decode()}
            await self._json(stream, 200, {"created": 1, "data": [item]})
        elif route == "files":
            await self._bytes(stream, tiny_png(7), "image/png")
        elif route == "speech":
            await self._bytes(stream, silent_mp3(), "audio/mpeg")
        elif route == "videos.submit":
            task_id = f"video_{self._n:04d}"
            self._tasks[task_id] = 0
            await self._json(stream, 200, {"id": task_id, "object": "video", "status": "queued", "progress": 0,
                                           "model": (body or {}).get("model"), "seconds": (body or {}).get("seconds")})
        elif route == "videos.poll":
            task_id = path.split("?")[0].rstrip("/").rsplit("/", 1)[-1]
            if task_id not in self._tasks:
                await self._json(stream, 404, {"error": {"code": "video_not_found"}})
                return
            self._tasks[task_id] += 1
            done = self._tasks[task_id] > self.video_polls
            await self._json(stream, 200, {"id": task_id, "object": "video",
                                           "status": "completed" if done else "in_progress",
                                           "progress": 100 if done else 50})  # fmt: skip
        elif route == "videos.content":
            if "variant=thumbnail" in path:
                await self._bytes(stream, tiny_png(3), "image/png")
            else:
                await self._bytes(stream, tiny_mp4(), "video/mp4")
        elif route == "search":
            query = (body or {}).get("query", "")
            results = [{"title": f"Result {i} for {query[:40]}", "url": f"https://example.org/r{i}",
                        "content": f"About {query[:60]} ({i}).", "score": 1 - i / 10} for i in range(1, 4)]
            await self._json(stream, 200, {"query": query, "results": results, "response_time": 0.01})
        else:
            await self._json(stream, 404, {"error": {"type": "not_found"}})

    async def _send(self, stream: trio.SocketStream, reply: Status) -> None:
        if reply.status == 0:  # Status(0): read the request, then hang up without an answer
            return
        await self._json(stream, reply.status, reply.body or {"error": {}}, reply.headers)

    async def _json(self, stream: trio.SocketStream, status: int, doc: Any, extra: dict[str, str] | None = None) -> None:
        await self._bytes(stream, json.dumps(doc).encode(), "application/json", status, extra)

    async def _bytes(self, stream: trio.SocketStream, data: bytes, kind: str, status: int = 200,
                     extra: dict[str, str] | None = None) -> None:
        await stream.send_all(response_head(status, kind, len(data), extra) + data)


def _route(method: str, path: str) -> str:
    bare = path.split("?")[0]
    if bare.endswith("/images/generations"):
        return "images"
    if bare.startswith("/files/"):
        return "files"
    if bare.endswith("/audio/speech"):
        return "speech"
    if bare.endswith("/videos") and method == "POST":
        return "videos.submit"
    if "/videos/" in bare and bare.endswith("/content"):
        return "videos.content"
    if "/videos/" in bare and method == "GET":
        return "videos.poll"
    if bare.endswith("/search"):
        return "search"
    return "unknown"


def _decode_body(content_type: str, raw: bytes) -> Any:
    if not raw:
        return None
    if content_type.startswith("multipart/form-data"):
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + raw
        )
        return {part.get_param("name", header="content-disposition"): part.get_content()
                for part in message.iter_parts()}  # fmt: skip
    try:
        return json.loads(raw)
    except ValueError:
        return raw


@asynccontextmanager
async def open_fake_media(**kw: Any) -> AsyncIterator[FakeMediaServer]:
    """A running fake media provider, stopped on exit."""
    async with trio.open_nursery() as nursery:
        server = await nursery.start(FakeMediaServer(**kw).run)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
