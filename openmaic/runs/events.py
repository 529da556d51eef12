"""Events of a generation run stream (kind ``generation``). Tags are stable; see DESIGN §8.

Versions. ``run.created`` v2 holds OpenMAIC's start input (``agents: {mode, agent_ids}``, ``learner_profile:
{nickname, bio}``, ``task_engine``, ``voice``); v1 held ``agents: "auto" | [ids]`` and a one-string learner
profile. Fields added to the input since, with defaults (``enable_web_search``, ``models``), needed no new
version: a v2 event written before them reads as their default. ``run.state_changed`` v2 names the end of a
discarded or deleted run ``ended`` (OpenMAIC's word); v1 said ``stopped``. Stored v1 events are never rewritten: the upcasters below lift them when they are read.

What a run was asked for (:class:`RunInput` and its parts) and what research found (:class:`ResearchSource`) are
the steps' inputs, defined in :mod:`openmaic.steps.brief` and named here too: they are plain (untagged) structs,
so where they are defined is no part of the stored history.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar, Literal

from openmaic.courses import format as fmt
from openmaic.courses import legacy
from openmaic.events.types import Event, register, registry
from openmaic.steps.brief import AgentsChoice, LearnerProfile, ResearchSource, RunInput, Voice  # noqa: F401

RunState = Literal[
    "preparing", "outlining", "awaiting_outline_confirmation", "generating", "completed", "paused", "ended"
]


@register
class RunCreated(Event, tag="run.created"):
    version: ClassVar[int] = 2

    course_id: str
    owner_id: str
    input: RunInput
    run_id: str = ""
    """The run's own stream id (a settling decision names it in ``course.unlocked``)."""


@registry.upcaster("run.created", 1)
def _run_created_v1(data: dict[str, Any]) -> dict[str, Any]:
    """v1 input: ``agents: "auto" | [ids]``, ``learner_profile: str``."""
    inp = dict(data.get("input") or {})
    agents = inp.get("agents", "auto")
    inp["agents"] = {"mode": "auto"} if agents == "auto" else {"mode": "preset", "agent_ids": list(agents)}
    profile = inp.get("learner_profile", "")
    inp["learner_profile"] = {"bio": profile} if isinstance(profile, str) else profile
    return {**data, "input": inp}


@register
class RunStateChanged(Event, tag="run.state_changed"):
    version: ClassVar[int] = 2

    state: RunState
    previous: RunState | None = None
    step: str | None = None
    error: str | None = None


@registry.upcaster("run.state_changed", 1)
def _state_changed_v1(data: dict[str, Any]) -> dict[str, Any]:
    """v1 named the end of a run whose course was deleted (or that was cancelled) ``stopped``."""
    out = dict(data)
    for key in ("state", "previous"):
        if out.get(key) == "stopped":
            out[key] = "ended"
    return out


@register
class RunStepStarted(Event, tag="run.step_started"):
    step: str


@register
class RunStepCompleted(Event, tag="run.step_completed"):
    step: str


@register
class RunStepFailed(Event, tag="run.step_failed"):
    step: str
    error: str
    will_retry: bool = False


@register
class RunMaterialsExtracted(Event, tag="run.materials_extracted"):
    text: str
    images: list[str] = []
    kinds: list[str] = []
    """The formats read (``pdf``, ``md``, ``png``, …), for the client's ``material_kinds``; empty in older logs."""


def _outline_v1(item: Any, index: int) -> dict[str, Any]:
    """A v1 outline item (``{title, goal, kind, key_points, media}``) as OpenMAIC's ``SceneOutline``."""
    item = item if isinstance(item, dict) else {}
    media = [{**m, "element_id": m.get("element_id")} for m in item.get("media") or [] if isinstance(m, dict)]
    return legacy.outline_of_scene({**item, "id": f"scene_{index + 1}", "media": media}, index + 1)


@register
class RunOutlineItem(Event, tag="run.outline_item"):
    version: ClassVar[int] = 2
    index: int
    item: fmt.SceneOutline
    revision: int = 1


@registry.upcaster("run.outline_item", 1)
def _outline_item_v1(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "item": _outline_v1(data.get("item"), int(data.get("index") or 0))}


@register
class RunOutlineRestarted(Event, tag="run.outline_restarted"):
    """The outline output started again (a provider retry): drop the items streamed so far."""

    revision: int = 1


@register
class RunOutlineProposed(Event, tag="run.outline_proposed"):
    """The outline step finished: the full proposal (the items were streamed as run.outline_item)."""

    version: ClassVar[int] = 2
    revision: int
    title: str
    items: list[fmt.SceneOutline]
    countdown_until: dt.datetime | None = None
    """With ``outline_review: countdown``: when the run confirms the outline by itself (database clock)."""
    language_directive: str = ""


