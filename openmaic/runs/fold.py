"""The state of a generation run: a pure fold of its events, and the pipeline's next step.

``evolve`` is the only place that gives run events their meaning; the kind (which decides) and the control plane
(which validates commands and answers snapshots) both fold with it, so they can never disagree about a run.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Sequence

import msgspec

from openmaic.courses import format as fmt
from openmaic.events.core import LeaseReleased, SessionEnded, StreamOwnerChanged
from openmaic.events.types import Event
from openmaic.runs.events import (
    RunAdmissionDeferred,
    RunAdmitted,
    RunAgentsSelected,
    RunCreated,
    RunInput,
    ResearchSource,
    RunMaterialsExtracted,
    RunMediaPassDone,
    RunMediaState,
    RunOutlineConfirmed,
    RunOutlineHeld,
    RunOutlineItem,
    RunOutlineProposed,
    RunOutlineRestarted,
    RunRetryRequested,
    RunSceneActions,
    RunResearchDone,
    RunSceneContent,
    RunSceneNarrated,
    RunState as RunStateName,
    RunStateChanged,
    RunStepCompleted,
    RunStepFailed,
    RunStepStarted,
    RunStopRequested,
)

COUNTDOWN_WAIT = "outline countdown"
"""The ``lease.released`` reason of the wait that runs the countdown; seeing it means the countdown ran out."""

_SCENE_NS = uuid.UUID("6f6d6169-632d-7363-656e-652d69647300")


def scene_id(course_id: str, revision: int, index: int) -> str:
    """The id of a scene of a confirmed outline: stable, so every writer (and a retry) names it alike."""
    return "sc_" + uuid.uuid5(_SCENE_NS, f"{course_id}\x1f{revision}\x1f{index}").hex[:16]


class SceneProgress(msgspec.Struct, frozen=True, kw_only=True):
    """What the run has committed for one scene of the confirmed outline."""

    content: fmt.SceneContent | None = None
    actions: tuple[fmt.Action, ...] | None = None
    narrated: bool = False
    narration_asset_id: str | None = None
    unvoiced: bool = False


class RunState(msgspec.Struct, frozen=True, kw_only=True):
    """A generation run as its events say it is."""

    seq: int = 0
    run_id: str = ""
    course_id: str = ""
    owner_id: str = ""
    input: RunInput | None = None
    state: RunStateName = "preparing"
    previous: RunStateName | None = None
    step: str | None = None
    """The step started last (or the one the run paused on)."""
    materials_done: bool = False
    materials_text: str = ""
    material_images: tuple[str, ...] = ()
    research_done: bool = False
    research_sources: tuple[ResearchSource, ...] = ()
    streamed: tuple[fmt.SceneOutline, ...] = ()
    """Outline items streamed so far by the outline step in flight."""
    title: str = ""
    proposed: tuple[fmt.SceneOutline, ...] = ()
    language_directive: str = ""
    proposed_revision: int = 0
    countdown_until: dt.datetime | None = None
    countdown_waited: bool = False
    outline_held: bool = False
    """The countdown was stopped (``hold-outline``): the proposed outline waits for a user's confirmation."""
    confirmed: tuple[fmt.SceneOutline, ...] = ()
    confirmed_revision: int = 0
    confirmed_by: str | None = None
    agents: tuple[fmt.AgentConfig, ...] = ()
    agent_ids: tuple[str, ...] = ()
    agents_done: bool = False
    scenes: tuple[SceneProgress, ...] = ()
    media: dict[str, RunMediaState] = {}
    """Each media element's latest state, by element id (written by the media lane)."""
    media_passes: int = 0
    failures: dict[str, int] = {}
    """Failures of each step since it last completed (or was retried by a user)."""
    paused_step: str | None = None
    error: str | None = None
    retry_requested: bool = False
    stop_requested: bool = False
    stop_reason: str | None = None
    stop_seq: int = 0
    """The seq of the event that first asked the run to stop, or that ended it (0 while neither happened)."""
    admitted_attempt: int = 0
    deferred_attempt: int = 0
    deferred_until: dt.datetime | None = None
    ended: str | None = None

    @property
    def outline_revision(self) -> int:
        """The revision clients confirm against: the confirmed one, else the proposed one (0 before any)."""
        return self.confirmed_revision or self.proposed_revision

    @property
    def outline(self) -> tuple[fmt.SceneOutline, ...]:
        """The best outline there is: confirmed, else proposed, else what has streamed so far."""
        return self.confirmed or self.proposed or self.streamed

    @property
    def scenes_total(self) -> int:
        return len(self.scenes)

    @property
    def narrates(self) -> bool:
        """Each scene ends with a narration step. Runs logged before research and narration existed (no
        ``run.research_done``) keep the pipeline they were started with: a scene is done with its actions."""
        return self.research_done

    def scene_done(self, progress: SceneProgress) -> bool:
        return progress.narrated if self.narrates else progress.actions is not None

    @property
    def scenes_completed(self) -> int:
        return sum(1 for s in self.scenes if self.scene_done(s))

    @property
    def media_requested(self) -> bool:
        """The confirmed outline asks for pictures or videos (so the run has a media lane)."""
        return any(item.mediaGenerations for item in self.confirmed)

    @property
    def media_pending(self) -> bool:
        """Every scene is in and the run waits for its media lane's first pass (``generating_media``)."""
        return bool(self.scenes) and all(self.scene_done(s) for s in self.scenes) and self.media_requested \
            and self.media_passes == 0

    def scene(self, index: int, content: fmt.SceneContent, actions: Sequence[fmt.Action] | None = None,
              ) -> fmt.Scene:
        """Scene ``index`` of the confirmed outline as a course scene (OpenMAIC's), with the given output."""
        item = self.confirmed[index]
        scene = fmt.Scene(id=scene_id(self.course_id, self.confirmed_revision, index), stageId=self.course_id,
                          type=content.type, title=item.title, order=index + 1, content=content)  # type: ignore[arg-type]
        return msgspec.structs.replace(scene, actions=list(actions)) if actions else scene

    def scene_ids(self) -> list[str]:
        """The ids of the confirmed outline's scenes, in order."""
        return [scene_id(self.course_id, self.confirmed_revision, i) for i in range(len(self.confirmed))]


