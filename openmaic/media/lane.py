"""A run's media lane: its pictures and videos, generated beside the scenes, one element at a time.

The lane is a session stream of its own (kind ``media``, id :func:`lane_id`), opened by the run's ``agents``
step, the first step after the course exists, in the same transaction. A worker claims it like any stream, so
the lane runs in parallel with the run's scene steps, under its own lease, and a takeover resumes it after its
last checkpoint:

* every element is a step ``media:<elementId>``, in outline order, committed as ``media.element_settled`` with
  the client-visible ``run.media`` on the run's stream and ``course.media_set`` on the course's, in one append;
* a video records ``media.video_submitted {task_id}`` the moment its task is accepted. An attempt that finds a
  task waits on it (poll, download) and never submits again: a task is paid for once;
* a slot that is off settles the element ``disabled`` (placeholder kept, not a warning); a provider failure
  settles it ``failed`` with a fixed message ("Image generation failed", ``CONTENT_SENSITIVE`` …): never the
  course's failure. A full asset store fails the element and every element the pass has not reached with
  ``ASSET_QUOTA_EXCEEDED``;
* once every element is settled the lane tells the run (``run.media_pass_done``, idempotent by command id, the
  run re-queued if it was parked on it) and then holds no worker. ``retry {media: {elementId}}`` settles that
  element anew in a new pass (see :mod:`openmaic.media.commands`); a settled element is never generated again.

Bytes go to the asset store before the element's checkpoint commits. The database interrupting either (a lost
connection, a lock timeout) never settles the element: the lane resumes from its last checkpoint, and an attempt
in the same process goes on from the bytes (or the video task id) the interrupted one kept
(:mod:`openmaic.media.kept`). A worker dying in between makes the next attempt generate the element again
(provider calls are at least once); the same bytes are the same asset.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from typing import Any

import msgspec
import trio

from openmaic import errors
from openmaic.actors.commands import until_decided
from openmaic.actors.kind import Core, Finish, Outcome, Step, StepContext, Wait, settle
from openmaic.concurrency import collapse_groups
from openmaic.courses.events import CourseMediaSet, SceneMedia
from openmaic.events.core import SessionCreated
from openmaic.events.log import EventLog, NewStream, StreamAppend, StreamRow
from openmaic.events.types import Event
from openmaic.media.assets import DEFAULT_QUOTA_BYTES, AssetQuotaExceeded, store_generated
from openmaic.media.kept import KeptResults
from openmaic.media.run_stop import until_run_stops
from openmaic.media.events import (
    LaneItem, MediaElementSettled, MediaElementStarted, MediaLaneClosed, MediaLaneOpened, MediaPassReported,
    MediaRetryRequested, MediaVideoSubmitted,
)  # fmt: skip
from openmaic.media.slots import MediaRouter
from openmaic.models.errors import ModelNotReady, ProviderError
from openmaic.models.media import VideoTaskFailed, wait_video
from openmaic.runs.events import RunMediaPassDone, RunMediaState
from openmaic.runs.fold import RunState, evolve as evolve_run, scene_id

__all__ = ["FINAL_CODES", "LaneState", "MediaKind", "evolve", "lane_id", "lane_items", "open_lane", "tell_run"]

log = logging.getLogger(__name__)

MEDIA_DEADLINE_S = 300.0
"""One element's budget (a resumed video wait gets a fresh one)."""
QUOTA = "ASSET_QUOTA_EXCEEDED"
FINAL_CODES = frozenset({"CONTENT_SENSITIVE"})
"""Failures no retry changes."""
_SENSITIVE = frozenset({"moderation_blocked", "content_policy_violation", "content_filter"})
PASS_WAIT = "media pass done"
RESUME_NOW = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


def lane_id(run_id: str) -> str:
    """The media lane stream of run ``run_id``."""
    return "media_" + hashlib.sha256(run_id.encode()).hexdigest()[:24]


def lane_items(state: RunState) -> list[LaneItem]:
    """The confirmed outline's media in outline order; an element id asked for twice is generated once."""
    seen: set[str] = set()
    items: list[LaneItem] = []
    for index, outline in enumerate(state.confirmed):
        for request in outline.mediaGenerations or []:
            if request.elementId in seen:
                continue
            seen.add(request.elementId)
            ratio = request.aspectRatio if isinstance(request.aspectRatio, str) else "16:9"
            items.append(LaneItem(element_id=request.elementId, kind=request.type, prompt=request.prompt,
                                  aspect_ratio=ratio, scene_index=index,  # type: ignore[arg-type]
                                  scene_id=scene_id(state.course_id, state.confirmed_revision, index)))
    return items


