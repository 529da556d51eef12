"""Runs, sessions, courses, the library and materials over HTTP: thin routes over the control plane and the
read models. Every write is a command with a ``command_id``; every read is scoped to the caller's owner id, and
another owner's resource is the same 404 as a missing one.
"""

from __future__ import annotations

import datetime as dt
import functools
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

import msgspec
import trio
from quart import Blueprint, Response

from openmaic import errors, materials
from openmaic.actors.commands import Commands as SessionCommands
from openmaic.api import access_routes, agent_sessions, claims, generation_runs, headless, model_config, web
from openmaic.api import agents as agents_routes
from openmaic.api import materials as materials_routes
from openmaic.api.identity import accept_websocket
from openmaic.api.routing import Call, api_route
from openmaic.api.services import ApiServices, CommandResult
from openmaic.api.wire import CommandId
from openmaic.courses.events import CourseDocument
from openmaic.courses.schema import AgentProfile, OutlineItem
from openmaic.projections import default_projections, record_projection_lag
from openmaic.runs.events import AgentsChoice, LearnerProfile, RunInput
from openmaic.runs.service import RunService, RunSnapshot
from openmaic.workbench.service import SessionSnapshot, WorkbenchSessions
from openmaic.store.queries import Q

bp = Blueprint("resources", __name__)


class Commands:
    """The one command handle the stream routes and WebSocket commands use, for every session kind."""

    def __init__(self, sessions: SessionCommands, runs: RunService) -> None:
        self._sessions = sessions
        self._runs = runs

    async def post_message(self, owner: str, stream_id: str, command_id: str, text: str, delivery: str) -> Any:
        return await self._sessions.post_message(owner, stream_id, command_id, text, delivery)

    async def cancel(self, owner: str, stream_id: str, command_id: str) -> Any:
        return await self._sessions.cancel(owner, stream_id, command_id)

    async def confirm_outline(self, owner: str, stream_id: str, command_id: str, outline_revision: int,
                              outline: Any | None) -> Any:
        items = None if outline is None else msgspec.convert(outline, list[OutlineItem])
        return await self._runs.confirm_outline(owner, stream_id, command_id, outline_revision, items)

    async def retry(self, owner: str, stream_id: str, command_id: str) -> Any:
        return await self._runs.retry(owner, stream_id, command_id)


def api_services(services: Any) -> ApiServices:
    """The API's view of a process's shared services (see :mod:`openmaic.services`)."""
    log = services.log
    runs = RunService(log, services.config)
    session_commands = SessionCommands(log, message_kinds=["workbench"])
    return ApiServices(
        db=services.db, log=log, wakeups=services.wakeups, config=services.config,
        commands=Commands(session_commands, runs), runs=runs, sessions=WorkbenchSessions(log, session_commands),
        courses=None, extractor=services.extractor,
        metric_samplers=[functools.partial(record_projection_lag, services.db, default_projections())],
    )


def resource_blueprints() -> list[Blueprint]:
    return [bp, access_routes.bp, claims.bp, headless.bp, generation_runs.bp, materials_routes.bp, model_config.bp,
            agents_routes.bp, agent_sessions.bp, web.bp]


def _runs(call: Call) -> RunService:
    if call.services.runs is None:
        raise errors.OpenMaicError("runs are not served by this process")
    return call.services.runs  # type: ignore[return-value]


def _sessions(call: Call) -> WorkbenchSessions:
    if call.services.sessions is None:
        raise errors.OpenMaicError("sessions are not served by this process")
    return call.services.sessions  # type: ignore[return-value]


# -- runs -----------------------------------------------------------------------------------------------------


