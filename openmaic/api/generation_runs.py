"""OpenMAIC's generation runs for the browser and scripts: ``/api/generation-runs``.

Every route is a thin wrapper over :class:`~openmaic.runs.service.RunService` (the WebSocket commands call the
same methods): start, list the runs in progress, read one (with its ``media``), discard, ``confirm-outline``,
``retry``, ``hold-outline``. Reads and commands on a run that is not the caller's — or does not exist — answer
the plain ``Not found``; conflicts are ``RUN_STATE_CONFLICT``.

``GET /api/generation-runs/{id}/events?after=<seq>`` follows the run as OpenMAIC's SSE: every frame is ``id:
<seq>``, ``event: <type>`` and data ``{runId, seq, ts, type, data, phase}``, where the types are OpenMAIC's
(:mod:`openmaic.runs.client_events`) and ``seq`` the logged event's; after the backlog one ``event: caught_up``
frame ``{type, from, seq}`` without an id; then live frames and ``: ping``. ``Last-Event-ID`` wins over
``after``; a malformed cursor, or one beyond the run's last seq, starts from the beginning.

``GET /api/generation-runs/events`` is the owner's feed: one unnamed ``{type: "runs", runs}`` frame with the runs
in progress, then a ``{type: "run", run}`` frame whenever one of them changes (its last frame shows it
completed or ended), and a run started meanwhile appears the same way. When an anonymous owner is claimed into
an account, its feed sends ``{type: "owner_moved"}`` and ends (OpenMAIC's answer to a retired identity).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

import msgspec
import trio
from quart import Blueprint, Response

from openmaic import errors
from openmaic.actors.commands import owned_stream
from openmaic.api.commands import CommandTable
from openmaic.api.follow import SSE_HEADERS, Phase, ViewFraming, feed_response, follow_sse
from openmaic.api.headless import runs_of
from openmaic.api.pages import PageQuery, cursor_of, read_cursor
from openmaic.api.idempotency import idempotency_key
from openmaic.api.routing import Call, api_route
from openmaic.api.services import ApiServices
from openmaic.api.wire import CommandId, Success, Wire, encode
from openmaic.events.log import RecordedEvent, StreamRow, StreamSummary
from openmaic.events.wakeups import RUNNABLE
from openmaic.media.commands import retry_media
from openmaic.owners.claims import claimed_into, is_anonymous
from openmaic.runs.client_events import ClientView
from openmaic.runs.events import AgentsChoice, LearnerProfile, RunInput, Voice
from openmaic.runs.outline_input import outline_items
from openmaic.runs.service import RunService, RunStateConflict
from openmaic.runs.views import RunDetail, RunView, run_detail, run_state, run_view

__all__ = ["RUN_COMMANDS", "RunFraming", "bp", "client_view_from", "runs_of_services"]

bp = Blueprint("generation_runs", __name__)


_RUN_CODES = {409: "RUN_STATE_CONFLICT"}
"""Every 409 of a run's commands is OpenMAIC's RUN_STATE_CONFLICT, on their routes and on the WebSocket alike."""
_RUN = {"plain_not_found": True, "error_codes": _RUN_CODES}
_DIGITS = re.compile(r"[0-9]{1,18}")


# -- bodies and answers ----------------------------------------------------------------------------------------


class AgentsBody(Wire):
    mode: Literal["auto", "preset"] = "auto"
    preset_agent_ids: list[str] = []
    agent_ids: list[str] = []


class LearnerProfileBody(Wire):
    nickname: str = ""
    bio: str = ""


class VoiceBody(Wire):
    provider_id: str
    voice_id: str
    speed: float | None = None


class StartRun(Wire):
    """OpenMAIC's start body (which names no model), and this server's ``language`` and ``models``. No keys or
    endpoints: those come only from the server's configuration."""

    requirement: str | None = None
    material_ids: list[str] = []
    interactive: bool = False
    task_engine: bool = False
    agents: AgentsBody | None = None
    learner_profile: LearnerProfileBody | None = None
    outline_review: Literal["wait", "auto", "countdown"] = "wait"
    voice: VoiceBody | None = None
    release_materials: bool | None = None
    """Accepted and ignored (uploaded materials are kept until deleted)."""
    language: str = ""
    """This server's addition: the course's language tag; inferred from the requirement when empty."""
    enable_web_search: bool = True
    """OpenMAIC's ``enableWebSearch``: false skips the research step's web search (true searches when the owner's
    settings give a web search slot)."""
    models: Annotated[dict[str, Annotated[str, msgspec.Meta(max_length=300)]], msgspec.Meta(max_length=12)] = {}
    """This server's addition: a model per slot instead of the owner's settings, ``{"course.outline":
    "provider:model"}``, each one of the choices ``GET /api/model-config/run-choices`` lists for that slot; a slot
    left out (or empty) follows the settings. Another model, or a slot a run cannot choose, is 400
    VALIDATION_FAILED naming the slot and the allowed choices."""


