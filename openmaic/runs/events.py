"""Events of a generation run stream (kind ``generation``). Tags are stable; see DESIGN §8."""

from __future__ import annotations

import datetime as dt
from typing import Literal

import msgspec

from openmaic.courses.schema import AgentProfile, OutlineItem, SceneActions, SceneContent
from openmaic.events.types import Event, register

RunState = Literal[
    "preparing", "outlining", "awaiting_outline_confirmation", "generating", "completed", "paused", "stopped"
]


class RunInput(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a caller may ask for. No keys, models or URLs: those come only from the server's config."""

    requirement: str
    material_ids: list[str] = []
    language: str = "en"
    agents: Literal["auto"] | list[str] = "auto"
    learner_profile: str = ""
    outline_review: Literal["wait", "auto", "countdown"] = "wait"
    interactive: bool = False


@register
class RunCreated(Event, tag="run.created"):
    course_id: str
    owner_id: str
    input: RunInput
    run_id: str = ""
    """The run's own stream id (a settling decision names it in ``course.unlocked``)."""


@register
class RunStateChanged(Event, tag="run.state_changed"):
    state: RunState
    previous: RunState | None = None
    step: str | None = None
    error: str | None = None


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


@register
class RunOutlineItem(Event, tag="run.outline_item"):
    index: int
    item: OutlineItem
    revision: int = 1


@register
class RunOutlineRestarted(Event, tag="run.outline_restarted"):
    """The outline output started again (a provider retry): drop the items streamed so far."""

    revision: int = 1


@register
class RunOutlineProposed(Event, tag="run.outline_proposed"):
    """The outline step finished: the full proposal (the items were streamed as run.outline_item)."""

    revision: int
    title: str
    items: list[OutlineItem]
    countdown_until: dt.datetime | None = None
    """With ``outline_review: countdown``: when the run confirms the outline by itself (database clock)."""


@register
class RunOutlineConfirmed(Event, tag="run.outline_confirmed"):
    revision: int
    items: list[OutlineItem] = []
    by: Literal["user", "auto", "countdown"] = "user"


@register
class RunAgentsSelected(Event, tag="run.agents_selected"):
    agents: list[AgentProfile]


@register
class RunRetryRequested(Event, tag="run.retry_requested"):
    step: str


@register
class RunStopRequested(Event, tag="run.stop_requested"):
    reason: str = "course deleted"


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

    index: int
    content: SceneContent


@register
class RunSceneActions(Event, tag="run.scene_actions"):
    """Step ``scene:<index>:actions`` produced these actions."""

    index: int
    actions: SceneActions
