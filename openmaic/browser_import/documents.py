"""OpenMAIC's course documents (``/api/persistence/documents/…``) stored as this server's courses.

A browser client of OpenMAIC 1.2 (its app, and its importer of a 1.1.x browser's data) writes a course as a
*document*: ``{stage, scenes, outline?}`` in the ``@openmaic/dsl`` model, saved whole (``PUT …/documents/:id``) or
a part at a time (``…/stage``, ``…/scenes/:sceneId``), and reads it back as it wrote it. Here a document is a
course stream (kind ``course``) holding two things, appended together:

* what the client wrote, as it wrote it (``course.browser_document_set`` / ``_stage_set`` / ``_scene_set``: the
  JSON objects, untouched), which is what a read answers, so a client's read-modify-write never loses a field
  this server does not know;
* the course as this server keeps it (``course.created`` once, then ``course.outline_set`` with every scene
  translated by :func:`openmaic.browser_import.translate.translate_scene`), which the library cards, the
  classroom page (``/classroom/{courseId}``) and the workbench read like any other course. A slide's picture or
  video element whose ``src`` names one of the owner's assets (``POST /api/persistence/assets``) is a ``done``
  media element showing that asset; any other reference is a ``failed`` placeholder until a later write names an
  asset. A speech action's ``audioId`` naming an asset is the scene's narration.

**Ids are the owner's.** A document id is chosen by the client; the course behind it is ``course-`` + 16
base64url characters of ``sha256(owner, documentId)`` at its first write, found again through
``browser_documents`` (migration 0015). One owner's ``stage-1`` is not another's: another owner's id reads as a
missing one (404 ``DOCUMENT_NOT_FOUND``), and writing it creates the writer's own course. A claim moves the rows
with the rest of the owner's work. A course deleted after it was written stays deleted: writing its id again
answers 404 ``DOCUMENT_NOT_FOUND`` (OpenMAIC's tombstone rule, which its importer reads as "deleted on the
server").

A course a 1.1.x browser's importer creates (its request carries the browser's binding) is also recorded on the
binding's stream (``legacy_import.stage_imported``), so the history says which course came from which browser.

**Idempotent.** A write that would not change what is stored appends nothing: the same document saved twice, a
scene saved as it is, an importer retrying after a lost answer. Each write is decided and appended under the
owner's persistence lock (:mod:`openmaic.browser_import.store`).
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from openmaic import errors
from openmaic.browser_import.events import LegacyStageImported
from openmaic.browser_import.records import LegacyScene
from openmaic.browser_import.service import binding_stream
from openmaic.browser_import.store import Writer, fold_on, writing
from openmaic.browser_import.translate import ImportedAsset, canvas_elements, course_language, translate_scene
from openmaic.courses.events import (
    CourseAgentsSet, CourseCreated, CourseDocument, CourseOutlineSet, Scene, SceneMedia, evolve_course,
)  # fmt: skip
from openmaic.courses.schema import ELEMENT_ID, AgentProfile
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.events.types import Event, register
from openmaic.store.database import Connection
from openmaic.store.queries import Q

__all__ = [
    "BrowserDocumentSet", "BrowserSceneSet", "BrowserStageSet", "DocumentNotFound", "MAX_SCENES", "SceneNotFound",
    "StoredDocument", "document_course_id", "find_document", "put_document", "put_scene", "put_stage",
    "read_document",
]  # fmt: skip

MAX_SCENES = 200
"""The most scenes one document may hold."""
MAX_ID = 200
SCENE_TYPES = ("slide", "quiz", "interactive", "pbl")


class DocumentNotFound(errors.NotFound):
    """No such document (or it is another owner's, or it was deleted)."""

    error_code = "DOCUMENT_NOT_FOUND"


class SceneNotFound(errors.NotFound):
    """The document has no such scene."""

    error_code = "SCENE_NOT_FOUND"


@register
class BrowserDocumentSet(Event, tag="course.browser_document_set"):
    """A client saved the whole document (its stage, scenes and outline, as it sent them)."""

    document_id: str
    stage: dict[str, Any]
    scenes: list[dict[str, Any]]
    outline: Any = None


@register
class BrowserStageSet(Event, tag="course.browser_stage_set"):
    """A client saved the document's stage alone."""

    stage: dict[str, Any]


@register
class BrowserSceneSet(Event, tag="course.browser_scene_set"):
    """A client saved one scene (added when new)."""

    scene: dict[str, Any]


class StoredDocument(msgspec.Struct, frozen=True, kw_only=True):
    """A course stream folded: the document as its client wrote it, and the course as this server keeps it."""

    document_id: str = ""
    stage: dict[str, Any] | None = None
    scenes: tuple[dict[str, Any], ...] = ()
    outline: Any = None
    course: CourseDocument = CourseDocument()

    @property
    def exists(self) -> bool:
        return self.stage is not None and not self.course.deleted

    def wire(self) -> dict[str, Any]:
        """The document as a client reads it: ``{stage, scenes (by order), outline?}``."""
        scenes = sorted(self.scenes, key=lambda s: _order(s.get("order")))
        out: dict[str, Any] = {"stage": self.stage, "scenes": scenes}
        if self.outline is not None:
            out["outline"] = self.outline
        return out


def _order(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def evolve_document(doc: StoredDocument, event: Event, seq: int) -> StoredDocument:
    """Pure fold of one course event into a :class:`StoredDocument`."""
    r = msgspec.structs.replace
    match event:
        case BrowserDocumentSet(document_id=did, stage=stage, scenes=scenes, outline=outline):
            doc = r(doc, document_id=did, stage=stage, scenes=tuple(scenes), outline=outline)
        case BrowserStageSet(stage=stage):
            doc = r(doc, stage=stage)
        case BrowserSceneSet(scene=scene):
            known = [s for s in doc.scenes if s.get("id") != scene.get("id")]
            at = next((i for i, s in enumerate(doc.scenes) if s.get("id") == scene.get("id")), len(known))
            doc = r(doc, scenes=(*known[:at], scene, *known[at:]))
    return r(doc, course=evolve_course(doc.course, event, seq))


def document_course_id(owner: str, document_id: str) -> str:
    digest = hashlib.sha256(f"openmaic.document\x1f{owner}\x1f{document_id}".encode()).digest()
    return "course-" + base64.urlsafe_b64encode(digest).decode()[:16]


# -- validation: what a stored document must be (OpenMAIC's storage checks the same before it writes) -----------


def _id(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_ID or value in (".", ".."):
        raise errors.InvalidInput(f"{path} must be a non-empty string of at most {MAX_ID} characters", path=path)
    return value


def check_document_id(document_id: str) -> str:
    return _id(document_id, "id")


def _check_stage(document_id: str, stage: dict[str, Any], path: str = "stage") -> None:
    if stage.get("id") != document_id:
        raise errors.InvalidInput(f"{path}.id must be the document's id ({document_id!r})", path=f"{path}.id")
    name = stage.get("name", "")
    if not isinstance(name, str) or len(name) > 500:
        raise errors.InvalidInput(f"{path}.name must be a string of at most 500 characters", path=f"{path}.name")


def _check_scene(document_id: str, scene: dict[str, Any], path: str) -> LegacyScene:
    _id(scene.get("id"), f"{path}.id")
    if scene.get("stageId") != document_id:
        raise errors.InvalidInput(f"{path}.stageId must be the document's id ({document_id!r})",
                                  path=f"{path}.stageId")
    order = scene.get("order")
    if not isinstance(order, int | float) or isinstance(order, bool) or not math.isfinite(order):
        raise errors.InvalidInput(f"{path}.order must be a finite number", path=f"{path}.order")
    if scene.get("type") not in SCENE_TYPES:
        raise errors.InvalidInput(f"{path}.type must be one of {', '.join(SCENE_TYPES)}", path=f"{path}.type")
    try:
        return msgspec.convert(scene, LegacyScene)
    except msgspec.ValidationError as exc:
        raise errors.InvalidInput(f"{path}: {exc}", path=path) from None


def _check_scenes(document_id: str, scenes: list[dict[str, Any]]) -> None:
    if len(scenes) > MAX_SCENES:
        raise errors.InvalidInput(f"a document holds at most {MAX_SCENES} scenes", path="scenes")
    seen: set[str] = set()
    for i, s in enumerate(scenes):
        _check_scene(document_id, s, f"scenes[{i}]")
        if s["id"] in seen:
            raise errors.InvalidInput(f"scene id {s['id']!r} appears twice", path=f"scenes[{i}].id")
        seen.add(s["id"])


# -- translation into this server's course ----------------------------------------------------------------------


def _ref(value: Any) -> str:
    """An asset reference as a document holds it (an asset id, possibly written ``asset:<id>``)."""
    return value.removeprefix("asset://").removeprefix("asset:") if isinstance(value, str) else ""


def _references(scenes: tuple[dict[str, Any], ...]) -> set[str]:
    refs: set[str] = set()
    for raw in scenes:
        content = raw.get("content")
        canvas = content.get("canvas") if isinstance(content, Mapping) else None
        for e in canvas.get("elements") or [] if isinstance(canvas, Mapping) else []:
            if isinstance(e, Mapping):
                refs |= {_ref(e.get("src")), _ref(e.get("poster"))}
        for a in raw.get("actions") or []:
            if isinstance(a, Mapping):
                refs.add(_ref(a.get("audioId")))
    refs.discard("")
    return refs


def _scene_id(course_id: str, scene_id: str) -> str:
    return "scene-" + hashlib.sha256(f"{course_id}\x1f{scene_id}".encode()).hexdigest()[:16]


def _translate(course_id: str, doc: StoredDocument, owned: set[str]) -> tuple[CourseCreated, list[Scene]]:
    """The course of a document: its creation and its scenes (media pointing at the owner's assets)."""
    stage = doc.stage or {}
    dropped: dict[str, int] = {}
    description = stage.get("description") if isinstance(stage.get("description"), str) else ""

    def media_of(scene: LegacyScene, dropped: dict[str, int]) -> tuple[list[SceneMedia], list[ImportedAsset]]:
        out: list[SceneMedia] = []
        for e in canvas_elements(scene):
            kind = e.get("type")
            if kind not in ("image", "video"):
                continue
            element = str(e.get("id") or "")
            if not ELEMENT_ID.match(element):
                element = "el-" + hashlib.sha256(f"{scene.id}\x1f{element}".encode()).hexdigest()[:16]
            src, poster = _ref(e.get("src")), _ref(e.get("poster"))
            if src in owned:
                out.append(SceneMedia(element_id=element, kind=kind, prompt="", status="done", asset_id=src,
                                      poster_asset_id=poster if poster in owned else None))
            else:
                out.append(SceneMedia(element_id=element, kind=kind, prompt="", status="failed"))
        return out, []

    def narration_of(clip: str) -> tuple[str | None, list[ImportedAsset]]:
        return (_ref(clip) if _ref(clip) in owned else None), []

    scenes: list[Scene] = []
    for raw in sorted(doc.scenes, key=lambda s: _order(s.get("order"))):
        scene, _ = translate_scene(
            msgspec.convert(raw, LegacyScene),
            scene_id=_scene_id(course_id, raw["id"]),
            goal=description.strip(), number=len(scenes) + 1, media_of=media_of, narration_of=narration_of,
            dropped=dropped)  # fmt: skip
        scenes.append(scene)
    name = stage.get("name") if isinstance(stage.get("name"), str) else ""
    language = stage.get("language") or stage.get("languageDirective")
    created = CourseCreated(title=name.strip() or "Untitled course", requirement=description[:2000],
                            language=course_language(language if isinstance(language, str) else None))
    return created, scenes


MAX_AGENTS = 12
_ROLES: dict[Any, Literal["teacher", "assistant", "classmate"]] = {"teacher": "teacher", "assistant": "assistant"}


def _agents(stage: dict[str, Any]) -> list[AgentProfile]:
    """The course's agents from the stage's roster (``generatedAgentConfigs``): OpenMAIC's ``student`` (and any
    other role) is a classmate here."""
    roster = stage.get("generatedAgentConfigs")
    out: list[AgentProfile] = []
    for a in roster if isinstance(roster, list) else []:
        if not isinstance(a, Mapping) or not isinstance(a.get("id"), str) or not isinstance(a.get("name"), str):
            continue
        persona = a.get("persona") if isinstance(a.get("persona"), str) else ""
        role = _ROLES.get(a.get("role"), "classmate")
        out.append(AgentProfile(id=a["id"][:MAX_ID], name=a["name"][:200], role=role,
                                persona=persona[:2000]))
    return out[:MAX_AGENTS]


# -- reads and writes -------------------------------------------------------------------------------------------


async def find_document(conn: Connection | Any, owner: str, document_id: str) -> str | None:
    """The course of ``owner``'s document ``document_id`` (deleted or not), or None."""
    return await conn.fetchval(Q.browser_document_find, owner, document_id)


async def _load(conn: Connection | None, log: EventLog, course_id: str | None) -> tuple[StoredDocument, int]:
    if course_id is None:
        return StoredDocument(), 0
    return await fold_on(conn, log, course_id, StoredDocument(), evolve_document)


async def read_document(log: EventLog, owner: str, document_id: str) -> StoredDocument:
    """``owner``'s document; DocumentNotFound when it is missing, deleted or another owner's."""
    doc, _ = await _load(None, log, await find_document(log.db, owner, document_id))
    if not doc.exists:
        raise DocumentNotFound(f"no document {document_id!r}", id=document_id)
    return doc


def _same(a: StoredDocument, b: StoredDocument) -> bool:
    """Whether two folds hold the same document (scenes compared in their order, not in the order sent)."""
    return (a.stage, a.outline, a.wire()["scenes"]) == (b.stage, b.outline, b.wire()["scenes"])


async def _commit(w: Writer, owner: str, document_id: str, course_id: str, before: StoredDocument, head: int,
                  written: Event, after: StoredDocument, browser: str | None = None) -> bool:
    """Append ``written`` and the course it makes, unless nothing changes; True when something was appended."""
    if _same(after, before):
        return False  # the same document again: nothing to record
    refs = _references(after.scenes)
    owned = set(await w.conn.fetch_values(Q.assets_of_owner_among, owner, sorted(refs))) if refs else set()
    created, scenes = _translate(course_id, after, owned)
    events: list[Event] = []
    if head == 0:
        events.append(created)
        await w.conn.execute(Q.browser_document_insert, course_id, owner, document_id, created.title)
    elif created.title != before.course.title:
        await w.conn.execute(Q.browser_document_retitle, course_id, created.title)
    events.append(written)
    if head == 0 or scenes != list(before.course.scenes) or created.title != before.course.title:
        events.append(CourseOutlineSet(revision=before.course.outline_revision + 1, title=created.title,
                                       scenes=scenes))
    agents = _agents(after.stage or {})
    if agents != list(before.course.agents):
        events.append(CourseAgentsSet(agents=agents))
    batches = [StreamAppend(stream_id=course_id, events=events, expected_seq=head,
                            create=NewStream("course", owner) if head == 0 else None)]
    if head == 0 and browser is not None:
        # Created by a 1.1.x browser's importer: its binding's stream says which course came from it.
        batches.append(StreamAppend(
            stream_id=binding_stream(browser), command_id=f"document:{course_id}",
            events=[LegacyStageImported(stage_id=document_id, course_id=course_id, scenes=len(scenes))]))
    await w.append(*batches)
    return True


async def put_document(log: EventLog, owner: str, document_id: str, stage: dict[str, Any],
                       scenes: list[dict[str, Any]], outline: Any, *, browser: str | None = None) -> bool:
    """Save ``owner``'s whole document (creating its course at the first save; by the importer of ``browser``,
    bound to ``owner``, when given); True when it changed."""
    check_document_id(document_id)
    _check_stage(document_id, stage)
    _check_scenes(document_id, scenes)
    async with writing(log, owner) as w:
        course_id = await find_document(w.conn, owner, document_id)
        before, head = await _load(w.conn, log, course_id)
        if course_id is not None and before.course.deleted:
            raise DocumentNotFound(f"document {document_id!r} was deleted", id=document_id)
        course_id = course_id or document_course_id(owner, document_id)
        event = BrowserDocumentSet(document_id=document_id, stage=stage, scenes=scenes, outline=outline)
        return await _commit(w, owner, document_id, course_id, before, head, event,
                             evolve_document(before, event, head + 1), browser)


async def _put_part(log: EventLog, owner: str, document_id: str, event: Event) -> bool:
    async with writing(log, owner) as w:
        course_id = await find_document(w.conn, owner, document_id)
        before, head = await _load(w.conn, log, course_id)
        if course_id is None or not before.exists:
            raise DocumentNotFound(f"no document {document_id!r}", id=document_id)
        after = evolve_document(before, event, head + 1)
        if len(after.scenes) > MAX_SCENES:
            raise errors.InvalidInput(f"a document holds at most {MAX_SCENES} scenes", path="id")
        return await _commit(w, owner, document_id, course_id, before, head, event, after)


async def put_stage(log: EventLog, owner: str, document_id: str, stage: dict[str, Any]) -> bool:
    """Save the stage of ``owner``'s existing document; True when it changed."""
    _check_stage(check_document_id(document_id), stage, path="stage")
    return await _put_part(log, owner, document_id, BrowserStageSet(stage=stage))


async def put_scene(log: EventLog, owner: str, document_id: str, scene_id: str, scene: dict[str, Any]) -> bool:
    """Save (or add) one scene of ``owner``'s existing document; True when it changed."""
    check_document_id(document_id)
    _check_scene(document_id, scene, "scene")
    if scene["id"] != scene_id:
        raise errors.InvalidInput(f"scene.id must be the scene id of the path ({scene_id!r})", path="scene.id")
    return await _put_part(log, owner, document_id, BrowserSceneSet(scene=scene))
