"""Following one stream over server-sent events: the paced backlog, ``caught_up``, then live events and pings.

:func:`follow_sse` is the one implementation of a stream's SSE response; what a frame looks like is the
caller's :class:`SseFraming` (the run's OpenMAIC client events, see :mod:`openmaic.api.generation_runs`). The
response is pulled: the next events are read only once the previous ones were written, so a slow reader costs no
memory. After the backlog the follower joins the stream's live feed (:mod:`openmaic.feeds.live`); a reader
found more than ``server.ws_send_queue`` events (or ``server.ws_send_queue_bytes`` bytes) behind the stream's
head once live is too slow to follow it:
the response ends, and the client resumes from its last seq (an ``EventSource`` does so by itself, sending
``Last-Event-ID``). A comment ``: ping`` is written whenever nothing was written for ``server.sse_ping_s``. While the
database is away a response pings and waits, or ends with a ``retry:`` hint (:mod:`openmaic.api.outage`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Literal, Protocol

import trio
from quart import Response

from openmaic import metrics
from openmaic.feeds.live import LiveEvent
from openmaic.feeds.queues import open_send_queue
from openmaic.api.outage import RETRY, SSE_HEADERS, database_outage, until_database_answers
from openmaic.api.services import ApiServices
from openmaic.api.wire import MAX_PAGE, encode
from openmaic.events.log import PAGE_BYTES, RecordedEvent, more_after

__all__ = ["PING", "Phase", "SseFraming", "SSE_HEADERS", "ViewFraming", "end_on_outage", "feed_response", "follow_sse",
           "sse_data"]

Phase = Literal["backlog", "live"]

PING = b": ping\n\n"
WRITE_CHUNK = 64 * 1024
"""Frames are written in chunks of about this size: one write per event is slow."""


class SseFraming(Protocol):
    """What a follower writes: the frames of events (some events may have none), and the caught-up frame."""

    def frames(self, events: Sequence[RecordedEvent], phase: Phase) -> list[bytes]: ...

    def live(self, event: LiveEvent) -> bytes:
        """The frame of one live event (b"" for none); it may share encodings across subscribers."""
        ...

    def caught_up(self, start: int, seq: int) -> bytes: ...


class ViewFraming:
    """An :class:`SseFraming` over a view of the stream: :meth:`client_frame` maps one event (advancing the view,
    so events must pass in seq order) to its client frame, a Struct with ``type``; the frame goes out as
    ``id: <seq>`` + ``event: <type>`` + ``data: <frame>``. The stream WebSocket sends the same client frames."""

    def __init__(self, decode: Callable[[RecordedEvent], Any]) -> None:
        self.decode = decode

    def client_frame(self, e: RecordedEvent, event: Any, phase: Phase) -> Any:
        raise NotImplementedError

    def _frame(self, e: RecordedEvent, event: Any, phase: Phase) -> bytes:
        frame = self.client_frame(e, event, phase)
        if frame is None:
            return b""
        return b"id: %d\nevent: %s\ndata: %s\n\n" % (e.seq, frame.type.encode(), sse_data(encode(frame)))

    def frames(self, events: Sequence[RecordedEvent], phase: Phase) -> list[bytes]:
        return [f for f in (self._frame(e, self.decode(e), phase) for e in events) if f]

    def live(self, event: LiveEvent) -> bytes:
        return self._frame(event.event, event.encoded(self.decode), "live")  # decoded once for every follower

    def caught_up(self, start: int, seq: int) -> bytes:
        raise NotImplementedError


def feed_response(changes: AsyncIterator[Any]) -> Response:
    """An SSE response of an owner's feed: each change as an unnamed frame, ``None`` (a heartbeat) as a ping. The
    database going away ends it with a ``retry:`` hint (:func:`end_on_outage`): the client reconnects and reads the
    list afresh."""

    async def body() -> AsyncIterator[bytes]:
        metrics.SSE_CLIENTS.inc()
        try:
            async with contextlib.aclosing(changes):  # closed with the response
                async for change in changes:
                    yield PING if change is None else b"data: " + sse_data(encode(change)) + b"\n\n"
        finally:
            metrics.SSE_CLIENTS.dec()

    response = Response(end_on_outage(body()), 200, dict(SSE_HEADERS))
    response.timeout = None  # a live feed has no end; quart would otherwise cut it after 60 s
    return response


async def end_on_outage(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``chunks``, ended cleanly with a ``retry:`` hint if the database goes away under them (an ``EventSource``
    reconnects after a response that ends, and is then told to wait: :mod:`openmaic.api.outage`); an error that
    escaped instead would cut the connection mid-chunk."""
    async with contextlib.aclosing(chunks):  # closed with the response
        try:
            async for chunk in chunks:
                yield chunk
        except Exception as exc:
            if not database_outage(exc):
                raise
            yield RETRY


