"""A scriptable fake model provider: a real HTTP/1.1 server on 127.0.0.1 speaking both streaming protocols.

``POST /v1/chat/completions`` answers in OpenAI's chat-completions SSE format, ``POST /v1/messages`` in
Anthropic's messages SSE format. Each request takes the next scripted reply from a queue (``push``) and is
recorded (``requests``: path, lower-cased headers, JSON body). Every response closes its connection, and
every SSE event is written separately so the client really receives fragments.

    async with open_fake_provider() as fake:
        fake.push(Text("Hello there", chunks=3), Status(429, headers={"retry-after": "2"}))
        ... ProviderConfig(kind="openai", base_url=fake.openai_url) ...
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio

from tests.fakes.http1 import read_request, response_head

# --- scripted replies ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    """A streamed text reply in ``chunks`` pieces; with ``gate`` (OpenAI's protocol), the pieces after the first
    wait until the test sets it (so a test can see a reply arrive piece by piece)."""

    text: str
    chunks: int = 3
    gate: trio.Event | None = None


@dataclass(frozen=True)
class ToolCalls:
    """Tool calls ``(id, name, arguments_json_text)`` whose arguments stream in ``chunks`` fragments each."""

    calls: list[tuple[str, str, str]]
    chunks: int = 3
    text: str = ""


@dataclass(frozen=True)
class Json:
    """A structured reply: JSON text for OpenAI, a call of the forced tool for Anthropic. ``value`` may be a
    string (sent verbatim, so it can be invalid) or any JSON-able value."""

    value: Any
    chunks: int = 3


@dataclass(frozen=True)
class Status:
    """A plain HTTP error (or any status) with a JSON body and extra headers."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Malformed:
    """A 200 whose body is not the expected event stream."""

    body: bytes = b"<html><body>this is not an event stream</body></html>\n"


@dataclass(frozen=True)
class Stall:
    """Headers and one event, then silence until the client hangs up."""

    text: str = "partial"


@dataclass(frozen=True)
class EndsEarly:
    """A stream that stops (connection closed) before its final event."""

    text: str = "cut"


@dataclass(frozen=True)
class Held:
    """``reply``, once ``gate`` is set (a test decides when a request is answered; from a worker thread with
    ``trio.from_thread.run_sync(gate.set)``)."""

    reply: Text | ToolCalls | Json | Status | Malformed | Stall | EndsEarly
    gate: trio.Event


Reply = Text | ToolCalls | Json | Status | Malformed | Stall | EndsEarly | Held


@dataclass
class RecordedRequest:
    """One request as received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


def _split(text: str, n: int) -> list[str]:
    n = max(1, min(n, len(text))) if text else 1
    size = -(-len(text) // n) if text else 0
    return [text[i : i + size] for i in range(0, len(text), size)] if text else [""]


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {payload}\n\n".encode()


# --- OpenAI rendering ---------------------------------------------------------------------------------------


def _oa_chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> bytes:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return _sse({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "fake", "choices": choices, **extra})


def _openai_events(reply: Reply, request: Any) -> Iterator[bytes]:
    yield _oa_chunk({"role": "assistant", "content": ""})
    if isinstance(reply, (Text, Json, Stall, EndsEarly)):
        text = reply.text if isinstance(reply, (Text, Stall, EndsEarly)) else _json_text(reply.value)
        chunks = reply.chunks if isinstance(reply, (Text, Json)) else 1
        for piece in _split(text, chunks):
            yield _oa_chunk({"content": piece})
        if isinstance(reply, (Stall, EndsEarly)):
            return
        yield _oa_chunk({}, "stop")
        out = len(text.split())
    else:
        assert isinstance(reply, ToolCalls)
        if reply.text:
            yield _oa_chunk({"content": reply.text})
        for i, (call_id, name, args) in enumerate(reply.calls):
            first = {"index": i, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
            yield _oa_chunk({"tool_calls": [first]})
            for piece in _split(args, reply.chunks):
                yield _oa_chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
        yield _oa_chunk({}, "tool_calls")
        out = 7
    yield _oa_chunk(None, usage={"prompt_tokens": 11, "completion_tokens": out, "total_tokens": 11 + out})
    yield _sse("[DONE]")


# --- Anthropic rendering ------------------------------------------------------------------------------------


def _an(kind: str, **data: Any) -> bytes:
    return _sse({"type": kind, **data}, event=kind)


def _anthropic_events(reply: Reply, request: Any) -> Iterator[bytes]:
    message = {"id": "msg_fake", "type": "message", "role": "assistant", "content": [], "model": "fake",
               "stop_reason": None, "usage": {"input_tokens": 11, "output_tokens": 1}}  # fmt: skip
    yield _an("message_start", message=message)
    yield _an("ping")
    blocks: list[tuple[str, str, str, str, int]] = []  # (type, id, name, text, chunks)
    if isinstance(reply, (Text, Stall, EndsEarly)):
        blocks.append(("text", "", "", reply.text, reply.chunks if isinstance(reply, Text) else 1))
    elif isinstance(reply, Json):
        name = ((request or {}).get("tool_choice") or {}).get("name", "output")
        blocks.append(("tool_use", "toolu_json", name, _json_text(reply.value), reply.chunks))
    else:
        assert isinstance(reply, ToolCalls)
        if reply.text:
            blocks.append(("text", "", "", reply.text, 1))
        blocks.extend(("tool_use", cid, name, args, reply.chunks) for cid, name, args in reply.calls)
    for index, (kind, bid, name, text, chunks) in enumerate(blocks):
        if kind == "text":
            yield _an("content_block_start", index=index, content_block={"type": "text", "text": ""})
            for piece in _split(text, chunks):
                yield _an("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
        else:
            start = {"type": "tool_use", "id": bid, "name": name, "input": {}}
            yield _an("content_block_start", index=index, content_block=start)
            for piece in _split(text, chunks):
                yield _an("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": piece})
        if isinstance(reply, (Stall, EndsEarly)):
            return
        yield _an("content_block_stop", index=index)
    stop = "end_turn" if isinstance(reply, Text) else "tool_use"
    yield _an("message_delta", delta={"stop_reason": stop, "stop_sequence": None}, usage={"output_tokens": 7})
    yield _an("message_stop")


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


# --- the server -----------------------------------------------------------------------------------------------


class FakeProviderServer:
    """The fake; start it with ``open_fake_provider()`` or ``await nursery.start(FakeProviderServer().run)``."""

    def __init__(self) -> None:
        self.port = 0
        self.requests: list[RecordedRequest] = []
        self.errors: list[str] = []
        self._replies: deque[Reply] = deque()

    @property
    def openai_url(self) -> str:
        """A ``base_url`` for an ``openai`` provider."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        """A ``base_url`` for an ``anthropic`` provider."""
        return f"http://127.0.0.1:{self.port}"

    def push(self, *replies: Reply) -> None:
        """Queue replies, answered one per request in order."""
        self._replies.extend(replies)

    @property
    def pending(self) -> int:
        """Replies not yet used."""
        return len(self._replies)

    async def run(self, *, task_status: trio.TaskStatus[FakeProviderServer] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen on an ephemeral port and serve until cancelled."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started(self)
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, stream: trio.SocketStream) -> None:
        try:
            async with stream:
                await self._serve_one(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client hung up, which several tests make it do
        except Exception as exc:  # recorded for the test to see; one bad request must not stop the server
            self.errors.append(repr(exc))

    async def _serve_one(self, stream: trio.SocketStream) -> None:
        request = await read_request(stream)
        if request is None:
            return
        method, path, headers, raw = request
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        self.requests.append(RecordedRequest(method=method, path=path, headers=headers, body=body))

        if path.endswith("/chat/completions"):
            render = _openai_events
        elif path.endswith("/messages"):
            render = _anthropic_events
        else:
            await self._send_status(stream, Status(404, {"error": {"type": "not_found", "message": path}}))
            return
        if not self._replies:
            self.errors.append(f"no scripted reply for request {len(self.requests)} ({path})")
            await self._send_status(stream, Status(500, {"error": {"type": "no_scripted_reply"}}))
            return
        reply = self._replies.popleft()
        if isinstance(reply, Held):
            await reply.gate.wait()
            reply = reply.reply
        if isinstance(reply, Status):
            await self._send_status(stream, reply)
            return
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            b"connection: close\r\n\r\n"
        )
        if isinstance(reply, Malformed):
            await stream.send_all(reply.body)
            return
        gate = reply.gate if isinstance(reply, Text) and render is _openai_events else None
        for i, event in enumerate(render(reply, body)):
            await stream.send_all(event)
            await trio.sleep(0)
            if i == 1 and gate is not None:  # the role chunk, then the first piece
                await gate.wait()
        if isinstance(reply, Stall):
            # Silence until the client gives up and closes its end.
            while await stream.receive_some(4096):
                pass

    async def _send_status(self, stream: trio.SocketStream, reply: Status) -> None:
        body = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body or {"error": {}}).encode()
        await stream.send_all(response_head(reply.status, "application/json", len(body), reply.headers) + body)


@asynccontextmanager
async def open_fake_provider() -> AsyncIterator[FakeProviderServer]:
    """A running fake provider, stopped on exit."""
    async with trio.open_nursery() as nursery:
        server = await nursery.start(FakeProviderServer().run)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
