"""Running the API on a real socket for tests, plus small real clients (SSE frames, WebSockets).

The API is served with the real control plane (a :class:`RunService` and :class:`WorkbenchSessions` over the
test's database) and no worker: streams made by :meth:`Api.create_stream` are ``workbench`` sessions that wait,
so the session routes, their SSE and the stream WebSocket read and command them as they would a real one.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import httpx
import msgspec
import trio
import trio_websocket
from quart import Blueprint

from openmaic.actors.commands import Commands
from openmaic.api import ApiServices, Call, Listening, agent_sessions, api_route, create_app, serve_api
from openmaic.config import Config, parse_config
from openmaic.api.wire import Success, Wire
from openmaic.errors import Conflict, NotFound, StreamNotFound
from openmaic.events.core import SessionCreated, SessionMessagePosted
from openmaic.runs.service import RunService
from openmaic.workbench.service import WorkbenchSessions
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.modelconfig.secret_box import derive
from openmaic.owners.anonymous import AnonymousOwners
from openmaic.events.wakeups import Wakeups
from openmaic.store.database import Database


TEST_SECRET = "the-test-instance-secret-0123456789"
"""The instance secret of every harness server (``OPENMAIC_SECRET_KEY``): no secret file in the working directory."""


def make_config(yaml_text: str = "") -> Config:
    return parse_config(yaml_text, source="<test>", env={"OPENMAIC_SECRET_KEY": TEST_SECRET})


def anonymous_owner(cookie: str, secret: str = TEST_SECRET) -> str:
    """The owner id a harness server derives from the ``anonymous_id`` cookie ``cookie``."""
    return AnonymousOwners(lambda: derive(secret)).owner_of(cookie)


testing_bp = Blueprint("testing", __name__)
"""Routes that exist only in tests: a JSON body route (through the commands), one that fails unexpectedly, and
one per error form."""


class Meta(Wire):
    count: Annotated[int, msgspec.Meta(ge=0)]
    max_items: int = 0


class PostBody(Wire):
    command_id: str
    text: str
    delivery: Literal["steer", "queued"] = "queued"
    meta: Meta | None = None


class TestAck(Success):
    command_id: str
    seq: int
    replayed: bool


@api_route(testing_bp, "POST", "/api/test/streams/{id}/messages", body=PostBody, response=TestAck, status=202)
async def post_test_message(call: Call, id: str) -> TestAck:
    """Post a message to a test stream."""
    body: PostBody = call.body
    row = await call.services.log.stream_row(id)
    if row is None or row.owner_id != call.user:
        raise StreamNotFound(f"no stream {id!r}", stream_id=id)
    event = SessionMessagePosted(text=body.text, delivery=body.delivery)
    r = await call.services.log.append_one(id, [event], command_id=body.command_id)
    return TestAck(command_id=body.command_id, seq=r.first_seq, replayed=r.replayed)


@api_route(testing_bp, "GET", "/api/test/json-style/{id}", error_style="json")
async def json_style(call: Call, id: str) -> None:
    """Errors as OpenMAIC's jsonErr."""
    raise NotFound(f"no thing {id!r}", thing=id)


@api_route(testing_bp, "GET", "/api/test/hidden/{id}", plain_not_found=True)
async def hidden(call: Call, id: str) -> None:
    """A 404 that reveals nothing; other errors keep the envelope."""
    if id == "conflict":
        raise Conflict("busy")
    raise NotFound(f"no thing {id!r}")


@api_route(testing_bp, "POST", "/api/test/conflict", error_codes={409: "RUN_STATE_CONFLICT"})
async def conflict(call: Call) -> None:
    """Every 409 of this route has the route's code."""
    raise Conflict("the run is paused")


@api_route(testing_bp, "GET", "/api/test/boom")
async def boom(call: Call) -> None:
    """Fails unexpectedly."""
    raise RuntimeError("connection to postgresql://app:hunter2@db failed")


@dataclass
class Api:
    """A running API: its address, services and event log."""

    listening: Listening
    services: ApiServices
    log: EventLog

    @property
    def url(self) -> str:
        return self.listening.url

    @property
    def port(self) -> int:
        return self.listening.port

    def ws_url(self, path: str) -> str:
        return f"ws://127.0.0.1:{self.port}{path}"

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, trust_env=False, timeout=10, **kwargs)

    async def create_stream(self, stream_id: str, owner: str = "local", events: int = 0, kind: str = "workbench") -> None:
        """A waiting session of ``1 + events`` events (created, then messages ``m1``, ``m2``, …)."""
        await self.log.append(StreamAppend(
            stream_id=stream_id, events=[SessionCreated(kind=kind, owner_id=owner)],
            create=NewStream(kind, owner),
        ))  # fmt: skip
        await self.append_messages(stream_id, events)

    async def append_messages(self, stream_id: str, n: int, *, batch: int = 200, size: int = 0) -> None:
        pad = "x" * size
        done = 0
        while done < n:
            k = min(batch, n - done)
            msgs = [SessionMessagePosted(text=f"m{done + i + 1}{pad}") for i in range(k)]
            await self.log.append_one(stream_id, msgs)
            done += k


