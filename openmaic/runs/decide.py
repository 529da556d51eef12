"""Pure decisions about a run: the events of a confirmation, a pause, its end and its completion.

Shared by the kind (the worker side) and the control plane (``confirm-outline``), so that a confirmation looks
the same whoever makes it: the run's ``run.outline_confirmed``, ``run.course_created`` and state change, and the
course's ``course.outline_set``, in one append.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec

from openmaic import errors
from openmaic.actors.kind import Finish
from openmaic.courses.events import CourseOutlineSet, CourseUnlocked
from openmaic.courses.format import SceneOutline
from openmaic.steps.outputs import MAX_SCENES
from openmaic.events.core import SessionEnded
from openmaic.events.log import StreamAppend
from openmaic.events.types import Event
from openmaic.runs.events import RunCourseCreated, RunOutlineConfirmed, RunStateChanged
from openmaic.runs.fold import RunState, evolve, scene_id

MAX_OUTLINE_ITEMS = MAX_SCENES
INTERRUPTED = "interrupted too many times"
PAUSED = "paused"
AWAITING = "awaiting outline confirmation"
QUEUED = "queued behind the owner's other runs"


def check_outline(items: Sequence[SceneOutline], *, what: str = "outline") -> None:
    """Refuse an outline no course can be built from (InvalidInput naming the offending item)."""
    if not items:
        raise errors.InvalidInput(f"the {what} has no scenes", path=what)
    if len(items) > MAX_OUTLINE_ITEMS:
        raise errors.InvalidInput(f"the {what} has {len(items)} scenes; at most {MAX_OUTLINE_ITEMS} are allowed",
                                  path=what)
    for i, item in enumerate(items):
        if not item.title.strip():
            raise errors.InvalidInput(f"scene {i + 1} of the {what} has no title", path=f"{what}[{i}].title")


def same_outline(a: Sequence[SceneOutline], b: Sequence[SceneOutline]) -> bool:
    """Whether a confirmed outline is the proposed one: ids and orders are the server's to give (a client sends
    back the ids its view showed), so only what the entries say counts."""
    def unnamed(items: Sequence[SceneOutline]) -> list[SceneOutline]:
        return [msgspec.structs.replace(item, id="", order=0) for item in items]

    return unnamed(a) == unnamed(b)


def confirmation(
    state: RunState, revision: int, items: Sequence[SceneOutline], by: Literal["user", "auto", "countdown"],
    *, previous: str | None = None,
) -> tuple[list[Event], StreamAppend]:
    """The run events and the course append that confirm ``items`` as outline ``revision``."""
    # Each outline entry is named as the scene it becomes (OpenMAIC's outline ids are the model's own, and its
    # scenes point back with ``outlineId``; here the two are one id, so no scene needs the app-only field).
    confirmed = [msgspec.structs.replace(item, id=scene_id(state.course_id, revision, i), order=i + 1)
                 for i, item in enumerate(items)]
    run_events: list[Event] = [
        RunOutlineConfirmed(revision=revision, items=confirmed, by=by),
        RunCourseCreated(course_id=state.course_id),
        RunStateChanged(state="generating", previous=previous or state.state),  # type: ignore[arg-type]
    ]
    # The scenes are named from the confirmed outline alone, so the kind's fold and this agree on every id.
    after = evolve(state, run_events[0], state.seq)
    course = StreamAppend(
        stream_id=state.course_id,
        events=[CourseOutlineSet(revision=revision, title=state.title, outlines=list(after.confirmed),
                                 scene_ids=after.scene_ids(), language_directive=state.language_directive)],
    )
    return run_events, course


def pause(state: RunState, step: str | None, error: str, *events: Event) -> list[Event]:
    """The events that pause the run on ``step`` with ``error`` (it then holds no worker until ``retry``)."""
    if state.state == "paused":
        return list(events)
    return [*events, RunStateChanged(state="paused", previous=state.state, step=step, error=error)]


def ended(state: RunState, reason: str | None = None) -> Finish:
    """Settle as ``ended`` (discarded, cancelled, or its course deleted). The course is unlocked unless it was
    deleted (then nobody may write it anyway)."""
    events: list[Event] = []
    if state.state != "ended":
        events.append(RunStateChanged(state="ended", previous=state.state, step=state.step))
    events.append(SessionEnded(status="ended", error=None))
    also: list[StreamAppend] = []
    why = reason or state.stop_reason
    if state.course_id and why != "course deleted":
        also.append(StreamAppend(stream_id=state.course_id, events=[CourseUnlocked(run_id=state.run_id)]))
    return Finish(events=events, also=also)


def completed(state: RunState) -> Finish:
    """Settle as ``completed``: every scene is ready; the course is handed back to its other writers."""
    return Finish(
        events=[RunStateChanged(state="completed", previous=state.state), SessionEnded(status="completed")],
        also=[StreamAppend(stream_id=state.course_id, events=[CourseUnlocked(run_id=state.run_id)])],
    )
