"""A course's versions: every change to its document (a run's step, a Pro tool call, a browser save, a restore),
who or what made it, when, and what it was in a word; the document as it was at any of them; and a restore,
which appends that earlier document as the newest version (``course.restored``): the log only grows.

Who made a change is read from the events themselves: a run holds the course's lock while it writes it, a Pro
session signs its edits (``by``), a browser writes whole documents or stages, a restore is its own event.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Literal

from openmaic import errors
from openmaic.courses.events import (
    BrowserDocumentSet, BrowserSceneSet, BrowserStageSet, CourseAgentsSet, CourseCreated, CourseDocument,
    CourseDocumentSet, CourseMediaSet, CourseOutlineSet, CourseRestored, CourseRetitled, CourseSceneDeleted,
    CourseSceneSet, CourseScenesReordered, CourseStageSet, evolve_course,
)  # fmt: skip
from openmaic.events.log import EventLog
from openmaic.events.types import Event
from openmaic.wire import Wire

__all__ = ["Version", "course_at", "course_versions", "restore_course"]

Author = Literal["run", "agent", "browser", "restore", "teacher"]


class Version(Wire, omit_defaults=True):
    seq: int
    """The course stream's seq after this change: ``POST …/restore {seq}`` brings this version back."""
    at: dt.datetime
    by: Author
    change: str
    """created, outline, agents, scene_written, scene_finished, scene_added, scene_changed, scene_deleted,
    reordered, retitled, media_done, media_failed, document, stage, restored."""
    title: str = ""
    """The scene (or, for created/retitled, the course) the change is about."""
    run_id: str | None = None
    session_id: str | None = None
    from_seq: int | None = None
    """For ``restored``: the version brought back."""


def _scene_title(doc: CourseDocument, scene_id: str) -> str:
    s = doc.scene(scene_id)
    if s is not None:
        return s.title
    o = doc.outlines.get(scene_id)
    return o.title if o is not None else ""


def _change(before: CourseDocument, e: Event) -> tuple[str, str] | None:
    """What ``e`` changed, in a word, and the title it is about; None for what is no change to a teacher."""
    match e:
        case CourseCreated(title=t) | CourseRetitled(title=t):
            return ("created" if isinstance(e, CourseCreated) else "retitled"), t
        case CourseOutlineSet(title=t):
            return "outline", t or before.title
        case CourseAgentsSet():
            return "agents", ""
        case CourseSceneSet(scene=None):
            return None
        case CourseSceneSet(scene=scene, ready=ready, by=by):
            new = before.scene(scene.id) is None
            if by:
                return ("scene_added" if new else "scene_changed"), scene.title
            if before.locked_by is not None:
                return ("scene_finished" if ready and not new else "scene_written"), scene.title
            return ("scene_added" if new else "scene_changed"), scene.title
        case CourseMediaSet(scene_id=sid, media=m) if m.status in ("done", "failed"):
            return f"media_{m.status}", _scene_title(before, sid)
        case CourseSceneDeleted(scene_id=sid):
            return "scene_deleted", _scene_title(before, sid)
        case CourseScenesReordered():
            return "reordered", ""
        case CourseDocumentSet() | BrowserDocumentSet():
            return "document", ""
        case CourseStageSet() | BrowserStageSet():
            return "stage", ""
        case BrowserSceneSet(scene=raw):
            return "scene_changed", str(raw.get("title") or "")
        case CourseRestored():
            return "restored", ""
    return None


def _author(before: CourseDocument, after: CourseDocument, e: Event) -> tuple[Author, str | None, str | None]:
    by = getattr(e, "by", "")
    if isinstance(e, CourseRestored):
        return "restore", None, None
    if by:
        return "agent", None, by
    if isinstance(e, CourseDocumentSet | CourseStageSet | BrowserDocumentSet | BrowserStageSet | BrowserSceneSet):
        return "browser", None, None
    run = before.locked_by or after.locked_by
    if run is not None:
        return "run", run, None
    return ("agent" if isinstance(e, CourseCreated) else "teacher"), None, None


async def course_versions(log: EventLog, course_id: str, *, to_seq: int) -> list[Version]:
    """Every version of the course up to ``to_seq`` (a head read from the primary: the replica may serve the
    events once it holds that far), oldest first."""
    doc = CourseDocument()
    out: list[Version] = []
    after = 0
    while after < to_seq:
        page = await log.read_stream(course_id, after, 500, to_seq=to_seq, floor=to_seq)
        if not page:
            break
        for r in page:
            e = log.decode(r)
            before, doc = doc, evolve_course(doc, e, r.seq)
            change = _change(before, e)
            if change is not None:
                by, run_id, session_id = _author(before, doc, e)
                out.append(Version(seq=r.seq, at=r.recorded_at, by=by, change=change[0], title=change[1],
                                   run_id=run_id, session_id=session_id,
                                   from_seq=e.from_seq if isinstance(e, CourseRestored) else None))
        after = page[-1].seq
    return out


async def course_at(log: EventLog, course_id: str, seq: int) -> CourseDocument:
    """The course folded as it was at ``seq``."""
    return (await log.fold(course_id, CourseDocument(), evolve_course, to_seq=seq))[0]


async def restore_course(log: EventLog, course_id: str, seq: int, command_id: str) -> int:
    """Append the course as it was at ``seq`` as its newest version; answers the restore's seq. Refused (Conflict)
    while a run writes the course or when it changed during the restore, and (InvalidInput) for a seq the course
    has not reached; repeating ``command_id`` answers the first restore again. The caller checks the owner."""
    first = await log.command_event(course_id, command_id)
    if first is not None:
        if first.type != "course.restored":
            raise errors.CommandConflict(f"command_id {command_id!r} was already used for {first.type} on this "
                                         "course", command_id=command_id)
        return first.seq
    head = (await log.fold(course_id, CourseDocument(), evolve_course))[0]
    if head.locked_by is not None:
        raise errors.Conflict("this course is being written; restore a version once the run has finished")
    if not 1 <= seq <= head.seq:
        raise errors.InvalidInput(f"seq: the course has versions 1 to {head.seq}", path="seq")
    old = await course_at(log, course_id, seq)
    if old.deleted or old.seq == 0:
        raise errors.InvalidInput("seq: there is no course at that version", path="seq")
    event = CourseRestored(from_seq=seq, document=old, at_ms=int(time.time() * 1000))
    try:
        # Fenced at the head checked above: nothing (a run taking the lock, another edit) slips in between.
        result = await log.append_one(course_id, [event], command_id=command_id, expected_seq=head.seq)
    except errors.WrongExpectedSeq:
        raise errors.Conflict("the course changed meanwhile; look at its history again and restore then") from None
    return result.first_seq
