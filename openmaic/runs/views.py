"""What clients see of a generation run: OpenMAIC's run snapshot and the headless API's job view.

Both are pure functions of the run's folded state (:class:`~openmaic.runs.fold.RunState`) and its stream row, so
a snapshot, a poll and a replay at the same seq always agree. The vocabulary is OpenMAIC's, not the log's:

* run states are OpenMAIC's (``ended`` where older logs say ``stopped``);
* step names are OpenMAIC's: the log's ``materials`` step is ``material-analysis``; the others
  (``outline``, ``agents``, ``scene:<i>:content``, ``scene:<i>:actions``) are spelled alike;
* a course (``stageId``) exists once the outline is confirmed: before that a run can be discarded with nothing
  to show for it.

The job view (``GET /api/generate-classroom/{jobId}``) maps the run state to the four job statuses a polling
script needs: ``queued`` (not started), ``running``, ``succeeded`` and ``failed`` (paused — it can be retried —
or ended), plus a coarse ``step`` and a 0–100 ``progress``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from openmaic.courses import format as fmt
from openmaic.runs.events import RunMediaState
from openmaic.runs.fold import RunState, scene_id
from openmaic.wire import Wire

__all__ = [
    "AgentsView", "JobResult", "JobView", "MediaState", "OutlineView", "RunError", "RunInputView", "RunProgress",
    "RunView", "classroom_url", "job_view", "media_view", "media_warning",
    "outline_view_of", "run_detail", "run_state", "run_view", "scene_outlines", "wire_step",
]  # fmt: skip

POLL_INTERVAL_MS = 5000
DISCARDED = "discarded"
"""The ``run.stop_requested`` reason of a discarded run (``DELETE /api/generation-runs/{id}``)."""
COURSE_DELETED = "course deleted"


# -- the snapshot ----------------------------------------------------------------------------------------------


class AgentsChoiceView(Wire, omit_defaults=True):
    mode: Literal["auto", "preset"]
    agent_ids: list[str] | None = None
    preset_agent_ids: list[str] | None = None


class LearnerProfileView(Wire, omit_defaults=True):
    nickname: str | None = None
    bio: str | None = None


class VoiceView(Wire, omit_defaults=True):
    provider_id: str
    voice_id: str
    speed: float | None = None


class RunInputView(Wire, omit_defaults=True):
    """What the run was asked for (OpenMAIC's start body)."""

    requirement: str
    material_ids: list[str] = []
    interactive: bool = False
    task_engine: bool = False
    agents: AgentsChoiceView
    learner_profile: LearnerProfileView | None = None
    outline_review: str
    voice: VoiceView | None = None
    language: str = "en"
    enable_web_search: bool = True
    """Shown only when false (the research step searched nothing)."""
    models: dict[str, str] = {}
    """The model chosen per slot instead of the owner's settings (shown only when some were chosen)."""


class OutlineView(Wire):
    outlines: list[fmt.SceneOutline]
    """OpenMAIC's ``SceneOutline``s, each with the id its scene has (or will have) in the classroom."""
    language_directive: str
    course_title: str | None = None
    task_engine_mode: str = "off"
    revision: int


class AgentsView(Wire):
    agents: list[fmt.AgentConfig]
    """The classroom's agents as OpenMAIC's agent configs (the stage's ``generatedAgentConfigs``)."""
    agent_ids: list[str]


class RunProgress(Wire):
    scenes_total: int
    scenes_completed: int


class RunError(Wire, omit_defaults=True):
    step: str | None
    message: str
    error_code: str | None = None
    resume_state: str | None = None
    """The state a retry returns the run to."""


class RunView(Wire):
    """OpenMAIC's run snapshot; ``seq`` is the last event's (follow the run's events after it)."""

    id: str
    state: str
    step: str | None
    seq: int
    input: RunInputView | None
    outline: OutlineView | None
    agents: AgentsView | None
    stage_id: str | None
    """The course, once it exists (the outline was confirmed)."""
    progress: RunProgress
    error: RunError | None
    outline_auto_confirm_at: dt.datetime | None = None
    """``outlineReview: countdown`` while awaiting confirmation: when the run confirms its outline by itself."""
    created_at: dt.datetime
    updated_at: dt.datetime


class MediaState(Wire, omit_defaults=True):
    """One media element's state (the ``media`` event's data, and the snapshot's ``media`` values)."""

    element_id: str
    media_type: str
    status: Literal["pending", "generating", "done", "disabled", "failed"]
    asset_id: str | None = None
    poster_asset_id: str | None = None
    message: str | None = None
    error_code: str | None = None
    retryable: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]


def media_view(m: RunMediaState) -> MediaState:
    """A ``run.media`` event as clients see it: the assets only once done, the failure only when failed."""
    done, failed = m.status == "done", m.status == "failed"
    return MediaState(element_id=m.element_id, media_type=m.media_type, status=m.status,
                      asset_id=m.asset_id if done else None, poster_asset_id=m.poster_asset_id if done else None,
                      message=m.message if failed else None, error_code=m.error_code if failed else None,
                      retryable=bool(m.retryable) if failed else None)  # fmt: skip


