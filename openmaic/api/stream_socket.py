"""``WS /api/streams/{id}/ws?after=N``: a stream's events live, and commands on the same socket.

The server sends ``{"type":"event","seq","event"}`` for each event after ``after``, then
``{"type":"caught_up","seq"}``, then live events. The client may send
``{"type":"message"|"cancel"|"confirm_outline"|"retry","command_id",…}``; each is answered by
``{"type":"ack","command_id","seq","replayed"}`` or ``{"type":"error","command_id","error":{…}}``. A malformed
message gets an error frame; the connection stays open.

Three tasks per connection, one nursery:

* the *pump* reads the stream's history into the connection's send queue (``server.ws_send_queue`` frames), then
  joins the stream's live feed (:mod:`openmaic.api.live_feeds`), which puts each new event in that queue;
* the *reader* decodes commands, dispatches them, and queues their answers;
* the *writer* (the handler's own task) takes frames from the queue and writes them to the socket.

While catching up, the pump waits for room in the queue: the client asked for history and reads it at its own
pace. Once live, the feed never waits: a full queue means the client cannot keep up with the stream, and the
connection is closed with 1013 ("try again later"). The client reconnects with ``after=<last seq it got>`` and
catches up again, paced; nothing is lost and the server's memory per connection stays bounded.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

import msgspec
import trio

from openmaic import metrics
from openmaic.api.errors import ErrorInfo, ServiceUnavailable, describe
from openmaic.api.live_feeds import LiveEvent
from openmaic.api.identity import accept_websocket
from openmaic.api.routing import Call, api_route
from openmaic.api.services import ApiServices, CommandResult
from openmaic.api.streams import bp, check_cursor, visible_stream
from openmaic.api.wire import (
    MAX_PAGE, Ack, CancelMessage, CaughtUp, ClientMessage, ConfirmOutlineMessage, ErrorFrame, EventFrame,
    PostMessage, RetryMessage, ServerFrame, decode_json, encode,
)  # fmt: skip
from openmaic.errors import DatabaseUnavailable, OpenMaicError
from openmaic.events.log import RecordedEvent, envelope
from openmaic.store.database import collapse_groups

__all__ = ["StreamSocketQuery"]

log = logging.getLogger("openmaic.api")

TRY_AGAIN_LATER = 1013  # the client resumes from its last seq, now (too slow) or once the service is back
TOO_SLOW = TRY_AGAIN_LATER
INTERNAL_ERROR = 1011
CLOSE_GRACE_S = 10.0
"""How long the close handshake may take. The frame in flight must be written first, and a client that stopped
reading entirely may never take it; past this the handler gives up on a clean close."""


class StreamSocketQuery(msgspec.Struct, frozen=True, kw_only=True):
    after: Annotated[int, msgspec.Meta(ge=0)] = 0
    """Send events with a seq greater than this (the last seq the client has)."""


@api_route(bp, "WS", "/api/streams/{id}/ws", query=StreamSocketQuery, ws_receives=ClientMessage,
           ws_sends=ServerFrame, errors=(404, 400))  # fmt: skip
async def stream_socket(call: Call, id: str) -> None:
    """Follow a stream live over a WebSocket, and send commands on the same socket.

    Frames: event, caught_up, ack, error. Closed with 1013 when the client cannot keep up; reconnect with
    after=<last seq received>.
    """
    row = await visible_stream(call, id)
    after = check_cursor(call.query.after, row["head_seq"], "after")
    ws = call.request
    await accept_websocket(ws)
    metrics.WEBSOCKET_CLIENTS.inc()
    try:
        await _Connection(call.services, ws, call.user, id, after).run()
    finally:
        metrics.WEBSOCKET_CLIENTS.dec()


class _Connection:
    def __init__(self, services: ApiServices, ws: Any, owner: str, stream_id: str, after: int) -> None:
        self.services = services
        self.ws = ws
        self.owner = owner
        self.stream_id = stream_id
        self.after = after
        self.too_slow = False

    async def run(self) -> None:
        close_code: int | None = None
        try:
            # The send queue: bounded, so a connection never holds more than this many frames in memory.
            send, receive = trio.open_memory_channel[bytes | LiveEvent](self.services.config.server.ws_send_queue)
            with collapse_groups():
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._pump, send.clone(), nursery.cancel_scope)
                    nursery.start_soon(self._read_commands, send.clone())
                    send.close()
                    await self._write(receive)
            close_code = TOO_SLOW if self.too_slow else None
            reason = "too slow: reconnect with after=<last seq>"
        except (ServiceUnavailable, DatabaseUnavailable) as exc:
            # Not this client's fault and not a bug: the feed or the database is down for now. 1013 tells the
            # client to come back later (with after=<last seq>), as a full queue does.
            close_code, reason = TRY_AGAIN_LATER, _close_reason(exc.message)
        except Exception as exc:  # any other failure ends this connection, never the server
            describe(exc, method="WS", path=f"/api/streams/{self.stream_id}/ws")  # logs it with a reference
            close_code, reason = INTERNAL_ERROR, "internal error"
        if close_code is not None:
            with trio.move_on_after(CLOSE_GRACE_S):
                await self.ws.close(close_code, reason)

    async def _write(self, receive: trio.MemoryReceiveChannel[bytes | LiveEvent]) -> None:
        async with receive:
            async for frame in receive:
                # A live event is encoded once for every socket of its stream; other frames are this socket's.
                await self.ws.send(frame.encoded(ws_text) if isinstance(frame, LiveEvent) else frame.decode())

    async def _pump(self, send: trio.MemorySendChannel[bytes | LiveEvent], connection: trio.CancelScope) -> None:
        log_, feeds, stream_id = self.services.log, self.services.feeds, self.stream_id
        async with send:
            cursor = self.after
            while True:  # catching up: wait for room, the client reads history at its own pace
                batch = await log_.read_stream(stream_id, cursor, MAX_PAGE)
                for e in batch:
                    await send.send(LiveEvent(e))
                    cursor = e.seq
                if len(batch) < MAX_PAGE:
                    break
            await send.send(encode(CaughtUp(cursor)))
            with feeds.subscriber(stream_id, cursor, send) as sub:
                while gap := await feeds.join(sub):  # behind the stream's feed: deliver the gap first, paced
                    for e in gap:
                        await send.send(LiveEvent(e))
                    sub.after = gap[-1].seq
                # Live: the feed queues each new event for us without waiting, until it drops us.
                await sub.ended.wait()
            if sub.too_slow:
                # The queue was full: the client cannot keep up. Stop the writer and the reader at once (what is
                # still queued is read again when the client resumes); the connection closes with 1013.
                self.too_slow = True
                connection.cancel()
                return
            raise sub.error or ServiceUnavailable("the stream's live feed ended; reconnect")

    async def _read_commands(self, send: trio.MemorySendChannel[bytes]) -> None:
        async with send:
            while True:
                message = await self.ws.receive()
                answer = await self._answer(message)
                # Answers wait for room like the backlog does; a client too slow for live events is caught
                # by the pump.
                await send.send(encode(answer))

    async def _answer(self, message: str | bytes) -> ServerFrame:
        raw = message.encode() if isinstance(message, str) else message
        command_id = _command_id(raw)
        try:
            command = decode_json(raw, ClientMessage)  # type: ignore[arg-type]
            result = await self._dispatch(command)
        except Exception as exc:  # every failure becomes an error frame; the socket stays open
            problem = describe(exc, method="WS", path=f"/api/streams/{self.stream_id}/ws")
            return ErrorFrame(command_id, ErrorInfo(problem.code, problem.message, problem.details or None))
        return Ack(result.command_id, result.seq, result.replayed)

    async def _dispatch(self, command: Any) -> CommandResult:
        commands = self.services.commands
        if commands is None:
            raise ServiceUnavailable("commands are not available in this process")
        owner, sid, cid = self.owner, self.stream_id, command.command_id
        match command:
            case PostMessage(text=text, delivery=delivery):
                return await commands.post_message(owner, sid, cid, text, delivery)
            case CancelMessage():
                return await commands.cancel(owner, sid, cid)
            case ConfirmOutlineMessage(outline_revision=revision, outline=outline):
                return await commands.confirm_outline(owner, sid, cid, revision, outline)
            case RetryMessage():
                return await commands.retry(owner, sid, cid)
        raise OpenMaicError(f"unhandled command {type(command).__name__}")  # unreachable: the union is closed


def _close_reason(message: str) -> str:
    """A close frame's reason: at most 123 bytes of UTF-8 (RFC 6455 §5.5: control frames carry 125)."""
    raw = message.encode()
    return message if len(raw) <= 123 else raw[:120].decode(errors="ignore") + "..."


def ws_text(event: RecordedEvent) -> str:
    """An event's WebSocket frame (a text message)."""
    return encode(EventFrame(event.seq, envelope(event))).decode()


def _command_id(raw: bytes) -> str | None:
    """The message's command_id if one can be read, so that an error frame names the command it refuses."""
    try:
        obj = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    cid = obj.get("command_id") if isinstance(obj, dict) else None
    return cid if isinstance(cid, str) else None