def open_lane(state: RunState) -> StreamAppend | None:
    """The append that creates the run's lane stream (queued for a worker), or None without media."""
    items = lane_items(state)
    if not items:
        return None
    return StreamAppend(
        stream_id=lane_id(state.run_id),
        events=[SessionCreated(kind="media", owner_id=state.owner_id),
                MediaLaneOpened(run_id=state.run_id, course_id=state.course_id, items=items)],
        create=NewStream("media", state.owner_id), status="queued",
    )


class LaneState(msgspec.Struct, frozen=True, kw_only=True):
    seq: int = 0
    owner_id: str = ""
    run_id: str = ""
    course_id: str = ""
    items: tuple[LaneItem, ...] = ()
    settled: dict[str, MediaElementSettled] = {}
    tasks: dict[str, str] = {}
    generations: dict[str, int] = {}
    """Retries asked for per element: a retried element is generated anew (see :mod:`openmaic.media.kept`)."""
    media_pass: int = 1
    reported: int = 0
    quota_full_pass: int = 0
    closed: bool = False

    def item(self, element_id: str) -> LaneItem | None:
        return next((i for i in self.items if i.element_id == element_id), None)

    def next_item(self) -> LaneItem | None:
        return next((i for i in self.items if i.element_id not in self.settled), None)


def evolve(state: LaneState, event: Event, seq: int) -> LaneState:
    r = msgspec.structs.replace
    s = r(state, seq=seq)
    match event:
        case SessionCreated(owner_id=owner):
            return r(s, owner_id=owner)
        case MediaLaneOpened(run_id=run_id, course_id=course_id, items=items):
            return r(s, run_id=run_id, course_id=course_id, items=tuple(items))
        case MediaVideoSubmitted(element_id=eid, task_id=task):
            return r(s, tasks={**s.tasks, eid: task})
        case MediaElementSettled(element_id=eid, keep_task=keep, error_code=code):
            tasks = s.tasks if keep or eid not in s.tasks else {k: v for k, v in s.tasks.items() if k != eid}
            full = s.media_pass if code == QUOTA else s.quota_full_pass
            return r(s, settled={**s.settled, eid: event}, tasks=tasks, quota_full_pass=full)
        case MediaRetryRequested(element_id=eid):
            fresh = s.media_pass + 1 if s.reported >= s.media_pass else s.media_pass
            return r(s, settled={k: v for k, v in s.settled.items() if k != eid}, media_pass=fresh,
                     generations={**s.generations, eid: s.generations.get(eid, 0) + 1})
        case MediaPassReported(media_pass=n):
            return r(s, reported=max(s.reported, n))
        case MediaLaneClosed():
            return r(s, closed=True)
        case _:
            return s


def _failure(exc: Exception, kind: str) -> tuple[str, str | None]:
    """The fixed message and code an element's failure is remembered by (a provider's text is only logged)."""
    label = "Image" if kind == "image" else "Video"
    if isinstance(exc, VideoTaskFailed) and exc.error_code in _SENSITIVE:
        return f"The {kind} provider rejected this prompt under its content safety policy", "CONTENT_SENSITIVE"
    if isinstance(exc, ModelNotReady):  # the slot is assigned but cannot be used: the message says how to fix it
        return exc.message, exc.error_code
    if isinstance(exc, errors.ConfigError):
        return f"The {kind} slot cannot be used: {exc.message}", "MISSING_MODEL"
    return f"{label} generation failed", None