@contextlib.asynccontextmanager
async def running_api(
    db: Database,
    config: Config | None = None,
    *,
    blueprints: Iterable[Blueprint] = (),
) -> AsyncIterator[Api]:
    """Serve the API on 127.0.0.1 (a free port) for the block's duration, with the session routes (and
    ``blueprints``)."""
    wakeups = Wakeups()
    log = EventLog(db, wakeups)
    config = config or make_config()
    services = ApiServices(db=db, log=log, wakeups=wakeups, config=config, runs=RunService(log, config),
                           sessions=WorkbenchSessions(log, Commands(log, message_kinds=["workbench"])))
    blueprints = list(blueprints)
    app = create_app(services, blueprints=blueprints if agent_sessions.bp in blueprints else [agent_sessions.bp, *blueprints])
    async with trio.open_nursery() as nursery:
        await nursery.start(wakeups.run, db)
        listening = await nursery.start(serve_api, app, "127.0.0.1", 0)
        try:
            yield Api(listening, services, log)
        finally:
            nursery.cancel_scope.cancel()


# --- clients ------------------------------------------------------------------------------------------------


@dataclass
class SseFrame:
    id: str | None
    event: str | None
    data: str | None
    comment: bool = False

    def json(self) -> Any:
        assert self.data is not None
        return json.loads(self.data)


def _parse_frame(raw: bytes) -> SseFrame:
    ident = event = None
    data: list[str] = []
    comment = False
    for line in raw.decode().split("\n"):
        if line.startswith(":"):
            comment = True
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id":
            ident = value
        elif name == "event":
            event = value
        elif name == "data":
            data.append(value)
    return SseFrame(ident, event, "\n".join(data) if data else None, comment and not data)


@contextlib.asynccontextmanager
async def sse_frames(response: httpx.Response) -> AsyncIterator[AsyncIterator[SseFrame]]:
    """Parse an SSE response into frames (comments as ``comment=True`` frames): ``async with sse_frames(r) as
    frames: f = await anext(frames)``. The context closes the generators deterministically."""

    async def frames() -> AsyncIterator[SseFrame]:
        buf = b""
        async with contextlib.aclosing(response.aiter_bytes()) as chunks:
            async for chunk in chunks:
                buf += chunk
                while b"\n\n" in buf:
                    raw, buf = buf.split(b"\n\n", 1)
                    yield _parse_frame(raw)

    async with contextlib.aclosing(frames()) as gen:
        yield gen


@contextlib.asynccontextmanager
async def raw_ws(
    port: int,
    resource: str,
    *,
    headers: list[tuple[bytes, bytes]] | None = None,
    rcvbuf: int | None = None,
    message_queue_size: int = 1,
    subprotocols: list[str] | None = None,
) -> AsyncIterator[Any]:
    """A WebSocket over a socket this helper owns and always closes (trio-websocket leaves the socket of a
    rejected handshake open). ``rcvbuf`` shrinks the TCP receive buffer: with one queued message, a client
    that stops reading then stalls the server's writes almost at once instead of after megabytes of kernel
    buffering. A rejected handshake raises ``trio_websocket.ConnectionRejected``."""
    sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    stream: trio.SocketStream | None = None
    try:
        await sock.connect(("127.0.0.1", port))
        stream = trio.SocketStream(sock)
        try:
            async with trio.open_nursery() as nursery:
                ws = await trio_websocket.wrap_client_stream(
                    nursery, stream, "127.0.0.1", resource, extra_headers=headers, subprotocols=subprotocols,
                    message_queue_size=message_queue_size, max_message_size=16 * 1024 * 1024,
                )  # fmt: skip
                try:
                    yield ws
                finally:
                    await ws.aclose()
        except BaseExceptionGroup as group:
            rejected, _ = group.split(trio_websocket.ConnectionRejected)
            if rejected is None:
                raise
            leaf = rejected.exceptions[0]
            while isinstance(leaf, BaseExceptionGroup):
                leaf = leaf.exceptions[0]
            raise leaf from None
    finally:
        if stream is not None:
            await stream.aclose()
        else:
            sock.close()


async def ws_rejection(
    api: Api, resource: str, headers: list[tuple[bytes, bytes]] | None = None, subprotocols: list[str] | None = None
) -> trio_websocket.ConnectionRejected:
    """The HTTP answer to a WebSocket handshake that the server must refuse."""
    try:
        async with raw_ws(api.port, resource, headers=headers, subprotocols=subprotocols):
            pass
    except trio_websocket.ConnectionRejected as rejected:
        return rejected
    raise AssertionError(f"the handshake to {resource} was accepted")
