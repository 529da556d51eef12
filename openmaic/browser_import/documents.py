"""OpenMAIC's course documents (``/api/persistence/documents/…``): a document is a course, and a course is a
document.

A browser client of OpenMAIC writes a course as a *document*: ``{stage, scenes, outline?, dslVersion?}`` saved
whole (``PUT …/documents/:id``) or a part at a time (``…/stage``, ``…/scenes/:sceneId``). Every write goes
through the course format's one validator (:mod:`openmaic.courses.format`: OpenMAIC's validators and storage gate,
strict typing, JSON safety, text HTML sanitized): a refused write is a 400 ``VALIDATION_FAILED`` naming the path,
and nothing is stored. What is stored is the course stream's ``course.document_set`` / ``course.stage_set`` /
``course.scene_set``, and what a read answers is the course's document
(:func:`openmaic.courses.document.document_of`) — the same one the classroom, the Pro tools and replay read. A
generated course is a document too: its id is its course id, and it can be read here at once and written once its
run no longer holds it (a course stays read-only while its run is in progress: 409 ``COURSE_LOCKED``).

**Ids are the owner's.** A document id is chosen by the client; the course behind a browser's document is
``course-`` + 16 base64url characters of ``sha256(owner, documentId)`` at its first write, found again through
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
import time
from typing import Any

import msgspec

from openmaic import errors
from openmaic.browser_import.events import LegacyStageImported
from openmaic.browser_import.service import binding_stream
from openmaic.browser_import.store import Writer, fold_on, writing
from openmaic.courses import format as fmt
from openmaic.courses.document import document_of, stage_of
from openmaic.courses.events import (
    CourseCreated, CourseDocument, CourseDocumentSet, CourseSceneSet, CourseStageSet, evolve_course,
)  # fmt: skip
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.events.types import Event
from openmaic.store.database import Connection
from openmaic.store.queries import Q

__all__ = [
    "CourseLocked", "DocumentNotFound", "MAX_SCENES", "SceneNotFound", "document_course_id", "find_document",
    "put_document", "put_scene", "put_stage", "read_document",
]  # fmt: skip

MAX_SCENES = 200
"""The most scenes one document may hold."""


class DocumentNotFound(errors.NotFound):
    """No such document (or it is another owner's, or it was deleted)."""

    error_code = "DOCUMENT_NOT_FOUND"


class SceneNotFound(errors.NotFound):
    """The document has no such scene."""

    error_code = "SCENE_NOT_FOUND"


class CourseLocked(errors.Conflict):
    """A run is still writing the course: it is read-only until the run completes."""

    error_code = "COURSE_LOCKED"


def document_course_id(owner: str, document_id: str) -> str:
    digest = hashlib.sha256(f"openmaic.document\x1f{owner}\x1f{document_id}".encode()).digest()
    return "course-" + base64.urlsafe_b64encode(digest).decode()[:16]


async def find_document(conn: Connection | Any, owner: str, document_id: str) -> str | None:
    """The course of ``owner``'s document ``document_id`` (deleted or not), or None: a document a browser saved,
    else the owner's course of that id (a generated one)."""
    found = await conn.fetchval(Q.browser_document_find, owner, document_id)
    if found is not None:
        return found  # type: ignore[no-any-return]
    row = await conn.fetchrow(Q.stream, document_id)
    if row is not None and row["kind"] == "course" and row["owner_id"] == owner:
        return document_id
    return None


async def _load(conn: Connection | None, log: EventLog, course_id: str | None) -> tuple[CourseDocument, int]:
    if course_id is None:
        return CourseDocument(), 0
    return await fold_on(conn, log, course_id, CourseDocument(), evolve_course)


async def read_document(log: EventLog, owner: str, document_id: str) -> fmt.Document:
    """``owner``'s document; DocumentNotFound when it is missing, deleted or another owner's."""
    course_id = await find_document(log.db, owner, document_id)
    doc, head = await _load(None, log, course_id)
    if course_id is None or head == 0 or doc.deleted:
        raise DocumentNotFound(f"no document {document_id!r}", id=document_id)
    return document_of(course_id, doc)


def _now_ms() -> int:
    return int(time.time() * 1000)


async def _existing(w: Writer, owner: str, document_id: str) -> tuple[str, CourseDocument, int]:
    """The course of an existing, writable document (DocumentNotFound, CourseLocked)."""
    course_id = await find_document(w.conn, owner, document_id)
    doc, head = await _load(w.conn, w.log, course_id)
    if course_id is None or head == 0 or doc.deleted:
        raise DocumentNotFound(f"no document {document_id!r}", id=document_id)
    _writable(doc, document_id)
    return course_id, doc, head


def _writable(doc: CourseDocument, document_id: str) -> None:
    if doc.locked_by is not None:
        raise CourseLocked(f"document {document_id!r} is being generated by run {doc.locked_by}; it can be written "
                           "once the run completes", id=document_id)


async def put_document(log: EventLog, owner: str, document_id: str, body: Any, *,
                       browser: str | None = None) -> bool:
    """Save ``owner``'s whole document (creating its course at the first save; by the importer of ``browser``,
    bound to ``owner``, when given); True when it changed."""
    document = fmt.decode_document(body, stage_id=document_id)
    if len(document.scenes) > MAX_SCENES:
        raise fmt.FormatInvalid([fmt.Problem("/scenes", f"a document holds at most {MAX_SCENES} scenes")])
    async with writing(log, owner) as w:
        course_id = await find_document(w.conn, owner, document_id)
        before, head = await _load(w.conn, log, course_id)
        if course_id is not None and before.deleted:
            raise DocumentNotFound(f"document {document_id!r} was deleted", id=document_id)
        if head:
            _writable(before, document_id)
            if document_of(course_id, before, ready_only=False) == document:  # type: ignore[arg-type]
                return False  # the same document again: nothing to record
        course_id = course_id or document_course_id(owner, document_id)
        events: list[Event] = []
        title = document.stage.name.strip() or "Untitled course"
        if head == 0:
            events.append(CourseCreated(title=title, requirement=(document.stage.description or "")[:2000],
                                        created_ms=int(document.stage.createdAt)))
            await w.conn.execute(Q.browser_document_insert, course_id, owner, document_id, title)
        elif title != before.title:
            await w.conn.execute(Q.browser_document_retitle, course_id, title)
        events.append(CourseDocumentSet(document=document))
        batches = [StreamAppend(stream_id=course_id, events=events, expected_seq=head,
                                create=NewStream("course", owner) if head == 0 else None)]
        if head == 0 and browser is not None:
            # Created by a 1.1.x browser's importer: its binding's stream says which course came from it.
            batches.append(StreamAppend(
                stream_id=binding_stream(browser), command_id=f"document:{course_id}",
                events=[LegacyStageImported(stage_id=document_id, course_id=course_id, scenes=len(document.scenes))]))
        await w.append(*batches)
        return True


async def put_stage(log: EventLog, owner: str, document_id: str, body: Any) -> bool:
    """Save the stage of ``owner``'s existing document; True when it changed."""
    stage = fmt.decode_stage(body)
    if stage.id != document_id:
        raise fmt.FormatInvalid([fmt.Problem("/id", f"the stage's id must be the document's id ({document_id!r})")])
    async with writing(log, owner) as w:
        course_id, doc, head = await _existing(w, owner, document_id)
        if stage_of(course_id, doc) == stage:
            return False
        if stage.name.strip() and stage.name != doc.title:
            await w.conn.execute(Q.browser_document_retitle, course_id, stage.name)
        await w.append(StreamAppend(stream_id=course_id, events=[CourseStageSet(stage=stage)], expected_seq=head))
        return True


async def put_scene(log: EventLog, owner: str, document_id: str, scene_id: str, body: Any) -> bool:
    """Save (or add) one scene of ``owner``'s existing document; True when it changed."""
    scene = fmt.decode_scene(body, stage_id=document_id, scene_id=scene_id)
    async with writing(log, owner) as w:
        course_id, doc, head = await _existing(w, owner, document_id)
        if doc.scene(scene_id) == scene and scene_id in doc.ready:
            return False
        if doc.scene(scene_id) is None and len(doc.scenes) >= MAX_SCENES:
            raise fmt.FormatInvalid([fmt.Problem("/id", f"a document holds at most {MAX_SCENES} scenes")])
        event = CourseSceneSet(scene=scene, ready=True, at_ms=_now_ms())
        await w.append(StreamAppend(stream_id=course_id, events=[event], expected_seq=head))
        return True


def scene_of(document: fmt.Document, document_id: str, scene_id: str) -> fmt.Scene:
    """A scene of a document read with :func:`read_document` (SceneNotFound when it has none of that id)."""
    scene = next((s for s in document.scenes if s.id == scene_id), None)
    if scene is None:
        raise SceneNotFound(f"document {document_id!r} has no scene {scene_id!r}", id=scene_id)
    return scene


def encode(document: fmt.Document) -> Any:
    return msgspec.to_builtins(document)
