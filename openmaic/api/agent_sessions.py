"""OpenMAIC's Pro agent sessions: ``/api/agent/sessions…``, over the workbench sessions
(:class:`~openmaic.workbench.service.WorkbenchSessions`, the same calls the WebSocket commands make).

A session is the workbench agent editing one course (``stageId``: an existing one, or a new one). Its status is
OpenMAIC's (``queued | running | succeeded | failed | cancelled``; a new message revives an ended session), and
the server decides whether a message steers the agent's turn in progress or queues the next one. Reads of a
session that is not the caller's are the plain ``Not found``.

``GET …/{id}/events`` is the session's SSE (``Last-Event-ID`` or ``?lastEventId=``): a ``: replaying from event
N`` comment, frames ``id: <eventId>`` + ``event: <type>`` + data ``{id, ts, attempt, type, data, phase}`` in the
vocabulary of :mod:`openmaic.workbench.views`, one ``caught_up`` ``{type, replayed, fromEventId}``, then live
frames and pings; it does not end when the session does (a new message revives it).
``GET /api/agent/owner-events`` is the owner's SSE of session changes (``session_created``, ``session_status``,
``session_title``, ``session_cancel_requested``), after a ``caught_up``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

import trio
from quart import Blueprint, Response

from openmaic import errors, metrics
from openmaic.api.commands import CommandTable
from openmaic.api.follow import PING, SSE_HEADERS, Phase, ViewFraming, end_on_outage, follow_sse, sse_data
from openmaic.api.idempotency import idempotency_key
from openmaic.api.pages import PageQuery, cursor_of, next_page_headers, read_cursor
from openmaic.api.routing import Call, api_route
from openmaic.api.services import ApiServices
from openmaic.api.wire import Wire, encode
from openmaic.events.log import RecordedEvent
from openmaic.events.wakeups import RUNNABLE
from openmaic.materials import material_sizes, valid_material_id
from openmaic.workbench.service import SessionAlreadyTerminal, WorkbenchSessions
from openmaic.workbench.views import SessionMeta, SessionView, pro_status, session_meta

__all__ = ["SESSION_COMMANDS", "SessionFraming", "bp"]

bp = Blueprint("agent_sessions", __name__)

MAX_MATERIALS = 20
_SESSION = {"plain_not_found": True}
_DIGITS = re.compile(r"[0-9]{1,18}")


def sessions_of(call: Call) -> WorkbenchSessions:
    if call.services.sessions is None:
        raise errors.OpenMaicError("sessions are not served by this process")
    return call.services.sessions  # type: ignore[return-value]


def meta(owner: str, row: Any, state: Any) -> SessionMeta:
    return session_meta(row.id, owner, state, attempt=row.attempt, created_at=row.created_at,
                        updated_at=row.updated_at)


async def _check_materials(services: ApiServices, owner: str, material_ids: Sequence[str]) -> None:
    ids = list(dict.fromkeys(material_ids))
    if len(ids) > MAX_MATERIALS:
        raise errors.InvalidInput(f"at most {MAX_MATERIALS} materials per message", path="materialIds")
    found = await material_sizes(services.db, owner, [i for i in ids if valid_material_id(i)])
    missing = [i for i in ids if i not in found]
    if missing:
        raise errors.NotFound(f"material {missing[0]!r} cannot be bound: upload it with POST /api/materials")


class StartSession(Wire):
    prompt: str | None = None
    stage_id: str | None = None
    """The course to work on (one of yours that no run is building); a new one when absent."""
    skill: str | None = None
    existing_course: bool | None = None
    material_ids: list[str] = []
    course_refs: list[Any] = []


class SendMessage(Wire):
    text: str | None = None
    material_ids: list[str] = []
    element_refs: list[Any] = []
    course_refs: list[Any] = []
    command_id: str | None = None
    """This server's addition: makes the message idempotent (the same id answers as the first time); OpenMAIC's
    messages have none."""


class Title(Wire):
    title: str | None


class PostedMessage(Wire):
    seq: int
    text: str
    delivery: str


class MessageAnswer(Wire):
    id: str
    message: PostedMessage
    element_refs_accepted: int
    course_refs_accepted: int


class CancelAnswer(Wire):
    id: str
    cancel_requested: bool


class Runtime(Wire):
    enabled: bool
    runtime_enabled: bool
    persistence: str


@api_route(bp, "POST", "/api/agent/sessions", body=StartSession, response=SessionMeta, status=202,
           errors=(404, 409, 429), idempotent=True)
async def start_session(call: Call) -> tuple[SessionMeta, int]:
    """Start the Pro agent on a course (stageId) or a new one, with a first prompt; 202 with the session.

    The answer is the session as it was created; with an Idempotency-Key, a repeat answers the same session so.
    """
    b: StartSession = call.body
    keyed = idempotency_key(call)
    if keyed is not None:
        # A repeat is answered before anything is checked again: it was checked the first time.
        again = await sessions_of(call).created(call.user, keyed)
        if again is not None:
            return meta(call.user, *again), 202
    if b.prompt is None or not b.prompt.strip():
        raise errors.MissingField("Missing required field: prompt", path="prompt")
    if b.skill:
        raise errors.InvalidInput(f"unknown skill {b.skill!r}: this server has no skills", path="skill")
    await _check_materials(call.services, call.user, b.material_ids)
    row, state = await sessions_of(call).start(call.user, b.prompt, b.stage_id, keyed=keyed)
    return meta(call.user, row, state), 202


async def _page(call: Call) -> tuple[list[tuple[Any, Any]], dict[str, str]]:
    """A page of the caller's sessions, and the headers that point to the next (OpenMAIC's answers here are a
    bare array and a bare map, which cannot carry the cursor themselves)."""
    q: PageQuery = call.query
    found = await sessions_of(call).of_owner(call.user, q.limit + 1, read_cursor(q.cursor, (dt.datetime, str)))
    page = found[: q.limit]
    nxt = cursor_of(page[-1][0].created_at, page[-1][0].id) if len(found) > q.limit else None
    return page, next_page_headers(call.request.path, q, nxt)


@api_route(bp, "GET", "/api/agent/sessions", query=PageQuery, response=list[SessionMeta])
async def list_sessions(call: Call) -> Response:
    """Your sessions, newest first, a page of ?limit= at a time (X-Next-Cursor: the next page's ?cursor=)."""
    page, headers = await _page(call)
    return Response(encode([meta(call.user, row, s) for row, s in page]), 200, headers,
                    content_type="application/json")


@api_route(bp, "GET", "/api/agent/sessions/status", query=PageQuery, response=dict[str, str])
async def session_statuses(call: Call) -> Response:
    """The status of each of your sessions, by id, a page at a time as GET /api/agent/sessions."""
    page, headers = await _page(call)
    return Response(encode({row.id: pro_status(s.status) for row, s in page}), 200, headers,
                    content_type="application/json")


@api_route(bp, "GET", "/api/agent/sessions/{id}", response=SessionMeta, **_SESSION)
async def get_session(call: Call, id: str) -> SessionMeta:
    """A session."""
    row, state = await sessions_of(call).read(call.user, id, catch_up=True)
    return meta(call.user, row, state)


class CancelBody(Wire):
    command_id: str | None = None


SESSION_COMMANDS = CommandTable("workbench")
"""The commands of a Pro session, for its routes and its WebSocket alike."""


@SESSION_COMMANDS.command("title", Title)
async def title(services: ApiServices, owner: str, session_id: str, b: Title) -> Title:
    return Title(title=await _sessions(services).set_title(owner, session_id, b.title))


@SESSION_COMMANDS.command("message", SendMessage)
async def message(services: ApiServices, owner: str, session_id: str, b: SendMessage) -> MessageAnswer:
    sessions = _sessions(services)
    if b.text is None:
        raise errors.MissingField("Missing required field: text", path="text")
    await sessions.read(owner, session_id)  # a session that is not yours: the 404 first
    await _check_materials(services, owner, b.material_ids)
    result, posted = await sessions.send(owner, session_id, b.text, command_id=b.command_id)
    answer = PostedMessage(seq=result.seq, text=posted.text, delivery=posted.delivery)
    return MessageAnswer(id=session_id, message=answer,
                         element_refs_accepted=0, course_refs_accepted=0)


@SESSION_COMMANDS.command("cancel", CancelBody)
async def cancel(services: ApiServices, owner: str, session_id: str, b: CancelBody) -> CancelAnswer:
    await _sessions(services).request_cancel(owner, session_id, command_id=b.command_id)
    return CancelAnswer(id=session_id, cancel_requested=True)


def _sessions(services: ApiServices) -> WorkbenchSessions:
    if services.sessions is None:
        raise errors.OpenMaicError("sessions are not served by this process")
    return services.sessions  # type: ignore[return-value]


@api_route(bp, "PATCH", "/api/agent/sessions/{id}", body=Title, response=Title, **_SESSION)
async def set_title(call: Call, id: str) -> Title:
    """Name the session (null clears its title)."""
    return await title(call.services, call.user, id, call.body)


@api_route(bp, "POST", "/api/agent/sessions/{id}/messages", body=SendMessage, response=MessageAnswer, status=202,
           errors=(429,), **_SESSION)
async def send_message(call: Call, id: str) -> tuple[MessageAnswer, int]:
    """Send a follow-up: it steers the turn in progress, or starts the next one (and revives an ended session)."""
    return await message(call.services, call.user, id, call.body), 202


@api_route(bp, "POST", "/api/agent/sessions/{id}/cancel", response=CancelAnswer, status=202, errors=(409,),
           **_SESSION)
async def cancel_session(call: Call, id: str) -> Response | tuple[CancelAnswer, int]:
    """Stop the agent's work: the session ends cancelled. 409 SESSION_ALREADY_TERMINAL once it has ended."""
    try:
        return await cancel(call.services, call.user, id, CancelBody()), 202
    except SessionAlreadyTerminal as exc:
        # OpenMAIC's own shape for this answer: {code, status, error}.
        body = {"code": exc.error_code, "status": exc.details.get("status"), "error": exc.message}
        return Response(encode(body), 409, content_type="application/json")


@api_route(bp, "GET", "/api/agent/runtime", response=Runtime)
async def runtime(call: Call) -> Runtime:
    """Whether the agent runtime is on (it is, with this server's database)."""
    return Runtime(enabled=True, runtime_enabled=call.services.sessions is not None, persistence="postgresql")


# -- the session's events ------------------------------------------------------------------------------------------


class SessionFrame(Wire):
    id: int
    ts: int
    attempt: int | None
    type: str
    data: dict[str, Any]
    phase: Phase


class SessionFraming(ViewFraming):
    def __init__(self, view: SessionView, decode: Any) -> None:
        super().__init__(decode)
        self.view = view

    def client_frame(self, e: RecordedEvent, event: Any, phase: Phase) -> SessionFrame | None:
        """The client event of ``e`` (decoded as ``event``), advancing the view; None when it has none."""
        out = self.view.next(event, e.seq)
        if out is None:
            return None
        kind, data = out
        return SessionFrame(id=e.seq, ts=int(e.recorded_at.timestamp() * 1000), attempt=e.attempt, type=kind,
                            data=data, phase=phase)

    def caught_up(self, start: int, seq: int) -> bytes:
        body = encode({"type": "caught_up", "replayed": max(0, seq - start), "fromEventId": start})
        return b"event: caught_up\ndata: %s\n\n" % body


class SessionEventsQuery(Wire):
    last_event_id: str = ""


@api_route(bp, "GET", "/api/agent/sessions/{id}/events", query=SessionEventsQuery, sse=True,
           media_type="text/event-stream", **_SESSION)
async def session_events(call: Call, id: str) -> Response:
    """The session's events as server-sent events (Last-Event-ID or ?lastEventId= resumes)."""
    sessions = sessions_of(call)
    row, _ = await sessions.read(call.user, id, catch_up=True)
    value = (call.request.headers.get("Last-Event-ID") or call.query.last_event_id).strip()
    start = int(value) if _DIGITS.fullmatch(value) else 0
    start = start if start <= row.head_seq else 0
    state = await sessions.sessions.state(id, start, floor=start)  # a catch-up read: start <= the primary's head
    framing = SessionFraming(SessionView(state), call.services.log.decode)

    async def body() -> AsyncIterator[bytes]:
        yield b": replaying from event %d\n\n" % start
        # Closed with the response (trio wants every async generator finalized by its owner).
        async with contextlib.aclosing(follow_sse(call.services, id, start, framing, head=row.head_seq)) as chunks:
            async for chunk in chunks:
                yield chunk

    response = Response(body(), 200, dict(SSE_HEADERS))
    response.timeout = None
    return response


# -- the owner's session feed ----------------------------------------------------------------------------------------


async def _owner_session_events(services: ApiServices, owner: str) -> AsyncIterator[bytes]:
    sessions: WorkbenchSessions = services.sessions  # type: ignore[assignment]
    metrics.SSE_CLIENTS.inc()
    try:
        yield b"event: caught_up\ndata: %s\n\n" % encode({"type": "caught_up"})
        known: dict[str, tuple[str, str | None, bool]] = {
            row.id: (pro_status(s.status), s.title, bool(s.seq)) for row, s in await sessions.of_owner(owner)}
        quiet = trio.current_time()
        ping_s = services.config.server.sse_ping_s
        while True:
            # Watch before reading: a change landing between the read and the wait still wakes us.
            with services.wakeups.watch(RUNNABLE, *known) as watch:
                frames = []
                for row, s in await sessions.of_owner(owner):
                    sid, now = row.id, (pro_status(s.status), s.title, bool(s.seq))
                    before = known.get(sid)
                    if before is None:
                        frames.append(("session_created", {"sessionId": sid, "session": meta(owner, row, s)}))
                    else:
                        if before[0] != now[0]:
                            frames.append(("session_status", {"sessionId": sid, "status": now[0]}))
                        if before[1] != now[1]:
                            frames.append(("session_title", {"sessionId": sid, "title": now[1]}))
                    known[sid] = now
                for kind, data in frames:
                    yield b"event: %s\ndata: %s\n\n" % (kind.encode(), sse_data(encode({"type": kind, **data})))
                if frames:
                    quiet = trio.current_time()
                elif trio.current_time() - quiet >= ping_s:
                    yield PING
                    quiet = trio.current_time()
                await watch.wait(min(services.config.runtime.wake_poll_s, ping_s))
    finally:
        metrics.SSE_CLIENTS.dec()


@api_route(bp, "GET", "/api/agent/owner-events", sse=True, media_type="text/event-stream")
async def owner_events(call: Call) -> Response:
    """Your sessions' changes as server-sent events (session_created, session_status, session_title)."""
    sessions_of(call)
    response = Response(end_on_outage(_owner_session_events(call.services, call.user)), 200, dict(SSE_HEADERS))
    response.timeout = None
    return response