class ConfirmOutline(Wire):
    command_id: CommandId
    outline_revision: Annotated[int, msgspec.Meta(ge=1)]
    outlines: list[dict[str, Any]] | None = None
    """An edited outline (OpenMAIC's ``SceneOutline``s, kept whole): it becomes revision + 1."""


class MediaRef(Wire):
    element_id: str


class Retry(Wire):
    command_id: CommandId
    media: MediaRef | None = None
    """Retry one failed media element instead of the failed step."""


class Command(Wire):
    command_id: CommandId


class RunAnswer(Success):
    run: RunView


class RunDetailAnswer(Success):
    run: RunDetail


class RunsAnswer(Success):
    runs: list[RunView]
    next_cursor: str | None = None
    """The ``cursor`` of the next page; null on the last (:mod:`openmaic.api.pages`)."""


class CommandAnswer(Success):
    state: str
    seq: int


class ConfirmAnswer(CommandAnswer):
    outline_revision: int


class ActiveQuery(PageQuery):
    active: str = ""


class EventsQuery(Wire):
    after: str = ""
    """Send the events after this seq (``Last-Event-ID`` wins; malformed means from the start)."""


def view_of(row: StreamRow | StreamSummary, state: Any) -> RunView:
    return run_view(row.id, state, created_at=row.created_at, updated_at=row.updated_at)


def start_input(body: StartRun) -> RunInput:
    """The run input of a start body (a missing requirement is refused by the service, like a blank one)."""
    agents = body.agents or AgentsBody()
    profile = body.learner_profile or LearnerProfileBody()
    voice = None if body.voice is None else Voice(provider_id=body.voice.provider_id,
                                                  voice_id=body.voice.voice_id, speed=body.voice.speed)
    return RunInput(
        requirement=body.requirement or "", material_ids=list(body.material_ids), language=body.language,
        agents=AgentsChoice(mode=agents.mode, agent_ids=list(agents.agent_ids),
                            preset_agent_ids=list(agents.preset_agent_ids)),
        learner_profile=LearnerProfile(nickname=profile.nickname, bio=profile.bio),
        outline_review=body.outline_review, interactive=body.interactive, task_engine=body.task_engine,
        voice=voice, enable_web_search=body.enable_web_search, models=dict(body.models),
    )  # fmt: skip


# -- routes ----------------------------------------------------------------------------------------------------


@api_route(bp, "POST", "/api/generation-runs", body=StartRun, response=RunAnswer, status=202, errors=(403, 409, 429),
           idempotent=True)
async def start_run(call: Call) -> tuple[RunAnswer, int]:
    """Start a generation run (and its course); every start is a new run, but one repeated with its Idempotency-Key.

    outlineReview: wait (the default: confirm-outline), auto, or countdown (confirms by itself after 2.5 s unless
    held). The answer is the run as it was created. 400 INVALID_REQUEST / MISSING_REQUIRED_FIELD naming the
    field, VALIDATION_FAILED for a model choice the owner's settings do not allow (naming the slot and the allowed
    choices), MISSING_MODEL / MISSING_API_KEY, 409 IDEMPOTENCY_KEY_REUSED, 429 ACTIVE_RUN_LIMIT.
    """
    keyed = idempotency_key(call)
    row, state = await runs_of(call).start(call.user, start_input(call.body), keyed=keyed)
    return RunAnswer(run=view_of(row, state)), 202


@api_route(bp, "GET", "/api/generation-runs", query=ActiveQuery, response=RunsAnswer)
async def active_runs(call: Call) -> RunsAnswer:
    """The runs in progress (every state but completed and ended), oldest first; active=1 is required."""
    if call.query.active not in ("1", "true"):
        raise errors.InvalidInput("list the runs in progress with ?active=1", path="active")
    q: ActiveQuery = call.query
    runs, nxt = await runs_of(call).in_progress_page(call.user, q.limit, read_cursor(q.cursor, (dt.datetime, str)))
    return RunsAnswer(runs=[view_of(row, s) for row, s in runs], next_cursor=None if nxt is None else cursor_of(*nxt))


@api_route(bp, "GET", "/api/generation-runs/{id}", response=RunDetailAnswer, **_RUN)
async def get_run(call: Call, id: str) -> RunDetailAnswer:
    """A run's snapshot with the state of its media; follow its events after run.seq to stay current."""
    row, state = await runs_of(call).read(call.user, id, catch_up=True)
    return RunDetailAnswer(run=run_detail(view_of(row, state), state))


class Discard(Wire):
    """Discarding names no command id (repeating it is harmless); one sent on a WebSocket is echoed."""

    command_id: str | None = None