class MediaKind:
    """The ``media`` kind (a run's media lane); see the module docstring."""

    name = "media"

    def __init__(self, config: Any, *, deadline_s: float = MEDIA_DEADLINE_S) -> None:
        self.config = config
        self.deadline_s = deadline_s
        self.quota = int(getattr(getattr(config, "limits", None), "asset_bytes_per_owner", DEFAULT_QUOTA_BYTES))
        self.kept = KeptResults()
        """Provider results whose checkpoint has not committed yet (see :mod:`openmaic.media.kept`)."""

    def initial(self) -> LaneState:
        return LaneState()

    def evolve(self, state: LaneState, event: Event, seq: int) -> LaneState:
        return evolve(state, event, seq)

    def decide(self, state: LaneState, core: Core) -> Step | Wait | Finish:
        if state.closed:
            return settle("stopped")
        item = state.next_item()
        if item is not None:
            return Step(name=f"media:{item.element_id}", handler=self._bind(item, state), deadline=self.deadline_s + 5)
        if state.reported < state.media_pass:
            return Step(name="media:report", handler=self._report(state), deadline=30.0)
        return Wait(reason=PASS_WAIT)

    def _bind(self, item: LaneItem, state: LaneState) -> Any:
        async def handler(ctx: StepContext) -> Outcome:
            with trio.move_on_after(self.deadline_s):
                stopped = False
                with collapse_groups():
                    async with trio.open_nursery() as nursery:
                        async def watch() -> None:
                            nonlocal stopped
                            await until_run_stops(ctx.services, state.run_id)
                            stopped = True
                            nursery.cancel_scope.cancel()  # the provider call in flight included

                        nursery.start_soon(watch)
                        out = await self._generate(ctx, state, item)
                        nursery.cancel_scope.cancel()
                return Outcome(events=[MediaLaneClosed()]) if stopped else out
            return self._settled(state, item, "failed", message=f"{item.kind.capitalize()} generation timed out",
                                 keep_task=item.kind == "video")

        return handler

    def step_failed(self, state: LaneState, core: Core, step: str, error: str) -> Outcome:
        # An element's failure is its own, never the lane's: it settles failed and the lane moves on.
        item = state.item(step.removeprefix("media:"))
        if item is None:  # the report step: try again at the next decision
            return Outcome(events=[], progress=False)
        log.warning("media element %s of run %s failed: %s", item.element_id, state.run_id, error)
        return self._settled(state, item, "failed", message=f"{item.kind.capitalize()} generation failed",
                             keep_task=item.kind == "video")

    def over_cap(self, state: LaneState, core: Core) -> Wait:
        item = state.next_item()
        if item is None:
            return Wait(reason=PASS_WAIT)
        out = self._settled(state, item, "failed", message="interrupted too many times",
                            keep_task=item.kind == "video")
        # Queued again at once: the elements after this one (and the run, waiting for the pass) go on.
        return Wait(events=out.events, also=out.also, wake_at=RESUME_NOW, reason="interrupted too many times")

    def cancelled(self, state: LaneState, core: Core) -> Finish:
        return settle("cancelled")

    # -- one element ----------------------------------------------------------------------------------------------

    def _settled(self, state: LaneState, item: LaneItem, status: str, *, asset_id: str | None = None,
                 poster_asset_id: str | None = None, message: str | None = None, error_code: str | None = None,
                 keep_task: bool = False) -> Outcome:
        retryable = status != "done" and error_code not in FINAL_CODES
        settled = MediaElementSettled(element_id=item.element_id, status=status,  # type: ignore[arg-type]
                                      asset_id=asset_id, poster_asset_id=poster_asset_id, message=message,
                                      error_code=error_code, retryable=retryable, keep_task=keep_task)
        seen = RunMediaState(element_id=item.element_id, media_type=item.kind, status=status,  # type: ignore[arg-type]
                             asset_id=asset_id, poster_asset_id=poster_asset_id, message=message,
                             error_code=error_code, retryable=retryable if status == "failed" else None)
        media = SceneMedia(element_id=item.element_id, kind=item.kind, prompt=item.prompt,
                           status=status, asset_id=asset_id, poster_asset_id=poster_asset_id)  # type: ignore[arg-type]
        return Outcome(events=[settled], also=[
            StreamAppend(stream_id=state.run_id, events=[seen]),
            StreamAppend(stream_id=state.course_id, events=[CourseMediaSet(scene_id=item.scene_id, media=media)]),
        ])  # fmt: skip

    async def _generate(self, ctx: StepContext, state: LaneState, item: LaneItem) -> Outcome:
        services = ctx.services
        db = services.log.db
        if await run_stopped(services.log, state.run_id):
            return Outcome(events=[MediaLaneClosed()])
        if state.quota_full_pass == state.media_pass:
            return self._settled(state, item, "failed", error_code=QUOTA,
                                 message=f"Asset storage is full; the {item.kind} was not generated")
        router: MediaRouter | None = getattr(services, "media", None)
        try:
            route = await router.for_owner(state.owner_id, item.kind) if router is not None else None
        except (ModelNotReady, errors.ConfigError) as exc:
            message, code = _failure(exc, item.kind)
            return self._settled(state, item, "failed", message=message, error_code=code)
        if route is None:
            return self._settled(state, item, "disabled")
        provider, model = route
        key = (ctx.stream_id, item.element_id, state.generations.get(item.element_id, 0))
        self.kept.forget(ctx.stream_id, set(state.settled), state.generations)
        kept = self.kept.get(key)
        task = state.tasks.get(item.element_id)
        generating = RunMediaState(element_id=item.element_id, media_type=item.kind, status="generating")
        await ctx.emit([MediaElementStarted(element_id=item.element_id)],
                       also=[StreamAppend(stream_id=state.run_id, events=[generating])])
        # What the provider gives is kept (self.kept) before anything is committed: a commit the database
        # interrupts stops the step, and the next attempt goes on from what was kept instead of paying again.
        media, poster = kept.media, kept.poster
        try:
            if media is not None:
                log.info("run %s: %s %s was generated by an interrupted attempt; storing it", state.run_id,
                         item.kind, item.element_id)
            elif item.kind == "image":
                media = await provider.generate_image(model, item.prompt, aspect_ratio=item.aspect_ratio)
                self.kept.keep(key, media=media)
            else:
                if task is None and kept.task_id is not None:
                    # Submitted by an attempt whose record of it did not commit: record it now, never resubmit.
                    task = kept.task_id
                    await ctx.emit([MediaVideoSubmitted(element_id=item.element_id, task_id=task)])
                elif task is None:
                    task = await provider.submit_video(model, item.prompt, aspect_ratio=item.aspect_ratio)
                    self.kept.keep(key, task_id=task)
                    # Committed before the wait: a takeover or a retry waits on this task.
                    await ctx.emit([MediaVideoSubmitted(element_id=item.element_id, task_id=task)])
                else:
                    log.info("run %s: resuming the wait on video task %s", state.run_id, task)
                await wait_video(provider, model, task)
                media = await provider.download_video(model, task)
                try:
                    poster = await provider.download_poster(model, task)
                except ProviderError as exc:  # a poster is decorative: its failure costs the poster only
                    log.warning("run %s: the poster of %s was not fetched: %s", state.run_id, item.element_id,
                                exc.message)
                self.kept.keep(key, media=media, poster=poster)
        except ProviderError as exc:
            log.warning("run %s: %s %s failed: %s", state.run_id, item.kind, item.element_id, exc.message)
            message, code = _failure(exc, item.kind)
            return self._settled(state, item, "failed", message=message, error_code=code,
                                 keep_task=task is not None and not isinstance(exc, VideoTaskFailed))
        try:
            poster_id = None
            if poster is not None:
                poster_id = (await store_generated(db, state.owner_id, state.course_id, "poster", poster,
                                                   quota_bytes=self.quota)).id
            stored = await store_generated(db, state.owner_id, state.course_id, item.kind, media,
                                           quota_bytes=self.quota)
        except AssetQuotaExceeded:
            return self._settled(state, item, "failed", error_code=QUOTA,
                                 message=f"Asset storage is full; the {item.kind} was not generated")
        return self._settled(state, item, "done", asset_id=stored.id, poster_asset_id=poster_id)

    # -- telling the run --------------------------------------------------------------------------------------------

    def _report(self, state: LaneState) -> Any:
        async def handler(ctx: StepContext) -> Outcome:
            if not await tell_run(ctx.services.log, state.run_id, lane_id(state.run_id), state.media_pass):
                return Outcome(events=[MediaLaneClosed()])  # an ended run is told nothing more
            return Outcome(events=[MediaPassReported(media_pass=state.media_pass)])

        return handler


