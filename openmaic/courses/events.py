"""Events of a course stream and the course they fold into: OpenMAIC's course document.

A course is its own stream (kind ``course``). Generation steps, Pro tools and the browser persistence routes append
to it, the steps in the same transaction as their run or session events. While a run builds the course it holds
the course's write lock (``locked_by``): other writers are refused until ``course.unlocked``.

What a course holds is OpenMAIC's document (:mod:`openmaic.courses.format`): a stage and ordered scenes, each scene
exactly as the format spells it. Beside it the fold keeps what a document does not say: which outline scenes are
still being written (``pending``), which written scenes are ready to play, the state of each generated picture
or video (``media``, by its ref), the run still writing it, and whether it was deleted.

Versions. ``course.outline_set``, ``course.agents_set`` and ``course.scene_set`` v2 hold the format's outline
entries, agent configs and scenes; their v1 held this server's earlier course shape, which the upcasters below
lift with :mod:`openmaic.courses.legacy` when an old event is read (nothing stored is rewritten). The browser
persistence routes' events of that time (``course.browser_document_set`` / ``_stage_set`` / ``_scene_set``) held
the client's JSON as it sent it, and fold into the document as the format reads it; the translated companions
they were written with (a v1 ``course.outline_set`` and ``course.agents_set``) are then left aside.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import msgspec

from openmaic.courses import format as fmt
from openmaic.courses import legacy
from openmaic.courses.lenient import lenient_scene, lenient_stage
from openmaic.events.types import Event, register, registry

MediaStatus = Literal["pending", "generating", "done", "disabled", "failed"]


class SceneMedia(msgspec.Struct, frozen=True, kw_only=True):
    """A generated picture or video of a scene, by its ref (``element_id``, the ``gen_img_…``/``gen_vid_…`` its
    element names): a placeholder until its asset is ``done``."""

    element_id: str
    kind: Literal["image", "video"]
    prompt: str
    status: MediaStatus = "pending"
    asset_id: str | None = None
    poster_asset_id: str | None = None


class WrittenScene(msgspec.Struct, frozen=True, kw_only=True):
    """(v1 only) A scene a v1 ``course.outline_set`` carried already written."""

    scene: fmt.Scene
    media: list[SceneMedia] = []
    ready: bool = True


class PendingScene(msgspec.Struct, frozen=True, kw_only=True):
    """A scene of the confirmed outline that is not written yet."""

    id: str
    title: str
    type: str
    order: int


@register
class CourseCreated(Event, tag="course.created"):
    title: str
    language: str = "en"
    requirement: str = ""
    locked_by: str | None = None
    created_ms: int = 0
    """When the course was made (epoch ms: the stage's ``createdAt``); 0 in older logs."""
    interactive: bool = False
    """Generated with interactive scenes asked for (the stage's ``interactiveMode``)."""


@register
class CourseRetitled(Event, tag="course.retitled"):
    title: str
    by: str = ""
    """The Pro session that made this change (empty: a run, a browser or an older log): the course's history
    names it, and undoing that session finds its edits by it."""


@register
class CourseOutlineSet(Event, tag="course.outline_set"):
    """The confirmed outline: a pending scene per entry, named ``scene_ids[i]``."""

    version: ClassVar[int] = 2
    revision: int
    title: str
    outlines: list[fmt.SceneOutline] = []
    scene_ids: list[str] = []
    language_directive: str = ""
    at_ms: int = 0
    legacy: bool = False
    """Lifted from v1: for a browser-saved document it was a translation the document itself supersedes."""
    written: list[WrittenScene] = []
    """v1 only: scenes it carried with their content (see the upcaster)."""


@registry.upcaster("course.outline_set", 1)
def _outline_set_v1(data: dict[str, Any]) -> dict[str, Any]:
    scenes = [s for s in data.get("scenes") or [] if isinstance(s, dict)]
    return {"revision": data.get("revision", 1), "title": data.get("title", ""), "legacy": True,
            "outlines": [legacy.outline_of_scene(s, i + 1) for i, s in enumerate(scenes)],
            "scene_ids": [s.get("id", "") for s in scenes],
            # v1 scenes of a browser-saved course came with their content (and their media states) already.
            "written": [{"scene": doc, "media": s.get("media") or [], "ready": s.get("status") == "ready"}
                        for i, s in enumerate(scenes) if (doc := legacy.scene_document(s, i + 1)) is not None]}


@register
class CourseAgentsSet(Event, tag="course.agents_set"):
    """The course's roster: generated agent configs, or the ids of preset agents (``agent_ids``)."""

    version: ClassVar[int] = 2
    agents: list[fmt.AgentConfig] = []
    agent_ids: list[str] = []
    legacy: bool = False


@registry.upcaster("course.agents_set", 1)
def _agents_set_v1(data: dict[str, Any]) -> dict[str, Any]:
    agents = [a for a in data.get("agents") or [] if isinstance(a, dict)]
    return {"agents": [legacy.agent_config(a, i) for i, a in enumerate(agents)], "legacy": True}


@register
class CourseSceneSet(Event, tag="course.scene_set"):
    """A scene's new full value (added at ``position`` when new); ``ready`` once it can be played (its script and
    narration are in). ``media`` are the states of media refs the course does not know yet."""

    version: ClassVar[int] = 2
    scene: fmt.Scene | None
    """None only in a lifted v1 event that wrote a scene's outline entry again before its content."""
    position: int | None = None
    ready: bool = True
    media: list[SceneMedia] = []
    at_ms: int = 0
    """When it was written (epoch ms): the stage's ``updatedAt`` moves on with it."""
    outline: fmt.SceneOutline | None = None
    """What the scene is meant to teach (its outline entry), when it changes with it (a Pro tool's new scene)."""
    by: str = ""
    """The Pro session that made this change (empty: a run, a browser or an older log): the course's history
    names it, and undoing that session finds its edits by it."""


@registry.upcaster("course.scene_set", 1)
def _scene_set_v1(data: dict[str, Any]) -> dict[str, Any]:
    old = data.get("scene") if isinstance(data.get("scene"), dict) else {}
    scene = legacy.scene_document(old)
    if scene is None:  # v1 wrote a scene's outline entry again before its content: nothing to play yet
        return {"scene": None, "position": data.get("position")}
    return {"scene": scene, "position": data.get("position"), "ready": old.get("status") == "ready",
            "media": old.get("media") or []}


@register
class CourseMediaSet(Event, tag="course.media_set"):
    """A media element of a scene changed (its asset is stored, or it failed or is disabled)."""

    scene_id: str
    media: SceneMedia


@register
class CourseSceneDeleted(Event, tag="course.scene_deleted"):
    scene_id: str
    by: str = ""
    """The Pro session that made this change (empty: a run, a browser or an older log): the course's history
    names it, and undoing that session finds its edits by it."""


@register
class CourseScenesReordered(Event, tag="course.scenes_reordered"):
    scene_ids: list[str]
    by: str = ""
    """The Pro session that made this change (empty: a run, a browser or an older log): the course's history
    names it, and undoing that session finds its edits by it."""


@register
class CourseUnlocked(Event, tag="course.unlocked"):
    run_id: str


@register
class CourseDeleted(Event, tag="course.deleted"):
    pass


@register
class CourseDocumentSet(Event, tag="course.document_set"):
    """The whole document, saved at once (OpenMAIC's ``PUT /documents/{id}``): it replaces the stage, the scenes
    and the outline."""

    document: fmt.Document


@register
class CourseStageSet(Event, tag="course.stage_set"):
    """The stage alone, saved (OpenMAIC's ``PUT /documents/{id}/stage``)."""

    stage: fmt.Stage


@register
class BrowserDocumentSet(Event, tag="course.browser_document_set"):
    """(Older logs.) A client saved the whole document; its JSON as it sent it."""

    document_id: str
    stage: dict[str, Any]
    scenes: list[dict[str, Any]]
    outline: Any = None


@register
class BrowserStageSet(Event, tag="course.browser_stage_set"):
    """(Older logs.) A client saved the document's stage alone."""

    stage: dict[str, Any]


@register
class BrowserSceneSet(Event, tag="course.browser_scene_set"):
    """(Older logs.) A client saved one scene (added when new)."""

    scene: dict[str, Any]


class CourseDocument(msgspec.Struct, frozen=True, kw_only=True):
    """A course stream folded: OpenMAIC's document (``stage``, ``scenes``) and what only this server keeps."""

    title: str = ""
    language: str = "en"
    requirement: str = ""
    stage: fmt.Stage | None = None
    """The stage as its writer gave it (a browser's save, a Pro edit); None while only generation wrote it, when
    :func:`openmaic.courses.document.document_of` builds it from the fields above."""
    language_directive: str = ""
    interactive: bool = False
    created_ms: int = 0
    updated_ms: int = 0
    outline_revision: int = 0
    outlines: dict[str, fmt.SceneOutline] = {}
    """Each scene's outline entry (what it is meant to teach), by scene id."""
    outline: Any = msgspec.UNSET
    """The document's own ``outline`` member, as a browser saved it (opaque)."""
    scenes: tuple[fmt.Scene, ...] = ()
    """The written scenes, in order."""
    ready: tuple[str, ...] = ()
    """The written scenes that can be played (ids, sorted: the fold's JSON must not depend on a set's order, so
    that a read model rebuilt from the log equals the live one byte for byte)."""
    pending: tuple[PendingScene, ...] = ()
    media: dict[str, SceneMedia] = {}
    """Each generated picture or video by its ref."""
    agents: tuple[fmt.AgentConfig, ...] = ()
    agent_ids: tuple[str, ...] = ()
    browser: bool = False
    """Saved by a browser (OpenMAIC's persistence routes): its document is the whole truth."""
    locked_by: str | None = None
    deleted: bool = False
    seq: int = 0
    stored_version: str | None = fmt.DSL_VERSION
    """The ``dslVersion`` the document was stored at by its last whole save: what this server writes
    (:data:`~openmaic.courses.format.DSL_VERSION`), a newer server's stamp (``course.document_set`` holds it as it
    was written), or None for a document an earlier server stored unstamped (``course.browser_document_set``).
    OpenMAIC's document contract reads it: a stale document is migrated on read and must be saved whole before a
    part of it is written, a newer one is never overwritten, a malformed one is not read."""

    def scene(self, scene_id: str) -> fmt.Scene | None:
        return next((s for s in self.scenes if s.id == scene_id), None)


@register
class CourseRestored(Event, tag="course.restored"):
    """An earlier version brought back as the newest one (nothing before it is rewritten): ``document`` is the
    course as it was folded at ``from_seq``. Media finished since stay finished (their assets exist)."""

    from_seq: int
    document: CourseDocument
    at_ms: int = 0


def _sorted(scenes: list[fmt.Scene]) -> tuple[fmt.Scene, ...]:
    return tuple(sorted(scenes, key=lambda s: s.order))


def _put_scene(doc: CourseDocument, scene: fmt.Scene, position: int | None) -> tuple[fmt.Scene, ...]:
    scenes = list(doc.scenes)
    at = next((i for i, s in enumerate(scenes) if s.id == scene.id), None)
    if at is not None:
        scenes[at] = scene
        return tuple(scenes)
    pending = next((p for p in doc.pending if p.id == scene.id), None)
    if pending is not None and scene.order != pending.order:
        scene = msgspec.structs.replace(scene, order=pending.order)
    elif pending is None and position is not None and not doc.browser:
        # A scene added after the outline (a Pro tool): placed at ``position``, the orders renumbered.
        at = len(scenes) if position is None else max(0, min(position, len(scenes)))
        scenes.insert(at, scene)
        return tuple(msgspec.structs.replace(s, order=i + 1) if s.order != i + 1 else s
                     for i, s in enumerate(scenes))
    return _sorted([*scenes, scene])


def _browser_scenes(raw: list[dict[str, Any]], stage_id: str) -> tuple[fmt.Scene, ...]:
    out = []
    for s in raw:
        scene = lenient_scene(s, stage_id=stage_id)
        if scene is not None:
            out.append(scene)
    return _sorted(out)


def _with(ids: tuple[str, ...], one: str) -> tuple[str, ...]:
    return ids if one in ids else tuple(sorted((*ids, one)))


def _without(ids: tuple[str, ...], one: str) -> tuple[str, ...]:
    return tuple(i for i in ids if i != one)


def _set_scene(doc: CourseDocument, scene: fmt.Scene, position: int | None, ready: bool,
               media: list[SceneMedia], seq: int, at_ms: int = 0) -> CourseDocument:
    known = dict(doc.media)
    for m in media:
        known.setdefault(m.element_id, m)
    doc = msgspec.structs.replace(doc, media=known)
    readiness = _with(doc.ready, scene.id) if ready else _without(doc.ready, scene.id)
    at = max(at_ms, int(scene.updatedAt) if isinstance(scene.updatedAt, int | float) else 0)
    return msgspec.structs.replace(
        doc, scenes=_put_scene(doc, scene, position), ready=readiness, updated_ms=max(doc.updated_ms, at),
        pending=tuple(p for p in doc.pending if p.id != scene.id), seq=seq,
    )


def evolve_course(doc: CourseDocument, event: Event, seq: int) -> CourseDocument:
    """Pure fold of one course event."""
    r = msgspec.structs.replace
    match event:
        case CourseCreated(title=t, language=lang, requirement=req, locked_by=lock, created_ms=at,
                           interactive=interactive):
            return r(doc, title=t, language=lang, requirement=req, locked_by=lock, created_ms=at, updated_ms=at,
                     interactive=interactive, seq=seq)
        case CourseRetitled(title=t):
            stage = r(doc.stage, name=t) if doc.stage is not None else None
            return r(doc, title=t, stage=stage, seq=seq)
        case CourseOutlineSet(legacy=True) if doc.browser:
            return r(doc, seq=seq)  # a translation of the browser's document, which the fold already holds
        case CourseOutlineSet(revision=rev, title=t, outlines=outlines, scene_ids=ids, language_directive=ld,
                              at_ms=at):
            written = {s.id for s in doc.scenes}
            media = dict(doc.media)
            for o in outlines:
                for m in o.mediaGenerations or []:
                    media.setdefault(m.elementId, SceneMedia(element_id=m.elementId, kind=m.type, prompt=m.prompt))
            pending = tuple(PendingScene(id=sid, title=o.title, type=o.type, order=i + 1)
                            for i, (o, sid) in enumerate(zip(outlines, ids)) if sid not in written)
            doc = r(doc, outline_revision=rev, title=t or doc.title, outlines=dict(zip(ids, outlines)), pending=pending,
                    media=media, language_directive=ld or doc.language_directive,
                    updated_ms=max(doc.updated_ms, at), seq=seq)
            for w in event.written:  # v1 only: see _outline_set_v1
                doc = _set_scene(doc, w.scene, None, w.ready, w.media, seq)
            return doc
        case CourseAgentsSet(legacy=True) if doc.browser:
            return r(doc, seq=seq)
        case CourseAgentsSet(agents=agents, agent_ids=ids):
            stage = doc.stage
            if stage is not None:
                stage = r(stage, generatedAgentConfigs=list(agents) if agents else msgspec.UNSET,
                          agentIds=list(ids) if ids else msgspec.UNSET)
            return r(doc, agents=tuple(agents), agent_ids=tuple(ids), stage=stage, seq=seq)
        case CourseSceneSet(scene=scene, position=pos, ready=ready, media=media):
            if scene is None:
                return r(doc, seq=seq)
            if event.outline is not None:
                doc = r(doc, outlines={**doc.outlines, scene.id: event.outline})
            return _set_scene(doc, scene, pos, ready, media, seq, event.at_ms)
        case CourseMediaSet(media=media):
            # Scenes keep their placeholders (the ref is how a later retry finds the element again); the media are
            # put in their places when the document is read (openmaic.courses.document).
            return r(doc, media={**doc.media, media.element_id: media}, seq=seq)
        case CourseSceneDeleted(scene_id=sid):
            return r(doc, scenes=tuple(s for s in doc.scenes if s.id != sid), ready=_without(doc.ready, sid),
                     pending=tuple(p for p in doc.pending if p.id != sid),
                     outlines={k: v for k, v in doc.outlines.items() if k != sid}, seq=seq)
        case CourseScenesReordered(scene_ids=ids):
            by_id = {s.id: s for s in doc.scenes}
            ordered = [by_id[i] for i in ids if i in by_id]
            ordered += [s for s in doc.scenes if s.id not in set(ids)]
            return r(doc, scenes=tuple(msgspec.structs.replace(s, order=i + 1) for i, s in enumerate(ordered)),
                     seq=seq)
        case CourseUnlocked(run_id=run_id):
            return r(doc, locked_by=None if doc.locked_by == run_id else doc.locked_by, seq=seq)
        case CourseDeleted():
            return r(doc, deleted=True, seq=seq)
        case CourseRestored(document=old, at_ms=at):
            done = {k: m for k, m in doc.media.items() if m.status == "done"}
            return r(old, media={**old.media, **done}, locked_by=doc.locked_by, deleted=doc.deleted,
                     updated_ms=max(doc.updated_ms, at), seq=seq)
        case CourseDocumentSet(document=d):
            return r(doc, stage=d.stage, title=d.stage.name, scenes=_sorted(list(d.scenes)),
                     ready=tuple(sorted({s.id for s in d.scenes})), pending=(), outline=d.outline, browser=True,
                     agents=tuple(d.stage.generatedAgentConfigs or ()), agent_ids=tuple(d.stage.agentIds or ()),
                     updated_ms=int(d.stage.updatedAt), stored_version=d.dslVersion, seq=seq)
        case CourseStageSet(stage=stage):
            return r(doc, stage=stage, title=stage.name, agents=tuple(stage.generatedAgentConfigs or ()),
                     agent_ids=tuple(stage.agentIds or ()), updated_ms=int(stage.updatedAt), seq=seq)
        case BrowserDocumentSet(stage=stage, scenes=scenes, outline=outline):
            st = lenient_stage(stage)
            sid = st.id if st is not None else ""
            found = _browser_scenes(scenes, sid)
            return r(doc, stage=st, title=st.name if st is not None else doc.title, scenes=found,
                     ready=tuple(sorted({s.id for s in found})), pending=(),
                     outline=outline if outline is not None else msgspec.UNSET, browser=True,
                     agents=tuple(st.generatedAgentConfigs or ()) if st is not None else doc.agents,
                     stored_version=None, seq=seq)  # stored as the client sent it, without its stamp
        case BrowserStageSet(stage=stage):
            st = lenient_stage(stage)
            return r(doc, stage=st or doc.stage, title=st.name if st is not None else doc.title, seq=seq)
        case BrowserSceneSet(scene=raw):
            sid = doc.stage.id if doc.stage is not None else ""
            scene = lenient_scene(raw, stage_id=sid)
            if scene is None:
                return r(doc, seq=seq)
            return r(doc, scenes=_put_scene(doc, scene, None), ready=_with(doc.ready, scene.id), seq=seq)
        case _:
            return r(doc, seq=seq)
