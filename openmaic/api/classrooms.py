"""Classrooms (the courses runs and sessions build) over HTTP: this server's library of them.

* ``GET /api/classrooms`` — the owner's classrooms, newest first, from the library read model: ``{success,
  classrooms: [{id, title, runId, runState, label, scenesTotal, scenesCompleted, updatedAt}]}``;
* ``GET /api/classrooms/events`` (SSE) and ``WS /api/classrooms/ws`` — that list live: one ``{type:
  "classrooms", classrooms}`` frame, then ``{type: "classroom", classroom}`` for each change and
  ``{type: "removed", id}`` for each classroom that went;
* ``GET /api/classrooms/{id}`` — one classroom with its scenes (content and script) and agents, folded from its
  course stream (never behind), and the run still writing it (:mod:`openmaic.courses.views`);
* ``DELETE /api/classrooms/{id}`` — delete it; a run still building it ends at its next step boundary;
* ``GET /api/classrooms/{id}/export.pptx`` and ``GET /api/classrooms/{id}/export.html`` — the classroom as a
  PowerPoint file and as one HTML page that plays offline (:mod:`openmaic.exports`), as downloads.

OpenMAIC keeps stages in its persistence routes, whose shapes are not established here; these are this
server's own. A classroom that is not the caller's is the plain ``Not found``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Annotated, Any
from urllib.parse import quote

import msgspec
from quart import Blueprint, Response

from openmaic import errors, metrics
from openmaic.api.follow import Phase, feed_response
from openmaic.api.headless import runs_of
from openmaic.api.identity import accept_websocket
from openmaic.api.pages import PageQuery, cursor_of, read_cursor
from openmaic.api.routing import Call, api_route
from openmaic.api.services import ApiServices
from openmaic.api.wire import Success, Wire, encode
from openmaic.courses.history import Version, course_versions, restore_course
from openmaic.courses.views import ClassroomView, classroom_view
from openmaic.events.log import RecordedEvent
from openmaic.events.wakeups import owner_hint
from openmaic.exports import export_html, export_pptx
from openmaic.media.assets import read_asset_head, read_asset_range
from openmaic.projections import LibraryCard
from openmaic.runs.views import run_state
from openmaic.store.queries import Q

__all__ = ["ClassroomFraming", "bp"]

bp = Blueprint("classrooms", __name__)


class ClassroomCard(Wire):
    id: str
    title: str
    run_id: str | None
    run_state: str | None
    label: str
    """What the library shows: "generating 3/8", "ready", "paused after a failure", …"""
    scenes_total: int
    scenes_completed: int
    updated_at: dt.datetime


class ClassroomsAnswer(Success):
    classrooms: list[ClassroomCard]
    next_cursor: str | None = None
    """The ``cursor`` of the next page; null on the last (:mod:`openmaic.api.pages`)."""


class ClassroomAnswer(Success):
    classroom: ClassroomView


class Deleted(Success):
    seq: int


class DeleteQuery(Wire):
    command_id: str = ""
    """Makes a repeated delete answer as the first did."""


async def cards(services: ApiServices, owner: str, *, limit: int | None = None, after: Sequence[Any] | None = None,
                ) -> list[ClassroomCard]:
    """The owner's cards, newest first: every one, or ``limit`` after the one whose ``(updatedAt, id)`` is
    ``after``."""
    start = (None, None) if after is None else tuple(after)
    rows = await services.db.fetch_as(LibraryCard, Q.library_cards_of_owner, owner, *start, limit)
    return [ClassroomCard(id=r.course_id, title=r.title, run_id=r.run_id,
                          run_state=run_state(r.run_state) if r.run_state else None, label=r.label,
                          scenes_total=r.scenes_total, scenes_completed=r.scenes_completed,
                          updated_at=r.updated_at) for r in rows]  # fmt: skip


@api_route(bp, "GET", "/api/classrooms", query=PageQuery, response=ClassroomsAnswer)
async def list_classrooms(call: Call) -> ClassroomsAnswer:
    """Your classrooms, newest first (from the library read model), a page of ?limit= at a time."""
    q: PageQuery = call.query
    page = await cards(call.services, call.user, limit=q.limit + 1, after=read_cursor(q.cursor, (dt.datetime, str)))
    more = len(page) > q.limit
    page = page[: q.limit]
    return ClassroomsAnswer(classrooms=page, next_cursor=cursor_of(page[-1].updated_at, page[-1].id) if more else None)


@api_route(bp, "GET", "/api/classrooms/{id}", response=ClassroomAnswer, plain_not_found=True)
async def get_classroom(call: Call, id: str) -> ClassroomAnswer:
    """A classroom (the course at result.classroomId / run.stageId): its scenes with their content and script,
    its agents, and the run still writing it, if any (follow that run's events for the scenes to come)."""
    return ClassroomAnswer(classroom=await _classroom(call, id))


async def _classroom(call: Call, id: str) -> ClassroomView:
    """The caller's classroom as its route answers it (the exports read the same); Not found unless theirs."""
    return classroom_view(id, await runs_of(call).owned_course(call.user, id))


@api_route(bp, "DELETE", "/api/classrooms/{id}", query=DeleteQuery, response=Deleted, plain_not_found=True,
           error_codes={409: "RUN_STATE_CONFLICT"})
async def delete_classroom(call: Call, id: str) -> Deleted:
    """Delete a classroom; a run still building it ends at its next step boundary."""
    command_id = call.query.command_id or f"delete-{uuid.uuid4()}"
    result = await runs_of(call).delete_course(call.user, id, command_id)
    return Deleted(seq=result.seq)


# -- versions ------------------------------------------------------------------------------------------------------


class HistoryQuery(Wire):
    limit: Annotated[int, msgspec.Meta(ge=1, le=500)] = 50
    before: int = 0
    """Versions older than this seq (the previous page's ``nextBefore``); 0: from the newest."""


class HistoryAnswer(Success):
    versions: list[Version]
    """Newest first."""
    next_before: int | None = None
    """The ``before`` of the next (older) page; null on the last."""


class RestoreBody(Wire):
    seq: Annotated[int, msgspec.Meta(ge=1)]
    command_id: str = ""
    """Makes a repeated restore answer as the first did."""


class Restored(Success):
    seq: int
    """The new version's seq (the restore itself)."""


@api_route(bp, "GET", "/api/classrooms/{id}/history", query=HistoryQuery, response=HistoryAnswer,
           plain_not_found=True)
async def classroom_history(call: Call, id: str) -> HistoryAnswer:
    """The course's versions, newest first: each change (a run's step, a Pro tool call, a browser save, a
    restore) with who or what made it, when, and what it changed."""
    q: HistoryQuery = call.query
    doc = await runs_of(call).owned_course(call.user, id)
    versions = await course_versions(call.services.log, id, to_seq=doc.seq)
    versions = [v for v in versions if not q.before or v.seq < q.before]
    versions.reverse()
    page = versions[: q.limit]
    return HistoryAnswer(versions=page, next_before=page[-1].seq if len(versions) > q.limit else None)


@api_route(bp, "POST", "/api/classrooms/{id}/restore", body=RestoreBody, response=Restored, plain_not_found=True,
           errors=(400, 409))
async def restore_classroom(call: Call, id: str) -> Restored:
    """Bring back the version at ``seq`` as the course's newest version (nothing is rewritten; the history shows
    the restore). Refused (409) while a run writes the course."""
    b: RestoreBody = call.body
    await runs_of(call).owned_course(call.user, id)
    seq = await restore_course(call.services.log, id, b.seq, b.command_id or f"restore-{uuid.uuid4()}")
    return Restored(seq=seq)


# -- exports ----------------------------------------------------------------------------------------------------------

PPTX_TYPE = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
EXPORT_ASSET_MAX = 64 * 1024 * 1024
"""A larger asset (a long video) is left out of an export rather than held whole in memory."""


async def _export_source(call: Call, id: str) -> tuple[dict[str, Any], Any]:
    """The classroom as its route answers it (a JSON object), and a reader of the owner's assets for it."""
    classroom = msgspec.json.decode(encode(await _classroom(call, id)))
    db, owner = call.services.db, call.user

    async def read(asset_id: str) -> tuple[bytes, str] | None:
        try:
            head = await read_asset_head(db, owner, asset_id)
            if head.size > EXPORT_ASSET_MAX:
                return None
            return await read_asset_range(db, owner, asset_id, 0, head.size), head.media_type
        except errors.NotFound:
            return None  # gone since the document named it: the export shows it as missing

    return classroom, read


def _download(body: bytes, content_type: str, classroom: dict[str, Any], ext: str) -> Response:
    name = str((classroom.get("stage") or {}).get("name") or classroom.get("title") or "classroom")
    ascii_name = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")[:80] or "classroom"
    response = Response(body, 200, content_type=content_type)
    response.headers["Content-Disposition"] = (f'attachment; filename="{ascii_name}.{ext}"; '
                                               f"filename*=UTF-8''{quote(name[:80])}.{ext}")
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cache-Control"] = "private, no-store"
    return response


@api_route(bp, "GET", "/api/classrooms/{id}/export.pptx", media_type=PPTX_TYPE, plain_not_found=True)
async def export_classroom_pptx(call: Call, id: str) -> Response:
    """The classroom as a PowerPoint file: every slide's elements at their positions, the narration as notes,
    quizzes as slides listing their questions."""
    classroom, read = await _export_source(call, id)
    return _download(await export_pptx(classroom, read), PPTX_TYPE, classroom, "pptx")


@api_route(bp, "GET", "/api/classrooms/{id}/export.html", media_type="text/html", plain_not_found=True)
async def export_classroom_html(call: Call, id: str) -> Response:
    """The classroom as one self-contained HTML file that plays offline (the player, the document, its pictures
    and narration inlined)."""
    classroom, read = await _export_source(call, id)
    response = _download(await export_html(classroom, read), "text/html; charset=utf-8", classroom, "html")
    # Sent as a download; should a browser show it anyway, it runs as an opaque origin reading nothing of ours.
    response.headers["Content-Security-Policy"] = "sandbox allow-scripts"
    return response


# -- the live list ----------------------------------------------------------------------------------------------


async def classroom_changes(services: ApiServices, owner: str, idle_s: float) -> AsyncIterator[dict[str, Any] | None]:
    """The owner's classrooms, then every change; ``None`` after ``idle_s`` without one (a heartbeat). Every
    client of an owner shares one reader of the cards (:mod:`openmaic.feeds.owners`), woken when the library
    projection changes that owner's cards."""
    known: dict[str, ClassroomCard] | None = None
    with services.owner_feeds.follow(("classrooms", owner), owner_hint("library", owner),
                                     lambda: cards(services, owner)) as feed:
        while True:
            latest: list[ClassroomCard] | None = await feed.next(idle_s)
            if latest is None:
                yield None
                continue
            current = {c.id: c for c in latest}
            if known is None:
                yield {"type": "classrooms", "classrooms": latest}
            else:
                for cid, c in current.items():
                    if known.get(cid) != c:
                        yield {"type": "classroom", "classroom": c}
                for cid in known.keys() - current.keys():
                    yield {"type": "removed", "id": cid}
            known = current


@api_route(bp, "GET", "/api/classrooms/events", sse=True, media_type="text/event-stream")
async def classroom_events(call: Call) -> Response:
    """Your classrooms as a live SSE feed: a classrooms frame, then classroom / removed frames."""
    return feed_response(classroom_changes(call.services, call.user, call.services.config.server.sse_ping_s))


@api_route(bp, "WS", "/api/classrooms/ws")
async def classrooms_ws(call: Call) -> None:
    """Your classrooms as a live WebSocket feed (the same frames as the SSE feed)."""
    ws = call.request
    await accept_websocket(ws)
    metrics.WEBSOCKET_CLIENTS.inc()
    try:
        changes = classroom_changes(call.services, call.user, call.services.config.server.sse_ping_s)
        async with contextlib.aclosing(changes):
            async for change in changes:
                if change is not None:
                    await ws.send(encode(change).decode())
    finally:
        metrics.WEBSOCKET_CLIENTS.dec()


# -- a classroom's changes on its stream's WebSocket ----------------------------------------------------------------


class ClassroomFrame(Wire):
    classroom_id: str
    seq: int
    ts: int
    type: str
    data: dict[str, Any]
    phase: Phase


class ClassroomFraming:
    """A classroom's changes: every event of its course is a ``classroom_changed`` (read the classroom again)."""

    def __init__(self, course_id: str) -> None:
        self.course_id = course_id

    def client_frame(self, e: RecordedEvent, event: Any, phase: Phase) -> ClassroomFrame | None:
        return ClassroomFrame(classroom_id=self.course_id, seq=e.seq, ts=int(e.recorded_at.timestamp() * 1000),
                              type="classroom_changed", data={}, phase=phase)