def _set_scene(scenes: tuple[SceneProgress, ...], index: int, **change: object) -> tuple[SceneProgress, ...]:
    if not 0 <= index < len(scenes):
        return scenes  # an output for a scene of another outline: nothing to record
    out = list(scenes)
    out[index] = msgspec.structs.replace(out[index], **change)
    return tuple(out)


def evolve(state: RunState, event: Event, seq: int) -> RunState:
    """Pure fold of one event of a run stream."""
    r = msgspec.structs.replace
    s = r(state, seq=seq)
    match event:
        case RunCreated(course_id=course, owner_id=owner, input=inp, run_id=run_id):
            return r(s, course_id=course, owner_id=owner, input=inp, run_id=run_id or s.run_id)
        case StreamOwnerChanged(to_owner_id=owner):
            return r(s, owner_id=owner)  # claimed: later steps read and write as the account
        case RunStateChanged(state=new, step=step, error=error):
            if new == "paused":
                return r(s, state=new, previous=s.state, paused_step=step, step=step or s.step, error=error)
            return r(s, state=new, previous=s.state, paused_step=None, error=None if s.state == "paused" else s.error)
        case RunStepStarted(step=step):
            return r(s, step=step)
        case RunStepCompleted(step=step):
            failures = {k: v for k, v in s.failures.items() if k != step}
            return r(s, failures=failures, retry_requested=False, error=None)
        case RunStepFailed(step=step, error=error):
            return r(s, failures={**s.failures, step: s.failures.get(step, 0) + 1}, error=error)
        case RunRetryRequested(step=step):
            return r(s, failures={**s.failures, step: 0}, retry_requested=True)
        case RunStopRequested(reason=reason):
            return r(s, stop_requested=True, stop_reason=reason, stop_seq=s.stop_seq or seq)
        case RunAdmitted(attempt=attempt):
            return r(s, admitted_attempt=attempt)
        case RunAdmissionDeferred(attempt=attempt, until=until):
            return r(s, deferred_attempt=attempt, deferred_until=until)
        case RunMaterialsExtracted(text=text, images=images):
            return r(s, materials_done=True, materials_text=text, material_images=tuple(images))
        case RunResearchDone(sources=sources):
            return r(s, research_done=True, research_sources=tuple(sources))
        case RunSceneNarrated(index=index, asset_id=asset_id, unvoiced=unvoiced, actions=spoken):
            change: dict[str, object] = {"narrated": True, "narration_asset_id": asset_id, "unvoiced": unvoiced}
            if spoken is not None:
                change["actions"] = tuple(spoken)
            return r(s, scenes=_set_scene(s.scenes, index, **change))
        case RunMediaState(element_id=element_id):
            return r(s, media={**s.media, element_id: event})
        case RunMediaPassDone(media_pass=n):
            return r(s, media_passes=max(s.media_passes, n))
        case RunOutlineRestarted():
            return r(s, streamed=())
        case RunOutlineItem(index=index, item=item):
            # Index 0 starts a new stream: an earlier attempt's items are replaced, never mixed in.
            items = () if index == 0 else s.streamed[:index]
            return r(s, streamed=(*items, item))
        case RunOutlineProposed(revision=rev, title=title, items=items, countdown_until=until,
                                language_directive=directive):
            return r(s, proposed=tuple(items), proposed_revision=rev, title=title, countdown_until=until,
                     countdown_waited=False, outline_held=False, streamed=(),
                     language_directive=directive or s.language_directive)
        case RunOutlineHeld(revision=rev) if rev == s.proposed_revision:
            return r(s, outline_held=True, countdown_until=None)
        case RunOutlineConfirmed(revision=rev, items=items, by=by):
            if s.confirmed_revision:
                return s  # the first confirmation is the one the course was built from
            confirmed = tuple(items) or s.proposed
            return r(s, confirmed=confirmed, confirmed_revision=rev, confirmed_by=by,
                     scenes=tuple(SceneProgress() for _ in confirmed))
        case RunAgentsSelected(agents=agents, agent_ids=ids):
            return r(s, agents=tuple(agents), agent_ids=tuple(ids), agents_done=True)
        case RunSceneContent(index=index, content=content):
            return r(s, scenes=_set_scene(s.scenes, index, content=content))
        case RunSceneActions(index=index, actions=actions):
            return r(s, scenes=_set_scene(s.scenes, index, actions=tuple(actions)))
        case LeaseReleased(reason=reason) if reason == COUNTDOWN_WAIT:
            return r(s, countdown_waited=s.proposed_revision > 0 and not s.confirmed_revision)
        case SessionEnded(status=status):
            return r(s, ended=status, stop_seq=s.stop_seq or seq)
        case _:
            return s


def fold(events: Iterable[tuple[Event, int]], state: RunState | None = None) -> RunState:
    """Fold ``(event, seq)`` pairs onto ``state`` (a fresh run by default)."""
    st = RunState() if state is None else state
    for event, seq in events:
        st = evolve(st, event, seq)
    return st


def next_step(state: RunState) -> str | None:
    """The pipeline's next step, ``"confirm"`` while the outline awaits confirmation, ``"media"`` while every
    scene is in and the media lane's first pass is not, None when all is done."""
    inp = state.input
    if inp is not None and inp.material_ids and not state.materials_done:
        return "materials"
    if not state.proposed_revision:
        return "outline" if state.research_done else "research"
    if not state.confirmed_revision:
        return "confirm"
    if not state.agents_done:
        return "agents"
    for i, scene in enumerate(state.scenes):
        if scene.content is None:
            return f"scene:{i}:content"
        if scene.actions is None:
            return f"scene:{i}:actions"
        if state.narrates and not scene.narrated:
            return f"scene:{i}:narration"
    if state.media_pending:
        return "media"
    return None
