"""``WS /api/streams/{id}/ws?after=N``: one of your streams live, and its commands on the same socket.

This project's addition to OpenMAIC's API, for clients that want both directions on one connection. It carries
exactly the client events of the stream's SSE (the same view of the log, at the same seqs): a run's
(:mod:`openmaic.runs.client_events`), a session's (:mod:`openmaic.workbench.views`), or a classroom's
``classroom_changed``. The server sends ``{"type":"event","seq","event"}`` for each client event after
``after`` (``event`` is the object an SSE frame's data holds), then ``{"type":"caught_up","from","seq"}``, then
live events.

The client may send the stream's commands, ``{"type": <command>, "commandId"?, …}`` with the body of the
command's HTTP route: a run's ``confirm_outline``, ``retry``, ``hold_outline`` and ``discard``, a session's
``message``, ``cancel`` and ``title`` (:mod:`openmaic.api.commands`). Each is decoded as its route decodes it
and handled by the same call, then answered by ``{"type":"ack","commandId","result":<the route's answer>}`` or
``{"type":"error","commandId","errorCode","error","details"?}`` (the route's error envelope). A malformed
message gets an error frame, and so does one larger than a JSON body may be (``limits.json_body_bytes``: the
route's 413, up to twice that size; a larger one closes the connection with 1009); the connection stays open.

Three tasks per connection, one nursery:

* the *pump* reads the stream's history, frames it through the connection's view of the stream and puts the
  frames in the connection's send queue (``server.ws_send_queue`` frames and ``server.ws_send_queue_bytes``
  bytes, :mod:`openmaic.feeds.queues`), then joins the stream's live feed (:mod:`openmaic.feeds.live`) with its
  view as the framer: the feed frames each new event once for every connection whose view is at the same seq,
  and writes the frame itself to each connection whose writer is idle (straight to the socket,
  :mod:`openmaic.api.direct_frames`), or puts it in that connection's queue;
* the *reader* decodes commands, dispatches them, and queues their answers;
* the *writer* (the handler's own task) takes frames from the queue and writes them to the socket (an event's
  frame straight to the socket when it can). The feed writes to a connection only while its writer waits on
  an empty queue, so the frames go out in queue order either way.

While catching up, the pump waits for room in the queue: the client asked for history and reads it at its own
pace. Once live, the feed never waits: a full queue means the client cannot keep up with the stream, and the
connection is closed with 1013 ("try again later"). The client reconnects with ``after=<last seq it got>`` and
catches up again, paced; nothing is lost and the server's memory per connection stays bounded.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Annotated, Any

import msgspec
import trio
from quart import Blueprint

from openmaic import metrics
from openmaic.api import agent_sessions, classrooms, generation_runs
from openmaic.api.commands import CommandTable
from openmaic.api.direct_frames import DirectFrames, Framed, payload_of, text_frame
from openmaic.api.errors import ServiceUnavailable, describe
from openmaic.concurrency import collapse_groups
from openmaic.feeds.live import LiveEvent
from openmaic.feeds.queues import QueueReceive, QueueSend, open_send_queue
from openmaic.api.identity import accept_websocket
from openmaic.api.routing import Call, api_route, too_large
from openmaic.api.services import ApiServices
from openmaic.api.streams import check_cursor, visible_stream
from openmaic.api.wire import MAX_PAGE, Wire, decode_json, encode
from openmaic.events.log import PAGE_BYTES, RecordedEvent, more_after
from openmaic.errors import DatabaseUnavailable, InvalidInput
from openmaic.workbench import fold as session_fold
from openmaic.workbench.views import SessionView

__all__ = ["StreamSocketQuery", "bp"]

bp = Blueprint("streams", __name__)

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


# -- frames ------------------------------------------------------------------------------------------------------


class _Frame(Wire, tag_field="type"):
    pass


class EventFrame(_Frame, tag="event"):
    """One client event of the stream (``event`` is what its SSE frame's data holds)."""

    seq: int
    event: Any


class CaughtUp(_Frame, tag="caught_up"):
    """The backlog has been sent up to ``seq``; live events follow."""

    from_: int = msgspec.field(name="from")
    seq: int


class Ack(_Frame, tag="ack"):
    """A command was accepted; ``result`` is what its HTTP route answers."""

    command_id: str | None
    result: Any


class ErrorFrame(_Frame, tag="error", omit_defaults=True):
    """A message was refused, as its HTTP route refuses it; the connection stays open."""

    command_id: str | None = None
    success: bool
    error_code: str
    error: str
    details: dict[str, Any] | None = None


class ClientCommand(Wire):
    """The part of every message that says which command it is."""

    type: str
    command_id: str | None = None


ServerFrame = EventFrame | CaughtUp | Ack | ErrorFrame


class _EventFramer:
    """A connection's view of its stream as the WebSocket frames of its events (a live feed's framer).

    Its ``key`` is the view's class: a view's frames depend on that, the stream's events and the process's
    configuration only (it is a fold), so the feed frames each live event once for all views of a class at the
    same seq."""

    def __init__(self, view: Any, decode: Any) -> None:
        self.view = view
        self.decode = decode
        self.key = type(view)

    def frame(self, live: LiveEvent) -> Framed | None:
        return self._frame(live.event, live.encoded(self.decode), "live")  # decoded once for every follower

    def of(self, e: RecordedEvent, phase: str) -> Framed | None:
        return self._frame(e, self.decode(e), phase)

    def _frame(self, e: RecordedEvent, event: Any, phase: str) -> Framed | None:
        client = self.view.client_frame(e, event, phase)  # advances the view: events pass in seq order
        return None if client is None else text_frame(encode(EventFrame(seq=e.seq, event=client)))


class _Finish:
    """Queued when the feed's direct write left part of a frame: the writer writes the rest."""

    __slots__ = ()


FINISH = _Finish()


async def _view_for(services: ApiServices, row: Any, after: int) -> tuple[Any, CommandTable | None]:
    """The client view of the stream from seq ``after``, and its command table (None: it takes no commands)."""
    kind, sid = row.kind, row.id
    if kind == "generation":
        runs = generation_runs.runs_of_services(services)
        view = generation_runs.RunFraming(sid, await generation_runs.client_view_from(runs, sid, after),
                                          services.log.decode)
        return view, generation_runs.RUN_COMMANDS
    if kind == "course":
        return classrooms.ClassroomFraming(sid), None
    # Every other kind is a session: its lifecycle is the shared vocabulary of sessions.
    # A catch-up read: ``after`` is at most the stream's head as the route read it from the primary.
    state, _ = await services.log.fold(sid, session_fold.initial(), session_fold.evolve, to_seq=after, floor=after)
    view = agent_sessions.SessionFraming(SessionView(state), services.log.decode)
    return view, agent_sessions.SESSION_COMMANDS if kind == "workbench" else None


@api_route(bp, "WS", "/api/streams/{id}/ws", query=StreamSocketQuery, ws_receives=ClientCommand,
           ws_sends=ServerFrame, errors=(404, 400))  # fmt: skip
async def stream_socket(call: Call, id: str) -> None:
    """Follow one of your streams live over a WebSocket (its client events), and send its commands.

    Frames: event, caught_up, ack, error. Closed with 1013 when the client cannot keep up; reconnect with
    after=<last seq received>.
    """
    row = await visible_stream(call, id)
    after = check_cursor(call.query.after, row.head_seq, "after")
    view, commands = await _view_for(call.services, row, after)
    ws = call.request
    await accept_websocket(ws)
    metrics.WEBSOCKET_CLIENTS.inc()
    try:
        await _Connection(call.services, ws, call.user, id, after, row.head_seq, view, commands).run()
    finally:
        metrics.WEBSOCKET_CLIENTS.dec()


class _Connection:
    def __init__(self, services: ApiServices, ws: Any, owner: str, stream_id: str, after: int, head: int, view: Any,
                 commands: Any) -> None:
        self.services = services
        self.ws = ws
        self.owner = owner
        self.stream_id = stream_id
        self.after = after
        self.head = head
        """The stream's head as its row was read from the primary: the backlog (a catch-up read, which the replica
        may serve) reaches at least this far before ``caught_up``."""
        self.view = view
        self.commands = commands
        self.too_slow = False
        self.direct: DirectFrames | None = None
        self.idle = False
        """The writer waits for its queue (and the queue was empty when it began to): the feed may write."""
        self.queue: QueueReceive | None = None
        self.finish_send: QueueSend | None = None

    async def run(self) -> None:
        close_code: int | None = None
        try:
            # The send queue: bounded by frames and by bytes, so a connection never holds more in memory.
            server = self.services.config.server
            send, receive = open_send_queue(server.ws_send_queue, server.ws_send_queue_bytes)
            self.queue = receive
            self.direct = DirectFrames.of(self.ws)  # None: every frame goes the ordinary way
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

    async def _write(self, receive: QueueReceive) -> None:
        # The one consumer of the queue: frames go out in queue order (the feed writes only while it is empty).
        direct = self.direct
        async with receive:
            while True:
                self.idle = True
                try:
                    item = await receive.receive()
                except trio.EndOfChannel:
                    return
                finally:
                    self.idle = False
                if isinstance(item, Framed):
                    if direct is None or not await direct.send(item):  # the same bytes either way
                        await self.ws.send(payload_of(item).decode())
                elif item is FINISH:
                    await direct.finish()  # type: ignore[union-attr]  # only a direct write queues it
                else:
                    await self.ws.send(item.decode())

    def _write_now(self, frame: bytes) -> bool:
        """The feed's sink: write a live frame now if the writer is idle on an empty queue (no task hop)."""
        direct, queue = self.direct, self.queue
        if direct is None or queue is None or not self.idle or not queue.empty or not direct.write_now(frame):
            return False
        if direct.unfinished and self.finish_send is not None:
            # The socket took part of it: the writer writes the rest (first: the queue is empty). Meanwhile the
            # send lock counts as held, so nothing else is written before it.
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                self.finish_send.send_nowait(FINISH)  # an empty queue has room; closed: the connection ends
        return True

    async def _pump(self, send: QueueSend, connection: trio.CancelScope) -> None:
        log_, feeds, stream_id = self.services.log, self.services.feeds, self.stream_id
        framer = _EventFramer(self.view, log_.decode)
        async with send:
            self.finish_send = send
            cursor = self.after
            while True:  # catching up: wait for room, the client reads history at its own pace
                batch = await log_.read_stream(stream_id, cursor, MAX_PAGE, max_bytes=PAGE_BYTES, floor=self.head)
                for e in batch:
                    if (frame := framer.of(e, "backlog")) is not None:
                        await send.send(frame)
                    cursor = e.seq
                if not more_after(batch, MAX_PAGE, PAGE_BYTES):
                    break
            await send.send(encode(CaughtUp(from_=self.after, seq=cursor)))
            sink = self._write_now if self.direct is not None else None
            with feeds.subscriber(stream_id, cursor, send, framer=framer, sink=sink) as sub:
                while gap := await feeds.join(sub):  # behind the stream's feed: deliver the gap first, paced
                    for e in gap:
                        if (frame := framer.of(e, "live")) is not None:
                            await send.send(frame)
                    sub.after = gap[-1].seq
                # Live: the feed frames each new event for us (the framer is the feed's now) and writes it or
                # queues it without waiting, until it drops us.
                await sub.ended.wait()
            if sub.too_slow:
                # The queue was full: the client cannot keep up. Stop the writer and the reader at once (what is
                # still queued is read again when the client resumes); the connection closes with 1013.
                self.too_slow = True
                connection.cancel()
                return
            raise sub.error or ServiceUnavailable("the stream's live feed ended; reconnect")

    async def _read_commands(self, send: QueueSend) -> None:
        async with send:
            while True:
                message = await self.ws.receive()
                answer = await self._answer(message)
                # Answers wait for room like the backlog does; a client too slow for live events is caught
                # by the pump.
                await send.send(encode(answer))

    async def _answer(self, message: str | bytes) -> Ack | ErrorFrame:
        raw = message.encode() if isinstance(message, str) else message
        command_id = _command_id(raw)
        try:
            limit = self.services.config.limits.json_body_bytes
            if len(raw) > limit:  # the refusal of a body this large on the command's route
                raise too_large(limit)
            head = decode_json(raw, ClientCommand)
            command = self.commands.get(head.type) if self.commands is not None else None
            if command is None:
                known = ", ".join(self.commands.names()) if self.commands is not None else "none"
                raise InvalidInput(f"type: this stream takes no command {head.type!r} (it takes: {known})",
                                   path="type")
            # The same body and the same call as the command's HTTP route: one road, whatever the transport.
            body = decode_json(raw, command.body)
            result = await command.handler(self.services, self.owner, self.stream_id, body)
        except Exception as exc:  # every failure becomes an error frame; the socket stays open
            problem = describe(exc, method="WS", path=f"/api/streams/{self.stream_id}/ws")
            code = self.commands.error_codes.get(problem.status) if self.commands is not None else None
            if code is not None:  # the code the command's HTTP route gives this status
                problem = msgspec.structs.replace(problem, code=code)
            return ErrorFrame(command_id=command_id, success=False, error_code=problem.code, error=problem.message,
                              details=problem.details or None)
        return Ack(command_id=command_id, result=result)


def _close_reason(message: str) -> str:
    """A close frame's reason: at most 123 bytes of UTF-8 (RFC 6455 §5.5: control frames carry 125)."""
    raw = message.encode()
    return message if len(raw) <= 123 else raw[:120].decode(errors="ignore") + "..."


def _command_id(raw: bytes) -> str | None:
    """The message's commandId if one can be read, so that an error frame names the command it refuses."""
    try:
        obj = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):  # decode_json below says what is wrong with it
        return None
    cid = obj.get("commandId") if isinstance(obj, dict) else None
    return cid if isinstance(cid, str) else None