class RunDetail(RunView):
    """The snapshot with each media element's state, by element id."""

    media: dict[str, MediaState] = {}


def wire_step(step: str | None) -> str | None:
    """A step as OpenMAIC names it."""
    return "material-analysis" if step == "materials" else step


def run_state(state: str) -> str:
    """A run state as OpenMAIC names it (``ended`` where older logs say ``stopped``)."""
    return "ended" if state == "stopped" else state


def scene_outlines(course_id: str, revision: int, items: Sequence[fmt.SceneOutline], *, start: int = 0,
                   ) -> list[fmt.SceneOutline]:
    """Outline entries (the first at index ``start``) with the ids their scenes have (or will have) and their
    1-based ``order``."""
    return [msgspec.structs.replace(item, id=scene_id(course_id, revision, i), order=i + 1)
            for i, item in enumerate(items, start)]


def _input_view(s: RunState) -> RunInputView | None:
    inp = s.input
    if inp is None:
        return None
    agents = inp.agents
    profile = inp.learner_profile
    return RunInputView(
        requirement=inp.requirement, material_ids=list(inp.material_ids), interactive=inp.interactive,
        task_engine=inp.task_engine,
        agents=AgentsChoiceView(mode=agents.mode, agent_ids=list(agents.agent_ids) or None,
                                preset_agent_ids=list(agents.preset_agent_ids) or None),
        learner_profile=LearnerProfileView(nickname=profile.nickname or None, bio=profile.bio or None)
        if (profile.nickname or profile.bio) else None,
        outline_review=inp.outline_review,
        voice=VoiceView(provider_id=inp.voice.provider_id, voice_id=inp.voice.voice_id, speed=inp.voice.speed)
        if inp.voice is not None else None,
        language=inp.language, enable_web_search=inp.enable_web_search, models=dict(inp.models),
    )  # fmt: skip


def outline_view_of(s: RunState) -> OutlineView | None:
    if s.confirmed_revision:
        revision, items = s.confirmed_revision, s.confirmed
    elif s.proposed_revision:
        revision, items = s.proposed_revision, s.proposed
    else:
        return None
    language = s.input.language if s.input is not None else "en"
    task_engine = "on" if s.input is not None and s.input.task_engine else "off"
    return OutlineView(outlines=scene_outlines(s.course_id, revision, items),
                       language_directive=s.language_directive or language,
                       course_title=s.title or None, task_engine_mode=task_engine, revision=revision)


def _agents_view(s: RunState) -> AgentsView | None:
    if not s.agents_done:
        return None
    return AgentsView(agents=list(s.agents), agent_ids=[a.id for a in s.agents])


def _error_view(s: RunState) -> RunError | None:
    if s.state == "paused":
        resume = s.previous if s.previous not in (None, "paused") else "generating"
        return RunError(step=wire_step(s.paused_step or s.step), message=s.error or "the run paused",
                        resume_state=resume)
    if run_state(s.state) == "ended":
        return RunError(step=wire_step(s.step), message=ended_message(s), error_code="RUN_ENDED")
    return None


def ended_message(s: RunState) -> str:
    if s.stop_reason == COURSE_DELETED:
        return "The classroom was deleted before its generation finished"
    return "The generation run was discarded"


def run_view(row_id: str, s: RunState, *, created_at: dt.datetime, updated_at: dt.datetime) -> RunView:
    """The snapshot of run ``row_id`` in state ``s``."""
    awaiting = s.state == "awaiting_outline_confirmation"
    countdown = s.input is not None and s.input.outline_review == "countdown"
    return RunView(
        id=row_id, state=run_state(s.state), step=wire_step(s.step), seq=s.seq, input=_input_view(s),
        outline=outline_view_of(s), agents=_agents_view(s), stage_id=s.course_id if s.confirmed_revision else None,
        progress=RunProgress(scenes_total=s.scenes_total, scenes_completed=s.scenes_completed),
        error=_error_view(s), outline_auto_confirm_at=s.countdown_until if awaiting and countdown else None,
        created_at=created_at, updated_at=updated_at,
    )  # fmt: skip


def media_warning(state: RunState, run_path: str) -> str | None:
    """``result.warning`` as OpenMAIC words it (``run_path``: ``/api/generation-runs/<id>``), or None. Disabled
    elements are not counted; a scene whose clip the asset store refused is a speech clip left unvoiced."""
    counted = [m for m in state.media.values() if m.status != "disabled"]
    failed = sum(1 for m in counted if m.status == "failed")
    unvoiced = sum(1 for s in state.scenes if s.unvoiced)
    parts = []
    if failed:
        parts.append(f"{failed} of {len(counted)} images and videos could not be generated; see GET {run_path} for "
                     "each one")
    if unvoiced:
        parts.append(f"{unvoiced} speech clip(s) were left without narration")
    return "; ".join(parts) or None