async def run_stopped(log_: EventLog, run_id: str) -> bool:
    """Whether the run has ended as stopped (its course deleted, or cancelled): its lane then closes."""
    return await _stopped(log_, run_id, await log_.stream_row(run_id))


async def _stopped(log_: EventLog, run_id: str, row: StreamRow | None) -> bool:
    if row is None:
        return True
    if row.status != "terminal":
        return False
    run, _ = await log_.fold(run_id, RunState(), evolve_run)
    return run.ended not in (None, "completed")


async def tell_run(log_: EventLog, run_id: str, lane: str, media_pass: int) -> bool:
    """Append ``run.media_pass_done`` to the run (once per pass: the command id says which), re-queueing a run
    that is parked waiting for it; False when the run has stopped (it is told nothing more). Fenced by the run's
    head, so a run that decided to wait a moment ago is re-queued, never left parked, and a run that stopped
    meanwhile is seen stopped on the next read rather than written to after its end."""
    command_id = f"{lane}:pass:{media_pass}"

    async def attempt() -> bool:
        row = await log_.stream_row(run_id)
        if await _stopped(log_, run_id, row):
            return False
        assert row is not None
        wake: dict[str, Any] = {}
        if row.status in ("waiting", "queued"):
            wake = {"status": "queued", "wake_at": None, "progress": True}
        await log_.append(StreamAppend(stream_id=run_id, events=[RunMediaPassDone(media_pass=media_pass)],
                                       command_id=command_id, expected_seq=row.head_seq, **wake))
        return True

    return await until_decided(
        attempt, lambda: errors.Conflict("the run is changing too fast to be told its media are done; retrying"))