RUN_COMMANDS = CommandTable("generation", error_codes=_RUN_CODES)
"""The commands of a run, for its routes and its WebSocket alike."""


@RUN_COMMANDS.command("discard", Discard)
async def discard(services: ApiServices, owner: str, run_id: str, body: Discard) -> CommandAnswer:
    out = await runs_of_services(services).discard(owner, run_id)
    return CommandAnswer(state=out.state, seq=out.seq)


@RUN_COMMANDS.command("confirm_outline", ConfirmOutline)
async def confirm(services: ApiServices, owner: str, run_id: str, b: ConfirmOutline) -> ConfirmAnswer:
    items = None if b.outlines is None else outline_items(b.outlines)
    out = await runs_of_services(services).confirm_outline(owner, run_id, b.command_id, b.outline_revision, items)
    return ConfirmAnswer(state=out.state, seq=out.seq, outline_revision=out.outline_revision)


@RUN_COMMANDS.command("retry", Retry)
async def retry(services: ApiServices, owner: str, run_id: str, b: Retry) -> CommandAnswer:
    runs = runs_of_services(services)
    if b.media is not None:
        await runs.read(owner, run_id)  # the same 404 as any command for a run that is not yours
        try:
            done = await retry_media(services.log, owner, run_id, b.command_id, b.media.element_id)
        except errors.Conflict as exc:
            if isinstance(exc, errors.CommandConflict):
                raise  # a command id used for another command: its own answer
            raise RunStateConflict(exc.message, element_id=b.media.element_id) from None
        # The run as the command left it (a repeat answers as the first time); a retry recorded before the run's
        # event carried the command id answers with the run as it is.
        mark = await services.log.command_event(run_id, b.command_id)
        state = (await runs.read(owner, run_id))[1] if mark is None else await runs.fold(run_id, to_seq=mark.last_seq)
        return CommandAnswer(state=run_state(state.state), seq=done.seq)
    out = await runs.retry(owner, run_id, b.command_id)
    return CommandAnswer(state=out.state, seq=out.seq)


@RUN_COMMANDS.command("hold_outline", Command)
async def hold(services: ApiServices, owner: str, run_id: str, b: Command) -> CommandAnswer:
    out = await runs_of_services(services).hold_outline(owner, run_id, b.command_id)
    return CommandAnswer(state=out.state, seq=out.seq)


def runs_of_services(services: ApiServices) -> RunService:
    if services.runs is None:
        raise errors.OpenMaicError("runs are not served by this process")
    return services.runs  # type: ignore[return-value]


@api_route(bp, "DELETE", "/api/generation-runs/{id}", response=CommandAnswer, errors=(409,), **_RUN)
async def discard_run(call: Call, id: str) -> CommandAnswer:
    """Discard a run that has no course yet (its outline was never confirmed); repeating it is harmless.

    409 RUN_STATE_CONFLICT once its course exists or it completed (delete the course instead).
    """
    return await discard(call.services, call.user, id, Discard())


@api_route(bp, "POST", "/api/generation-runs/{id}/confirm-outline", body=ConfirmOutline, response=ConfirmAnswer,
           errors=(409, 429), **_RUN)
async def confirm_outline(call: Call, id: str) -> ConfirmAnswer:
    """Confirm the proposed outline at outlineRevision; sending edited outlines makes them revision + 1.

    409 RUN_STATE_CONFLICT when the run is not awaiting confirmation or the revision is stale; 429
    ACTIVE_RUN_LIMIT (a confirmed run is in progress again).
    """
    return await confirm(call.services, call.user, id, call.body)


@api_route(bp, "POST", "/api/generation-runs/{id}/retry", body=Retry, response=CommandAnswer, errors=(409, 429),
           **_RUN)
async def retry_run(call: Call, id: str) -> CommandAnswer:
    """Re-run the step a paused run failed on (that step only). 409 RUN_STATE_CONFLICT unless it is paused."""
    return await retry(call.services, call.user, id, call.body)


@api_route(bp, "POST", "/api/generation-runs/{id}/hold-outline", body=Command, response=CommandAnswer,
           errors=(409,), **_RUN)
async def hold_outline(call: Call, id: str) -> CommandAnswer:
    """Stop an outline's countdown: the run then waits for confirm-outline."""
    return await hold(call.services, call.user, id, call.body)


# -- the run's events --------------------------------------------------------------------------------------------


class ClientFrame(Wire):
    run_id: str
    seq: int
    ts: int
    """When the event was recorded: milliseconds since the epoch."""
    type: str
    data: dict[str, Any]
    phase: Phase