@registry.upcaster("run.outline_proposed", 1)
def _outline_proposed_v1(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "items": [_outline_v1(it, i) for i, it in enumerate(data.get("items") or [])]}


@register
class RunOutlineHeld(Event, tag="run.outline_held"):
    """The countdown of outline ``revision`` was stopped: the outline now waits for a confirmation."""

    revision: int


@register
class RunOutlineConfirmed(Event, tag="run.outline_confirmed"):
    version: ClassVar[int] = 2
    revision: int
    items: list[fmt.SceneOutline] = []
    by: Literal["user", "auto", "countdown"] = "user"


@registry.upcaster("run.outline_confirmed", 1)
def _outline_confirmed_v1(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "items": [_outline_v1(it, i) for i, it in enumerate(data.get("items") or [])]}


@register
class RunCourseCreated(Event, tag="run.course_created"):
    """The run's course exists for its clients: its outline was confirmed (``course_created`` on the wire)."""

    course_id: str


@register
class RunAgentsSelected(Event, tag="run.agents_selected"):
    version: ClassVar[int] = 2
    agents: list[fmt.AgentConfig]
    agent_ids: list[str] = []
    """The preset agents cast by id (``agents: preset``), as the stage's ``agentIds`` names them."""


@registry.upcaster("run.agents_selected", 1)
def _agents_selected_v1(data: dict[str, Any]) -> dict[str, Any]:
    agents = [a for a in data.get("agents") or [] if isinstance(a, dict)]
    return {"agents": [legacy.agent_config(a, i) for i, a in enumerate(agents)]}


@register
class RunRetryRequested(Event, tag="run.retry_requested"):
    step: str


@register
class RunStopRequested(Event, tag="run.stop_requested"):
    reason: str = "course deleted"
    """``course deleted``, or ``discarded`` (``DELETE /api/generation-runs/{id}``)."""


@register
class RunAdmitted(Event, tag="run.admitted"):
    """This attempt may execute: the owner had fewer than the limit of executing runs (``active``)."""

    attempt: int
    active: int = 0


@register
class RunAdmissionDeferred(Event, tag="run.admission_deferred"):
    """The owner already had ``active`` executing runs (the limit): this one waits until ``until``."""

    attempt: int
    active: int
    limit: int
    until: dt.datetime


@register
class RunSceneContent(Event, tag="run.scene_content"):
    """Step ``scene:<index>:content`` produced this content."""

    version: ClassVar[int] = 2
    index: int
    content: fmt.SceneContent | None
    """None only in a lifted v1 event whose content had no counterpart."""


@registry.upcaster("run.scene_content", 1)
def _scene_content_v1(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "content": legacy.scene_content(data.get("content"), {})}


@register
class RunSceneActions(Event, tag="run.scene_actions"):
    """Step ``scene:<index>:actions`` produced these actions."""

    version: ClassVar[int] = 2
    index: int
    actions: list[fmt.Action]


@registry.upcaster("run.scene_actions", 1)
def _scene_actions_v1(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "actions": legacy.scene_actions(data.get("actions"), slide=False)}


@register
class RunResearchDone(Event, tag="run.research_done"):
    """Step ``research``: what the web search found (nothing when no provider is set, or it failed: ``error``)."""

    sources: list[ResearchSource] = []
    skipped: bool = False
    error: str | None = None


@register
class RunSceneNarrated(Event, tag="run.scene_narrated"):
    """Step ``scene:<index>:narration``: the scene's narration clip (none when no speech provider is set)."""

    index: int
    asset_id: str | None = None
    """(Older logs) the scene's one clip; now each speech action names its own (``audio``)."""
    skipped: bool = False
    unvoiced: bool = False
    """A clip was made but the asset store refused it (the owner's quota is full)."""
    actions: list[fmt.Action] | None = None
    """The scene's actions with each speech's ``audioId``; None when nothing was spoken."""


@register
class RunMediaState(Event, tag="run.media"):
    """A media element's state, as clients see it (written by the run's media lane)."""

    element_id: str
    media_type: Literal["image", "video"]
    status: Literal["pending", "generating", "done", "disabled", "failed"]
    asset_id: str | None = None
    poster_asset_id: str | None = None
    message: str | None = None
    error_code: str | None = None
    retryable: bool | None = None


@register
class RunMediaPassDone(Event, tag="run.media_pass_done"):
    """The media lane went through every element once (``media_pass`` counts the passes; a retry starts one)."""

    media_pass: int = 1