def sse_data(data: bytes) -> bytes:
    """JSON as the value of ``data:`` lines. Encoded JSON is compact, but a line break outside strings is legal
    JSON whitespace: SSE joins multi-line data with "\\n", so the client parses the same document."""
    if b"\n" in data or b"\r" in data:
        data = b"\ndata: ".join(data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n"))
    return data


def _chunks(frames: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    buf: list[bytes] = []
    size = 0
    for frame in frames:
        buf.append(frame)
        size += len(frame)
        if size >= WRITE_CHUNK:
            out.append(b"".join(buf))
            buf, size = [], 0
    if buf:
        out.append(b"".join(buf))
    return out


async def follow_sse(services: ApiServices, stream_id: str, start: int, framing: SseFraming, *,
                     head: int) -> AsyncIterator[bytes]:
    """The SSE body of ``stream_id`` after seq ``start``, framed by ``framing``. The database going away does not
    end it: it waits, with pings, until the database answers again and goes on from the last seq it wrote (the
    backlog, or the live feed), so the client sees no gap and needs no reconnect (:mod:`openmaic.api.outage`).

    ``head``: the stream's head as the route read its row from the primary. The backlog is a catch-up read the
    replica may serve, and never ends (``caught_up``) before that seq or ``start``: what the client has seen, or
    wrote before it asked, is never missing from it (:mod:`openmaic.store.replica`)."""
    metrics.SSE_CLIENTS.inc()
    at = _Position(start, max(head, start))
    try:
        while True:
            async with contextlib.aclosing(_follow(services, stream_id, framing, at)) as chunks:
                try:
                    async for chunk in chunks:
                        yield chunk
                    return  # dropped by the feed (too slow, or the server is stopping): the client resumes
                except Exception as exc:
                    if not database_outage(exc):
                        raise
            async with contextlib.aclosing(until_database_answers(services)) as waiting:
                async for chunk in waiting:
                    yield chunk
    finally:
        metrics.SSE_CLIENTS.dec()


class _Position:
    """How far a follower got: the last seq written, and whether the backlog was done (``caught_up`` sent)."""

    def __init__(self, start: int, floor: int) -> None:
        self.start = start
        self.cursor = start
        self.floor = floor
        """The seq the backlog must reach (the stream's head when the response began)."""
        self.live = False


async def _follow(services: ApiServices, stream_id: str, framing: SseFraming, at: _Position) -> AsyncIterator[bytes]:
    """The stream's frames from ``at.cursor`` on, advancing it; raises what the database raised, or the error that
    ended its live feed."""
    log, feeds = services.log, services.feeds
    ping_s = services.config.server.sse_ping_s
    phase: Phase = "live" if at.live else "backlog"  # events missed during an outage come as live ones
    # Live events wait here while the previous write is in progress; a full queue means the client cannot keep
    # up, the feed drops it, and the response ends: the client resumes from its last seq.
    send, receive = open_send_queue(services.config.server.ws_send_queue, services.config.server.ws_send_queue_bytes)
    try:
        while True:  # the backlog, paced by the client: the next page is read once this one is written
            # Bounded by bytes as well as by count: a page of large events is not held whole per client.
            batch = await log.read_stream(stream_id, at.cursor, MAX_PAGE, max_bytes=PAGE_BYTES, floor=at.floor)
            for chunk in _chunks(framing.frames(batch, phase)):
                yield chunk
            if batch:
                at.cursor = batch[-1].seq
            if not more_after(batch, MAX_PAGE, PAGE_BYTES):
                break
        if not at.live:
            yield framing.caught_up(at.start, at.cursor)
            at.live = True
        with feeds.subscriber(stream_id, at.cursor, send) as sub:
            while gap := await feeds.join(sub):  # behind the stream's feed: deliver the gap first, paced
                for chunk in _chunks(framing.frames(gap, "live")):
                    yield chunk
                sub.after = at.cursor = gap[-1].seq
            last_write = trio.current_time()
            while True:
                # The next live event, or a ping once the connection has been quiet for ping_s. (No yield inside
                # the cancel scope: an async generator must not suspend within one.)
                live: LiveEvent | None = None
                with trio.move_on_after(max(0.0, ping_s - (trio.current_time() - last_write))):
                    try:
                        live = await receive.receive()
                    except trio.EndOfChannel:
                        # Dropped by the feed: too slow (the client resumes), the server stopping, or the feed's
                        # reads failed — the database's outage is waited out by the caller.
                        if sub.error is not None and database_outage(sub.error):
                            raise sub.error  # its __cause__ says why
                        return
                if live is None:
                    yield PING
                    last_write = trio.current_time()
                    continue
                frames = [framing.live(live)]
                at.cursor = live.seq
                while True:  # whatever else is already queued goes in the same write
                    try:
                        nxt = receive.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    frames.append(framing.live(nxt))
                    at.cursor = nxt.seq
                out = b"".join(frames)
                if out:
                    yield out
                    last_write = trio.current_time()
    finally:
        receive.close()
