"""Events of a run's media lane stream (kind ``media``). Tags are stable; see DESIGN §8.

The lane's own stream holds its checkpoints (an element settled, a video task submitted); what clients see is
written to the run's stream (``run.media``) and the course's (``course.media_set``) in the same transactions.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from openmaic.events.types import Event, register


class LaneItem(msgspec.Struct, frozen=True, kw_only=True):
    """One picture or video of the confirmed outline, with the scene that shows it."""

    element_id: str
    kind: Literal["image", "video"]
    prompt: str
    aspect_ratio: Literal["16:9", "4:3", "1:1", "9:16"] = "16:9"
    scene_index: int
    scene_id: str


@register
class MediaLaneOpened(Event, tag="media.lane_opened"):
    """The run's course exists: its media, in outline order."""

    run_id: str
    course_id: str
    items: list[LaneItem]


@register
class MediaElementStarted(Event, tag="media.element_started"):
    element_id: str


@register
class MediaVideoSubmitted(Event, tag="media.video_submitted"):
    """A video task was submitted (paid for): every later attempt waits on this task, never submits again."""

    element_id: str
    task_id: str


@register
class MediaElementSettled(Event, tag="media.element_settled"):
    """An element's outcome: ``done`` (its assets), ``failed`` (a fixed message) or ``disabled`` (slot off)."""

    element_id: str
    status: Literal["done", "failed", "disabled"]
    asset_id: str | None = None
    poster_asset_id: str | None = None
    message: str | None = None
    error_code: str | None = None
    retryable: bool = True
    keep_task: bool = False
    """A failed video whose task may still finish: a retry waits on it instead of paying for another."""


@register
class MediaRetryRequested(Event, tag="media.retry_requested"):
    element_id: str


@register
class MediaPassReported(Event, tag="media.pass_reported"):
    """The run was told that pass ``media_pass`` went through every element."""

    media_pass: int


@register
class MediaLaneClosed(Event, tag="media.lane_closed"):
    """The run stopped (its course was deleted, or it was cancelled): nothing more is generated."""

    reason: str = "run stopped"
