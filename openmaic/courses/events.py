"""Events of a course stream and the course document they fold into.

A course is its own stream (kind ``course``). Generation steps and workbench tools append to it in the same
transaction as their run or session events. While a run builds the course it holds the course's write lock
(``locked_by``): other writers are refused until ``course.unlocked``.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from openmaic.courses.schema import AgentProfile, OutlineItem, SceneActions, SceneContent, SceneKind
from openmaic.events.types import Event, register


MediaStatus = Literal["pending", "generating", "done", "disabled", "failed"]


class SceneMedia(msgspec.Struct, frozen=True, kw_only=True):
    """A picture or video element of a scene: a placeholder until its asset is ``done``."""

    element_id: str
    kind: Literal["image", "video"]
    prompt: str
    status: MediaStatus = "pending"
    asset_id: str | None = None
    poster_asset_id: str | None = None


class Scene(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    title: str
    goal: str
    kind: SceneKind = "slide"
    key_points: list[str] = []
    content: SceneContent | None = None
    actions: SceneActions | None = None
    status: Literal["pending", "ready"] = "pending"
    media: list[SceneMedia] = []
    narration_asset_id: str | None = None
    """The scene's narration clip (its speech, spoken), when a speech provider made one."""


@register
class CourseCreated(Event, tag="course.created"):
    title: str
    language: str = "en"
    requirement: str = ""
    locked_by: str | None = None


@register
class CourseRetitled(Event, tag="course.retitled"):
    title: str


@register
class CourseOutlineSet(Event, tag="course.outline_set"):
    """The confirmed outline: one pending scene per item."""

    revision: int
    title: str
    scenes: list[Scene]


@register
class CourseAgentsSet(Event, tag="course.agents_set"):
    agents: list[AgentProfile]


@register
class CourseSceneSet(Event, tag="course.scene_set"):
    """A scene's new full value (added at ``position`` when new)."""

    scene: Scene
    position: int | None = None


@register
class CourseMediaSet(Event, tag="course.media_set"):
    """A media element of a scene changed (its asset is stored, or it failed or is disabled)."""

    scene_id: str
    media: SceneMedia


@register
class CourseSceneDeleted(Event, tag="course.scene_deleted"):
    scene_id: str


@register
class CourseScenesReordered(Event, tag="course.scenes_reordered"):
    scene_ids: list[str]


@register
class CourseUnlocked(Event, tag="course.unlocked"):
    run_id: str


@register
class CourseDeleted(Event, tag="course.deleted"):
    pass


class CourseDocument(msgspec.Struct, frozen=True, kw_only=True):
    title: str = ""
    language: str = "en"
    requirement: str = ""
    outline_revision: int = 0
    scenes: tuple[Scene, ...] = ()
    agents: tuple[AgentProfile, ...] = ()
    locked_by: str | None = None
    deleted: bool = False
    seq: int = 0

    def scene(self, scene_id: str) -> Scene | None:
        return next((s for s in self.scenes if s.id == scene_id), None)

    @property
    def outline(self) -> list[OutlineItem]:
        return [OutlineItem(title=s.title, goal=s.goal, kind=s.kind, key_points=s.key_points) for s in self.scenes]


def evolve_course(doc: CourseDocument, event: Event, seq: int) -> CourseDocument:
    """Pure fold of one course event."""
    r = msgspec.structs.replace
    match event:
        case CourseCreated(title=t, language=lang, requirement=req, locked_by=lock):
            return r(doc, title=t, language=lang, requirement=req, locked_by=lock, seq=seq)
        case CourseRetitled(title=t):
            return r(doc, title=t, seq=seq)
        case CourseOutlineSet(revision=rev, title=t, scenes=scenes):
            return r(doc, outline_revision=rev, title=t or doc.title, scenes=tuple(scenes), seq=seq)
        case CourseAgentsSet(agents=agents):
            return r(doc, agents=tuple(agents), seq=seq)
        case CourseSceneSet(scene=scene, position=pos):
            scenes = list(doc.scenes)
            idx = next((i for i, s in enumerate(scenes) if s.id == scene.id), None)
            if idx is not None:
                # A scene's media elements change only by course.media_set: the media lane commits beside the
                # scene steps, so a scene written from an older read must not take an element back to pending.
                known = {m.element_id: m for m in scenes[idx].media}
                scenes[idx] = msgspec.structs.replace(scene, media=[known.get(m.element_id, m) for m in scene.media])
            else:
                scenes.insert(len(scenes) if pos is None else max(0, min(pos, len(scenes))), scene)
            return r(doc, scenes=tuple(scenes), seq=seq)
        case CourseMediaSet(scene_id=sid, media=media):
            scenes = [
                msgspec.structs.replace(s, media=[media if m.element_id == media.element_id else m for m in s.media])
                if s.id == sid else s
                for s in doc.scenes
            ]
            return r(doc, scenes=tuple(scenes), seq=seq)
        case CourseSceneDeleted(scene_id=sid):
            return r(doc, scenes=tuple(s for s in doc.scenes if s.id != sid), seq=seq)
        case CourseScenesReordered(scene_ids=ids):
            by_id = {s.id: s for s in doc.scenes}
            ordered = [by_id[i] for i in ids if i in by_id]
            ordered += [s for s in doc.scenes if s.id not in set(ids)]
            return r(doc, scenes=tuple(ordered), seq=seq)
        case CourseUnlocked(run_id=run_id):
            return r(doc, locked_by=None if doc.locked_by == run_id else doc.locked_by, seq=seq)
        case CourseDeleted():
            return r(doc, deleted=True, seq=seq)
        case _:
            return r(doc, seq=seq)