class CreateRun(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    command_id: str = msgspec.field(default_factory=lambda: f"auto-{uuid.uuid4()}")
    """Idempotency key: repeating a create with the same id returns the same run. Omitted: a fresh one."""
    requirement: str
    material_ids: list[str] = []
    language: str = "en"
    agents: Literal["auto"] | list[str] = "auto"
    learner_profile: str = ""
    outline_review: Literal["wait", "auto", "countdown"] = "wait"
    interactive: bool = False


class ConfirmOutline(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    command_id: str
    outline_revision: int
    outline: list[OutlineItem] | None = None


class CommandBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    command_id: str


def _input(body: CreateRun) -> RunInput:
    agents = AgentsChoice() if body.agents == "auto" else AgentsChoice(mode="preset", agent_ids=list(body.agents))
    return RunInput(requirement=body.requirement, material_ids=body.material_ids, language=body.language,
                    agents=agents, learner_profile=LearnerProfile(bio=body.learner_profile),
                    outline_review=body.outline_review, interactive=body.interactive)


@api_route(bp, "POST", "/api/runs", body=CreateRun, response=RunSnapshot, status=202, errors=(409, 400, 429))
async def create_run(call: Call) -> tuple[RunSnapshot, int]:
    """Start a generation run (and its course). Repeating the command_id returns the same run."""
    return await _runs(call).create_run(call.user, call.body.command_id, _input(call.body)), 202


@api_route(bp, "GET", "/api/runs/{id}", response=RunSnapshot, errors=(404,))
async def get_run(call: Call, id: str) -> RunSnapshot:
    """A run's snapshot; follow its events after head_seq to stay current."""
    return await _runs(call).snapshot(call.user, id)


@api_route(bp, "POST", "/api/runs/{id}/confirm-outline", body=ConfirmOutline, response=CommandResult, status=202,
           errors=(404, 409, 400))
async def confirm_outline(call: Call, id: str) -> tuple[Any, int]:
    """Confirm the proposed outline at its revision; sending an edited outline makes it revision + 1."""
    b: ConfirmOutline = call.body
    return await _runs(call).confirm_outline(call.user, id, b.command_id, b.outline_revision, b.outline), 202


@api_route(bp, "POST", "/api/runs/{id}/retry", body=CommandBody, response=CommandResult, status=202,
           errors=(404, 409, 400))
async def retry_run(call: Call, id: str) -> tuple[Any, int]:
    """Re-run the step a paused run failed on (only that step)."""
    return await _runs(call).retry(call.user, id, call.body.command_id), 202


# -- workbench sessions ---------------------------------------------------------------------------------------


class CreateSession(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    command_id: str
    course_id: str | None = None
    message: str | None = None


class PostMessage(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    command_id: str
    text: str
    delivery: Literal["steer", "queued"] = "queued"


@api_route(bp, "POST", "/api/sessions", body=CreateSession, response=SessionSnapshot, status=201,
           errors=(404, 409, 400))
async def create_session(call: Call) -> tuple[SessionSnapshot, int]:
    """Open a workbench session on a new or an existing (completed) course, optionally with a first message."""
    b: CreateSession = call.body
    return await _sessions(call).create_session(call.user, b.command_id, b.course_id, b.message), 201


@api_route(bp, "GET", "/api/sessions/{id}", response=SessionSnapshot, errors=(404,))
async def get_session(call: Call, id: str) -> SessionSnapshot:
    """A workbench session's snapshot."""
    return await _sessions(call).snapshot(call.user, id)


@api_route(bp, "POST", "/api/sessions/{id}/messages", body=PostMessage, response=CommandResult, status=202,
           errors=(404, 409, 400))
async def post_message(call: Call, id: str) -> tuple[Any, int]:
    """Send a follow-up; a running session gets it at its next turn boundary, an idle one wakes up."""
    b: PostMessage = call.body
    return await _sessions(call).post_message(call.user, id, b.command_id, b.text, b.delivery), 202


@api_route(bp, "POST", "/api/sessions/{id}/cancel", body=CommandBody, response=CommandResult, status=202,
           errors=(404, 409, 400))
async def cancel_session(call: Call, id: str) -> tuple[Any, int]:
    """Cancel the turn in flight; the session settles as cancelled (a later message revives it)."""
    return await _sessions(call).cancel(call.user, id, call.body.command_id), 202


# -- courses and the library --------------------------------------------------------------------------------------


class LibraryCard(msgspec.Struct, frozen=True):
    course_id: str
    title: str
    run_id: str | None
    run_state: str | None
    label: str
    scenes_total: int
    scenes_completed: int
    updated_at: dt.datetime


class Library(msgspec.Struct, frozen=True):
    cards: list[LibraryCard]


async def _cards(call_services: ApiServices, owner: str) -> list[LibraryCard]:
    rows = await call_services.db.fetch(Q.library_cards_of_owner, owner)
    return [LibraryCard(*r.values()) for r in rows]


@api_route(bp, "GET", "/api/library", response=Library)
async def library(call: Call) -> Library:
    """The owner's course cards, newest first (from the library projection)."""
    return Library(await _cards(call.services, call.user))


class CourseView(msgspec.Struct, frozen=True):
    id: str
    document: CourseDocument
    seq: int


@api_route(bp, "GET", "/api/courses/{id}", response=CourseView, errors=(404,))
async def get_course(call: Call, id: str) -> CourseView:
    """A course: title, outline, scenes (content and actions), agents."""
    row = await call.services.log.stream(id)
    if row is None or row["owner_id"] != call.user or row["kind"] != "course" or row["deleted_at"] is not None:
        raise errors.NotFound(f"no course {id!r}")
    # Folded from the course stream (through the runs' fold cache): authoritative and never behind, unlike a
    # projection; to the head of the row just read, so the view and its seq agree.
    doc = await _runs(call).course(id, to_seq=row["head_seq"])
    if doc.deleted:
        raise errors.NotFound(f"no course {id!r}")
    return CourseView(id, doc, doc.seq)


class DeleteQuery(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    command_id: str | None = None


@api_route(bp, "DELETE", "/api/courses/{id}", query=DeleteQuery, response=CommandResult, status=202,
           errors=(404, 409))
async def delete_course(call: Call, id: str) -> tuple[Any, int]:
    """Delete a course; a run still building it stops at its next step boundary."""
    command_id = call.query.command_id or f"delete-{id}"
    return await _runs(call).delete_course(call.user, id, command_id), 202


@api_route(bp, "GET", "/api/library/events", sse=True)
async def library_events(call: Call) -> Response:
    """The owner's library as a live SSE feed: a ``cards`` frame, then ``card`` / ``removed`` frames."""
    response = Response(_library_feed_sse(call.services, call.user), 200,
                        {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    response.timeout = None
    return response


async def library_changes(services: ApiServices, owner: str) -> AsyncIterator[dict[str, Any]]:
    """The owner's cards, then every change: woken by any event hint (cards follow events through the
    projector, so it re-reads shortly after) and by a 1 s poll."""
    known: dict[str, LibraryCard] = {}
    first = True
    with services.wakeups.watch() as w:
        while True:
            cards = await _cards(services, owner)
            current = {c.course_id: c for c in cards}
            if first:
                yield {"type": "cards", "cards": cards}
                first = False
            else:
                for cid, card in current.items():
                    if known.get(cid) != card:
                        yield {"type": "card", "card": card}
                for cid in known.keys() - current.keys():
                    yield {"type": "removed", "course_id": cid}
            known = current
            if await w.wait(1.0):
                await trio.sleep(0.1)  # let the projector apply what the hint announced


_encoder = msgspec.json.Encoder()


async def _library_feed_sse(services: ApiServices, owner: str) -> AsyncIterator[bytes]:
    ping_s = services.config.server.sse_ping_s
    last = trio.current_time()
    async for change in library_changes(services, owner):
        yield b"data: " + _encoder.encode(change) + b"\n\n"
        if trio.current_time() - last > ping_s:
            yield b": ping\n\n"
        last = trio.current_time()


@api_route(bp, "WS", "/api/library/ws")
async def library_ws(call: Call) -> None:
    """The owner's library as a live WebSocket feed (same frames as the SSE feed)."""
    ws = call.request
    await accept_websocket(ws)
    async for change in library_changes(call.services, call.user):
        await ws.send(_encoder.encode(change).decode())


# -- materials (reading one: this server's own shape, until sessions bind materials) -------------------------


@api_route(bp, "GET", "/api/materials/{id}", response=materials.Material, errors=(404,))
async def get_material(call: Call, id: str) -> materials.Material:
    """An uploaded material and its extracted text."""
    return await materials.get_material(call.services.db, call.user, id)
