"""Reading a stream over HTTP: a JSON page, or a server-sent-event stream that follows the stream live.

``GET /api/streams/{id}/events?after=N&limit=M`` answers a page of envelopes. The same URL with
``Accept: text/event-stream`` answers SSE:

* each event is a frame ``id: <seq>`` + ``data: <envelope JSON>`` with **no** ``event:`` line, so it reaches
  ``EventSource.onmessage`` (the envelope's own ``type`` says what happened);
* after the backlog, one ``event: caught_up`` frame with ``data: {"seq": H}`` (no ``id``, so ``Last-Event-ID``
  stays the seq of the last event);
* then live events, and a comment ``: ping`` whenever nothing was written for ``server.sse_ping_s``.

A reconnecting ``EventSource`` sends ``Last-Event-ID``, which takes precedence over ``after``. The response is
pulled: the next events are read only when the previous ones were written, so a slow reader costs no memory.
Once live, a reader found more than ``server.ws_send_queue`` events behind the stream's head is too slow to
follow it: the response ends and the client resumes from its last seq (the browser does so by itself).

The WebSocket route for the same stream lives in :mod:`openmaic.api.stream_socket`.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from typing import Annotated

import msgspec
from quart import Blueprint, Response

from openmaic.api.follow import Phase, follow_sse, sse_data
from openmaic.api.live_feeds import LiveEvent
from openmaic.api.routing import Call, api_route
from openmaic.api.services import ApiServices
from openmaic.api.wire import MAX_PAGE, EventPage, encode
from openmaic.errors import InvalidInput, StreamNotFound
from openmaic.events.log import RecordedEvent, envelope
from openmaic.store.database import Record

__all__ = ["bp", "check_cursor", "visible_stream"]

bp = Blueprint("streams", __name__)

NonNegInt = Annotated[int, msgspec.Meta(ge=0)]

_DIGITS = re.compile(r"^[0-9]{1,18}$")


class EventsQuery(msgspec.Struct, frozen=True, kw_only=True):
    after: NonNegInt = 0
    """Return events with a seq greater than this."""
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_PAGE)] = MAX_PAGE
    """At most this many events (JSON pages only)."""


async def visible_stream(call: Call, stream_id: str) -> Record:
    """The stream's row if it exists for the caller; otherwise the same 404 whether it is missing, deleted, or
    someone else's (the answer must not reveal which)."""
    row = await call.services.log.stream(stream_id)
    if row is None or row["owner_id"] != call.owner or row["deleted_at"] is not None:
        raise StreamNotFound(f"no stream {stream_id!r}", stream_id=stream_id)
    return row


def check_cursor(value: int, head: int, name: str) -> int:
    """A resume cursor must not lie beyond the stream's head: no client can have seen such a seq."""
    if value > head:
        raise InvalidInput(
            f"{name}: {value} is beyond the stream's last seq ({head})", path=name, head_seq=head
        )
    return value


@api_route(bp, "GET", "/api/streams/{id}/events", query=EventsQuery, response=EventPage, sse=True, errors=(404, 400))
async def stream_events(call: Call, id: str) -> EventPage | Response:
    """Read a stream's events: a JSON page, or (Accept: text/event-stream) a live SSE stream.

    Pages: ask again with after=next_after until next_after equals head_seq. SSE: resumes from Last-Event-ID
    (else after), sends the backlog, an event named caught_up, then live events and comment pings.
    """
    row = await visible_stream(call, id)
    query: EventsQuery = call.query
    head = row["head_seq"]
    if call.request.accept_mimetypes.best_match(["application/json", "text/event-stream"]) == "text/event-stream":
        if "Last-Event-ID" in call.request.headers:  # a reconnecting EventSource: its header wins over ?after
            start = check_cursor(_last_event_id(call), head, "Last-Event-ID")
        else:
            start = check_cursor(query.after, head, "after")
        response = Response(
            _sse(call.services, id, start),
            200,
            {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        response.timeout = None  # a live stream has no end; quart would otherwise cut it after 60 s
        return response
    after = check_cursor(query.after, head, "after")
    events = await call.services.log.read_stream(id, after, query.limit)
    next_after = events[-1].seq if events else after
    # The page may include events appended after the row was read: the head is at least the last one here.
    return EventPage([envelope(e) for e in events], next_after, max(head, next_after))


def _last_event_id(call: Call) -> int:
    value = call.request.headers.get("Last-Event-ID", "").strip()
    if not _DIGITS.match(value):
        raise InvalidInput(
            f"Last-Event-ID: expected the seq of an event (a non-negative integer), got {value!r}",
            path="Last-Event-ID",
        )
    return int(value)


def sse_frame(e: RecordedEvent) -> bytes:
    """One event as an SSE frame."""
    return b"id: %d\ndata: %s\n\n" % (e.seq, sse_data(encode(envelope(e))))


class _EnvelopeFraming:
    """Frames of every event as its envelope, unnamed (they all reach ``EventSource.onmessage``)."""

    def frames(self, events: Sequence[RecordedEvent], phase: Phase) -> list[bytes]:
        return [sse_frame(e) for e in events]

    def live(self, event: LiveEvent) -> bytes:
        return event.encoded(sse_frame)  # encoded once for every subscriber of the stream

    def caught_up(self, start: int, seq: int) -> bytes:
        return b'event: caught_up\ndata: {"seq":%d}\n\n' % seq


def _sse(services: ApiServices, stream_id: str, start: int) -> AsyncIterator[bytes]:
    return follow_sse(services, stream_id, start, _EnvelopeFraming())