def run_detail(view: RunView, s: RunState | None = None) -> RunDetail:
    """``view`` with the media of ``s`` (the state it was made from)."""
    fields = {f: getattr(view, f) for f in view.__struct_fields__}
    media = {k: media_view(m) for k, m in s.media.items()} if s is not None else {}
    return RunDetail(**fields, media=media)


# -- the job view -----------------------------------------------------------------------------------------------


JobStatus = Literal["queued", "running", "succeeded", "failed"]
JobStep = Literal["queued", "initializing", "researching", "generating_outlines", "generating_scenes",
                  "generating_media", "completed", "failed"]  # fmt: skip


class JobResult(Wire, omit_defaults=True):
    classroom_id: str
    url: str
    scenes_count: int
    warning: str | None = None


class JobView(Wire, omit_defaults=True):
    """OpenMAIC's ``classroomJobView``: ``{success, jobId, runId, status, step, progress, message, pollUrl, …}``."""

    success: bool
    job_id: str
    run_id: str
    run_state: str
    status: JobStatus
    step: JobStep
    progress: int
    """0 to 100."""
    message: str
    poll_url: str
    poll_interval_ms: int
    scenes_generated: int
    total_scenes: int | None = None
    """Only once an outline exists."""
    result: JobResult | None = None
    """Only on success."""
    error: str | None = None
    """Only for a paused or ended run."""
    retryable: bool | None = None
    """True when the run is paused (``POST /api/generation-runs/{runId}/retry``)."""
    done: bool


def classroom_url(origin: str, course_id: str) -> str:
    return f"{origin}/classroom/{course_id}"


def _job_status(s: RunState) -> tuple[JobStatus, JobStep]:
    state = run_state(s.state)
    if state == "completed":
        return "succeeded", "completed"
    if state in ("paused", "ended"):
        return "failed", "failed"
    if state == "preparing":
        if s.step is None:
            return "queued", "queued"
        return "running", "initializing"
    if state == "preparing" and s.step == "research":
        return "running", "researching"
    if state in ("outlining", "awaiting_outline_confirmation"):
        return "running", "generating_outlines"
    if s.media_pending:
        return "running", "generating_media"
    return "running", "generating_scenes"


def _progress(s: RunState, step: JobStep) -> int:
    if step == "completed":
        return 100
    if s.scenes_total:
        return 20 + (75 * s.scenes_completed) // s.scenes_total
    return {"queued": 0, "initializing": 5}.get(step, 10)


def _message(s: RunState, status: JobStatus, step: JobStep) -> str:
    if status == "queued":
        return "Classroom generation job queued"
    if status == "succeeded":
        return media_warning(s, f"/api/generation-runs/{s.run_id}") or "Classroom generated"
    if status == "failed":
        return job_error(s) or "The generation failed"
    if step == "initializing":
        return "Analyzing the materials"
    if step == "researching":
        return "Researching the topic"
    if step == "generating_media":
        return "Generating the images and videos"
    if step == "generating_outlines":
        if s.state == "awaiting_outline_confirmation":
            return "Waiting for the outline to be confirmed"
        return "Generating the outline"
    if not s.agents_done:
        return "Choosing the classroom's agents"
    return f"Generating scenes ({s.scenes_completed}/{s.scenes_total})"


def job_error(s: RunState) -> str | None:
    """What a failed job reports: ``"<step>: <message>"`` for a paused run, why for an ended one."""
    if s.state == "paused":
        step = wire_step(s.paused_step or s.step) or "run"
        return f"{step}: {s.error or 'the step failed'}"
    if run_state(s.state) == "ended":
        return ended_message(s)
    return None


def job_view(run_id: str, s: RunState, origin: str) -> JobView:
    """The job view of run ``run_id`` in state ``s``; URLs start at ``origin`` (``http://host:port``)."""
    status, step = _job_status(s)
    total = len(s.confirmed) or len(s.proposed) or None
    result = None
    if status == "succeeded":
        result = JobResult(classroom_id=s.course_id, url=classroom_url(origin, s.course_id),
                           scenes_count=s.scenes_completed,
                           warning=media_warning(s, f"/api/generation-runs/{run_id}"))
    return JobView(
        success=True, poll_interval_ms=POLL_INTERVAL_MS, job_id=run_id, run_id=run_id, run_state=run_state(s.state), status=status, step=step,
        progress=_progress(s, step), message=_message(s, status, step),
        poll_url=f"{origin}/api/generate-classroom/{run_id}", scenes_generated=s.scenes_completed,
        total_scenes=total, result=result, error=job_error(s) if status == "failed" else None,
        retryable=True if s.state == "paused" else None, done=status in ("succeeded", "failed"),
    )  # fmt: skip