class RunFraming(ViewFraming):
    """The run's client events: one view per follower, advanced by every event it passes."""

    def __init__(self, run_id: str, view: ClientView, decode: Any) -> None:
        super().__init__(decode)
        self.run_id = run_id
        self.view = view

    def client_frame(self, e: RecordedEvent, event: Any, phase: Phase) -> ClientFrame | None:
        """The client event of ``e`` (decoded as ``event``), advancing the view; None when it has none."""
        out = self.view.next(event, e.seq)
        if out is None:
            return None
        kind, data = out
        return ClientFrame(run_id=self.run_id, seq=e.seq, ts=int(e.recorded_at.timestamp() * 1000), type=kind,
                           data=data, phase=phase)

    def caught_up(self, start: int, seq: int) -> bytes:
        return b"event: caught_up\ndata: %s\n\n" % encode({"type": "caught_up", "from": start, "seq": seq})


async def client_view_from(runs: RunService, run_id: str, seq: int) -> ClientView:
    """A client view of ``run_id`` that continues after ``seq`` (a seq its client has seen, or the stream's head as
    read from the primary: the fold is a catch-up read)."""
    state = await runs.fold(run_id, to_seq=seq, floor=seq)
    return ClientView(state, max_attempts=runs.config.runtime.step_retries + 1)


def _cursor(call: Call, head: int) -> int:
    value = call.request.headers.get("Last-Event-ID")
    if value is None:
        value = call.query.after
    value = value.strip()
    cursor = int(value) if _DIGITS.fullmatch(value) else 0
    return cursor if cursor <= head else 0  # nobody can have seen a later seq: start again


@api_route(bp, "GET", "/api/generation-runs/{id}/events", query=EventsQuery, sse=True, media_type="text/event-stream",
           **_RUN)
async def run_events(call: Call, id: str) -> Response:
    """The run's events as server-sent events, OpenMAIC's framing (id, named event, {runId, seq, ts, type, data,
    phase}); caught_up after the backlog; Last-Event-ID resumes."""
    runs = runs_of(call)
    # The row only (on the primary): its head is what the backlog must reach; the events are catch-up reads.
    row = await owned_stream(call.services.log, call.user, id, "generation")
    start = _cursor(call, row.head_seq)
    framing = RunFraming(id, await client_view_from(runs, id, start), call.services.log.decode)
    response = Response(follow_sse(call.services, id, start, framing, head=row.head_seq), 200, dict(SSE_HEADERS))
    response.timeout = None  # a live stream has no end; quart would otherwise cut it after 60 s
    return response


# -- the owner's feed ------------------------------------------------------------------------------------------------


async def owner_run_changes(services: ApiServices, owner: str, idle_s: float) -> AsyncIterator[dict[str, Any] | None]:
    """The owner's runs in progress, then each change: woken by hints on those runs and on new runnable streams
    (a start), with a poll as the backstop. ``None`` whenever nothing changed for ``idle_s`` (a heartbeat)."""
    runs: RunService = services.runs  # type: ignore[assignment]
    known: dict[str, int] = {}
    first = True
    quiet_since = trio.current_time()
    while True:
        with services.wakeups.watch(RUNNABLE, *known) as watch:
            while True:
                if is_anonymous(owner) and await claimed_into(services.db, owner) is not None:
                    # Claimed into an account (the claim's hints on these runs woke us): this identity owns
                    # nothing now. OpenMAIC's owner_moved tells the page to reload as the account; the feed ends.
                    yield {"type": "owner_moved"}
                    return
                current = await runs.in_progress(owner)
                changes: list[dict[str, Any]] = []
                if first:
                    changes.append({"type": "runs", "runs": [view_of(r, s) for r, s in current]})
                    first = False
                else:
                    seen = {r.id for r, _ in current}
                    changes += [{"type": "run", "run": view_of(r, s)} for r, s in current
                                if known.get(r.id) != s.seq]  # fmt: skip
                    for gone in sorted(known.keys() - seen):
                        # Its last change: completed, ended, or ending (then it reads as it is until it ends).
                        try:
                            row, s = await runs.read(owner, gone)
                        except errors.StreamNotFound:
                            continue  # no longer this owner's (a claim moved it): nothing more to say of it
                        changes.append({"type": "run", "run": view_of(row, s)})
                for change in changes:
                    yield change
                    quiet_since = trio.current_time()
                ids = {r.id: s.seq for r, s in current}
                moved = ids.keys() != known.keys()
                known = ids
                if moved:
                    break  # watch the new set of runs (read again first: nothing falls in between)
                idle = idle_s - (trio.current_time() - quiet_since)
                if idle <= 0:
                    yield None
                    quiet_since = trio.current_time()
                    idle = idle_s
                await watch.wait(min(services.config.runtime.wake_poll_s, idle))


@api_route(bp, "GET", "/api/generation-runs/events", sse=True, media_type="text/event-stream")
async def owner_events(call: Call) -> Response:
    """Your runs in progress as server-sent events: a runs frame, then a run frame for every change."""
    runs_of(call)
    return feed_response(owner_run_changes(call.services, call.user, call.services.config.server.sse_ping_s))
