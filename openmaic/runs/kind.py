"""The ``generation`` kind: a classic run as a fixed pipeline of steps on the durable runtime.

Pipeline (``next_step`` in :mod:`openmaic.runs.fold`)::

    admission (every claimed attempt) → materials (only with material_ids) → outline → confirmation
    → agents → scene:<i>:content, scene:<i>:actions for each scene → completed

Every step commits its output, the run's state change and the course's changes in ONE append (the step's
``Outcome`` with ``also=[course append]``): that append is the checkpoint, and a takeover resumes after the
last one, re-running at most the step that was in flight. The outline step additionally commits each outline
item as it streams in (``run.outline_item``); a provider retry restarts the stream (``run.outline_restarted``).

Confirmation follows ``outline_review``: ``wait`` gives the stream back (status waiting, no worker) until the
``confirm-outline`` command; ``auto`` confirms in the outline step's own append; ``countdown`` waits until
``countdown_until`` (database clock) and, woken without a user's confirmation, confirms by itself. That
self-confirmation is committed as a ``Wait`` decision because the runtime fences a wait by the folded head
seq: a user's confirmation landing at the same moment makes it refused and re-decided, so the outline is never
confirmed twice.

A failed step (provider error, invalid output, deadline) commits ``run.step_failed {will_retry: true}`` and is
run again after an exponential backoff, up to ``runtime.step_retries`` times; then the run pauses
(``run.state_changed paused``) and waits for ``retry``. A stop request (the course was deleted, or the run
discarded) or a cancel request settles the run ``ended`` at the next step boundary.

Worker services (``ctx.services``): ``log`` (the :class:`~openmaic.events.log.EventLog`, whose ``db`` also
serves materials and custom agents) and ``models`` (a :class:`~openmaic.models.provider.ModelRouter`); see
:class:`RunServices`.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import msgspec
import trio

from openmaic.actors.kind import Core, Decision, Finish, Outcome, Step, StepContext, Wait
from openmaic.concurrency import collapse_groups
from openmaic.config import Config
from openmaic.courses import format as fmt
from openmaic.courses.events import CourseAgentsSet, CourseSceneSet
from openmaic.errors import OpenMaicError
from openmaic.events.log import EventLog, StreamAppend
from openmaic.events.types import Event
from openmaic.materials import images_for_model, material_texts
from openmaic.media.assets import DEFAULT_QUOTA_BYTES
from openmaic.media.lane import open_lane
from openmaic.media.slots import MediaRouter
from openmaic.models.errors import ModelNotReady
from openmaic.models.incremental import StreamedArray
from openmaic.models.provider import ModelRouter, fallback_events
from openmaic.models.types import Image
from openmaic.runs.admission import admit
from openmaic.runs.agents import resolve_agents
from openmaic.runs.decide import (
    AWAITING,
    INTERRUPTED,
    PAUSED,
    QUEUED,
    completed,
    confirmation,
    ended,
    pause,
)
from openmaic.runs.events import (
    RunAdmissionDeferred,
    RunAgentsSelected,
    RunInput,
    RunMaterialsExtracted,
    RunOutlineItem,
    RunOutlineProposed,
    RunOutlineRestarted,
    RunResearchDone,
    RunSceneActions,
    RunSceneContent,
    RunSceneNarrated,
    RunStateChanged,
    RunStepCompleted,
    RunStepFailed,
    RunStepStarted,
)
from openmaic.runs.fold import COUNTDOWN_WAIT, RunState, evolve, next_step
from openmaic.steps.narration import Research, narrate, research
from openmaic.steps.outputs import outline_entry, preset_roster
from openmaic.steps.scenes import CourseBrief, cast_agents, plan_outline, write_scene_actions, write_scene_content
from openmaic.store.queries import Q

__all__ = ["GenerationKind", "RunServices", "StepDeadlineExceeded"]

RESUME_NOW = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
"""A ``wake_at`` in the past: give the stream back and let it be claimed again at once."""

ADMISSION_DEADLINE_S = 30.0
MEDIA_WAIT = "generating media"


class StepDeadlineExceeded(OpenMaicError):
    """A step ran longer than its deadline (``runtime.step_deadlines``)."""

    code = "step_deadline_exceeded"
    status = 504


@dataclass(frozen=True)
class RunServices:
    """What the generation kind needs from its worker (``Worker(..., services=RunServices(...))``)."""

    log: EventLog
    models: ModelRouter
    media: MediaRouter | None = None
    """The media slots (None: every media slot off)."""


class _Pump:
    """Commits streamed outline items in order, batching whatever arrived while the previous commit was out."""

    def __init__(self, ctx: StepContext) -> None:
        self._ctx = ctx
        self._pending: list[Event] = []
        self._wake = trio.Event()
        self._closed = False
        self._sending = False
        self.emitted = False

    def put(self, events: Sequence[Event]) -> None:
        self._pending.extend(events)
        self._wake.set()

    def restart(self, event: Event) -> None:
        # Items not yet sent belong to the abandoned output: drop them; tell readers only if some went out.
        self._pending = [event] if self.emitted or self._sending else []
        self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            while self._pending:
                batch, self._pending = self._pending, []
                self._sending = True
                await self._ctx.emit(batch)
                self._sending = False
                self.emitted = True
            if self._closed:
                return


class GenerationKind:
    """Classic generation runs (kind ``generation``); see the module docstring."""

    name = "generation"

    def __init__(
        self,
        config: Config,
        *,
        retry_backoff_s: float = 1.0,
        countdown_s: float = 2.5,
        admission_poll_s: float = 1.0,
    ) -> None:
        self.config = config
        self.deadlines = config.runtime.step_deadlines
        self.retries = config.runtime.step_retries
        self.active_limit = config.limits.active_runs_per_owner
        self.retry_backoff_s = retry_backoff_s
        self.countdown_s = countdown_s
        self.admission_poll_s = admission_poll_s
        self.asset_quota = int(getattr(config.limits, "asset_bytes_per_owner", DEFAULT_QUOTA_BYTES))

    # -- the fold and the decision (pure) ---------------------------------------------------------------------

    def initial(self) -> RunState:
        return RunState()

    def evolve(self, state: RunState, event: Event, seq: int) -> RunState:
        return evolve(state, event, seq)

    def decide(self, state: RunState, core: Core) -> Decision:
        if state.stop_requested:
            return ended(state)
        if state.state == "paused":
            return Wait(reason=PAUSED)
        step = next_step(state)
        if step == "confirm":
            return self._confirm(state)
        if state.admitted_attempt != core.attempt:
            if state.deferred_attempt == core.attempt and state.deferred_until is not None:
                return Wait(wake_at=state.deferred_until, reason=QUEUED)
            return Step(name="admission", handler=self._bind(self._admission, state), deadline=ADMISSION_DEADLINE_S)
        if step is None:
            return completed(state)
        if step == "media":
            # Every scene is in; the media lane (its own stream) wakes the run when its first pass is done.
            return Wait(reason=MEDIA_WAIT)
        return self._step(step, state)

    def _confirm(self, state: RunState) -> Wait:
        review = state.input.outline_review if state.input is not None else "wait"
        if review == "wait" or (review == "countdown" and state.outline_held):
            return Wait(reason=AWAITING)
        if review == "countdown" and not state.countdown_waited and state.countdown_until is not None:
            return Wait(wake_at=state.countdown_until, reason=COUNTDOWN_WAIT)
        by = "countdown" if review == "countdown" else "auto"
        events, course = confirmation(state, state.proposed_revision, state.proposed, by)
        return Wait(events=events, also=[course], wake_at=RESUME_NOW, reason=f"outline confirmed ({by})")

    def _step(self, name: str, state: RunState) -> Step:
        d = self.deadlines
        if name == "materials":
            fn, deadline = self._materials, d.materials
        elif name == "research":
            fn, deadline = self._research, float(getattr(d, "research", 120.0))
        elif name.endswith(":narration"):
            fn, deadline = self._narration, float(getattr(d, "narration", 120.0))
        elif name == "outline":
            fn, deadline = self._outline, d.outline
        elif name == "agents":
            fn, deadline = self._agents, d.agents
        elif name.endswith(":content"):
            fn, deadline = self._content, d.content
        else:
            fn, deadline = self._actions, d.actions
        failures = state.failures.get(name, 0)
        backoff = self.retry_backoff_s * 2 ** (failures - 1) if failures else 0.0
        bound = self._bind(fn, state)

        async def handler(ctx: StepContext) -> Outcome:
            if backoff:
                await trio.sleep(backoff)
            # The step's own deadline, measured after the backoff, so its message names the configured time.
            with trio.move_on_after(deadline) as scope:
                await ctx.emit(self._started(state, name))
                return await bound(ctx)
            assert scope.cancelled_caught
            raise StepDeadlineExceeded(f"step {name} exceeded its deadline of {deadline:g} s", step=name)

        # The runtime's deadline is only a backstop: the handler's own fires first.
        return Step(name=name, handler=handler, deadline=backoff + deadline + 1.0)

    @staticmethod
    def _bind(
        fn: Callable[[StepContext, RunState], Awaitable[Outcome]], state: RunState
    ) -> Callable[[StepContext], Awaitable[Outcome]]:
        async def handler(ctx: StepContext) -> Outcome:
            return await fn(ctx, state)

        return handler

    @staticmethod
    def _started(state: RunState, step: str) -> list[Event]:
        target = "preparing" if step in ("materials", "research") else "outlining" if step == "outline" else "generating"
        events: list[Event] = []
        if state.state != target:
            events.append(RunStateChanged(state=target, previous=state.state, step=step))  # type: ignore[arg-type]
        events.append(RunStepStarted(step=step))
        return events

    def step_failed(self, state: RunState, core: Core, step: str, error: str) -> Outcome | Wait | Finish:
        if self.retries and state.failures.get(step, 0) < self.retries:
            # Not progress: a crash loop of failing attempts must still reach the unattended cap.
            return Outcome(events=[RunStepFailed(step=step, error=error, will_retry=True)], progress=False)
        # Committed as an outcome, and the next decision parks the paused run: a Wait here would be fenced by
        # the head seq from before the step, which the step's own emitted events (run.step_started) moved on,
        # so the runtime would refuse it, lose the failure and run the step again.
        return Outcome(events=pause(state, step, error, RunStepFailed(step=step, error=error, will_retry=False)))

    def over_cap(self, state: RunState, core: Core) -> Wait | Finish:
        if state.stop_requested:
            return ended(state)
        return Wait(events=pause(state, next_step(state) or state.step, INTERRUPTED), reason=PAUSED)

    def cancelled(self, state: RunState, core: Core) -> Finish:
        return ended(state, "cancelled")

    # -- step handlers ------------------------------------------------------------------------------------------

    @staticmethod
    def _services(ctx: StepContext) -> RunServices:
        return ctx.services  # type: ignore[no-any-return]

    @staticmethod
    def _input(state: RunState) -> RunInput:
        assert state.input is not None, "a run stream starts with run.created"
        return state.input

    async def _admission(self, ctx: StepContext, state: RunState) -> Outcome:
        log = self._services(ctx).log
        result = await admit(log, state.owner_id, ctx.stream_id, ctx.attempt, self.active_limit)
        if result.admitted:
            return Outcome()  # run.admitted was committed under the owner's lock, with the count
        until = result.now + dt.timedelta(seconds=self.admission_poll_s)
        deferred = RunAdmissionDeferred(attempt=ctx.attempt, active=result.active, limit=self.active_limit,
                                        until=until)
        return Outcome(events=[deferred])

    async def _materials(self, ctx: StepContext, state: RunState) -> Outcome:
        db = self._services(ctx).log.db
        text, images, kinds = await material_texts(db, state.owner_id, self._input(state).material_ids)
        return Outcome(events=[RunMaterialsExtracted(text=text, images=images, kinds=kinds),
                               RunStepCompleted(step="materials")])

    async def _outline(self, ctx: StepContext, state: RunState) -> Outcome:
        services = self._services(ctx)
        inp = self._input(state)
        # The images of the material are shown to the model that plans the course (read at each attempt: they
        # are not copied into the log, only their asset ids are).
        images = [Image(media_type=t, data=d)
                  for t, d in await images_for_model(services.log.db, state.owner_id, state.material_images)]
        revision = state.proposed_revision + 1
        salt = f"{ctx.stream_id}\x1f{revision}"
        # The outline asks for pictures and videos only when their slots serve this owner, as OpenMAIC's generation
        # switches its media instructions on and off: a course is never promised media nobody can make.
        media = {slot: await _media_on(services.media, state.owner_id, slot) for slot in ("image", "video")}
        streamed = StreamedArray("outlines", dict)
        refs: dict[str, str] = {}
        pump = _Pump(ctx)

        def on_delta(text: str) -> None:
            raws = streamed.feed(text)
            first = streamed.count - len(raws)
            items = []
            for k, raw in enumerate(raws):
                item = outline_entry(raw, first + k + 1, salt, refs, image=media["image"], video=media["video"])
                if item is not None:
                    items.append(RunOutlineItem(index=first + k, item=item, revision=revision))
            pump.put(items)

        def on_retry() -> None:
            streamed.reset()
            pump.restart(RunOutlineRestarted(revision=revision))

        # Collapsed: the provider's error (or the pump's) reaches the run as itself, not as a group of one.
        with collapse_groups():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pump.run)
                try:
                    provider, outline = await plan_outline(
                        services.models, state.owner_id, inp, state.materials_text, images, state.research_sources,
                        salt=salt, image_generation=media["image"], video_generation=media["video"],
                        on_delta=on_delta, on_retry=on_retry,
                    )
                finally:
                    pump.close()

        until = None
        if inp.outline_review == "countdown":
            # The database's clock: the countdown's wake-up is judged by the claim query against now().
            now = await services.log.db.fetchval(Q.database_now)
            until = now + dt.timedelta(seconds=self.countdown_s)
        proposed = RunOutlineProposed(revision=revision, title=outline.course_title or state.title,
                                      items=outline.outlines, countdown_until=until,
                                      language_directive=outline.language_directive)
        events: list[Event] = [*fallback_events([provider]), proposed, RunStepCompleted(step="outline")]
        if inp.outline_review == "auto":
            after = evolve(msgspec.structs.replace(state, state="outlining"), proposed, state.seq)
            confirmed, course = confirmation(after, revision, outline.outlines, "auto", previous="outlining")
            return Outcome(events=[*events, *confirmed], also=[course])
        events.append(RunStateChanged(state="awaiting_outline_confirmation", previous="outlining"))
        return Outcome(events=events)

    @staticmethod
    def _course(state: RunState) -> CourseBrief:
        return CourseBrief(title=state.title, language_directive=state.language_directive,
                           outlines=state.confirmed)

    async def _agents(self, ctx: StepContext, state: RunState) -> Outcome:
        services = self._services(ctx)
        inp = self._input(state)
        called = []
        if inp.agents.mode == "auto":
            provider, agents = await cast_agents(services.models, state.owner_id, inp, self._course(state))
            called.append(provider)
        else:
            agents = await resolve_agents(services.log.db, state.owner_id, inp.agents.agent_ids)
            if not any(a.role == "teacher" for a in agents):
                # OpenMAIC's classroom puts a teacher before a roster that has none: the course says so itself.
                agents = [preset_roster(["default-1"])[0], *agents]
        course = StreamAppend(stream_id=state.course_id, events=[CourseAgentsSet(agents=agents)])
        # The course exists with its outline: its media lane starts now, beside the scenes (its own stream).
        lane = open_lane(state)
        return Outcome(events=[*fallback_events(called), RunAgentsSelected(agents=agents),
                               RunStepCompleted(step="agents")], also=[course, *([lane] if lane is not None else [])])

    async def _content(self, ctx: StepContext, state: RunState) -> Outcome:
        step = next_step(state)
        assert step is not None
        index = int(step.split(":")[1])
        teacher = next((a for a in state.agents if a.role == "teacher"), None)
        provider, content = await write_scene_content(self._services(ctx).models, state.owner_id, self._input(state),
                                                      self._course(state), index, state.materials_text, teacher)
        scene = state.scene(index, content)
        course = StreamAppend(stream_id=state.course_id, events=[CourseSceneSet(scene=scene, ready=False, at_ms=_now_ms())])
        return Outcome(events=[*fallback_events([provider]), RunSceneContent(index=index, content=content),
                               RunStepCompleted(step=step)], also=[course])

    async def _actions(self, ctx: StepContext, state: RunState) -> Outcome:
        step = next_step(state)
        assert step is not None
        index = int(step.split(":")[1])
        content = state.scenes[index].content
        assert content is not None
        previous = state.scenes[index - 1].actions if index > 0 else None
        said = [a.text for a in previous or () if isinstance(a, fmt.SpeechAction)]
        provider, actions = await write_scene_actions(
            self._services(ctx).models, state.owner_id, self._input(state), self._course(state), index,
            state.scene(index, content), state.agents, previous_speech=said[-1] if said else "",
        )
        scene = state.scene(index, content, actions)
        course = StreamAppend(stream_id=state.course_id,
                              events=[CourseSceneSet(scene=scene, ready=not state.narrates, at_ms=_now_ms())])
        return Outcome(events=[*fallback_events([provider]), RunSceneActions(index=index, actions=actions),
                               RunStepCompleted(step=step)], also=[course])

    async def _research(self, ctx: StepContext, state: RunState) -> Outcome:
        services = self._services(ctx)
        inp = self._input(state)
        # The teacher may turn web search off for a run; the step still records that research is done (skipped).
        found = (await research(services.media, state.owner_id, inp.requirement) if inp.enable_web_search
                 else Research(skipped=True))
        done = RunResearchDone(sources=found.sources, skipped=found.skipped, error=found.error)
        return Outcome(events=[done, RunStepCompleted(step="research")])

    async def _narration(self, ctx: StepContext, state: RunState) -> Outcome:
        step = next_step(state)
        assert step is not None
        index = int(step.split(":")[1])
        progress = state.scenes[index]
        assert progress.content is not None and progress.actions is not None
        services = self._services(ctx)
        spoken, unvoiced = await narrate(services.media, services.log.db, state.owner_id, state.course_id,
                                         progress.actions, quota_bytes=self.asset_quota,
                                         voice=state.input.voice if state.input is not None else None)
        voiced = any(isinstance(a, fmt.SpeechAction) and a.audioId for a in spoken)
        scene = state.scene(index, progress.content, spoken)
        course = StreamAppend(stream_id=state.course_id, events=[CourseSceneSet(scene=scene, ready=True, at_ms=_now_ms())])
        narrated = RunSceneNarrated(index=index, skipped=not voiced and not unvoiced, unvoiced=unvoiced,
                                    actions=spoken if voiced else None)
        return Outcome(events=[narrated, RunStepCompleted(step=step)], also=[course])


def _now_ms() -> int:
    return int(time.time() * 1000)


async def _media_on(media: MediaRouter | None, owner: str, slot: str) -> bool:
    """Whether the outline may ask for ``slot``'s media: the slot serves this owner. One assigned but unusable
    counts as on: the media lane then settles its elements with the reason, which the owner can fix and retry."""
    if media is None:
        return False
    try:
        return await media.for_owner(owner, slot) is not None
    except ModelNotReady:
        return True
