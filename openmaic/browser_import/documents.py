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
import logging
import time
import weakref
from typing import Any

import msgspec
import trio

from openmaic import errors
from openmaic.browser_import.events import LegacyStageImported
from openmaic.browser_import.service import binding_stream
from openmaic.browser_import.store import Writer, fold_cached, writing
from openmaic.courses import format as fmt
from openmaic.courses.document import document_of, stage_of
from openmaic.courses.events import (
    CourseCreated, CourseDeleted, CourseDocument, CourseDocumentSet, CourseSceneDeleted, CourseSceneSet,
    CourseStageSet, evolve_course,
)  # fmt: skip
from openmaic.events.fold_cache import FoldCache
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.events.types import Event
from openmaic.quotas import QuotaFull
from openmaic.store.database import Connection
from openmaic.store.queries import Q

__all__ = [
    "CourseLocked", "DocumentNotFound", "DocumentSummary", "DocumentUnreadable", "FutureVersion", "MAX_SCENES",
    "SceneNotFound", "StaleDocument", "delete_document", "delete_scene", "document_course_id", "find_document",
    "list_documents", "missing", "put_document", "put_scene", "put_stage", "read_document", "stored_stamp",
]  # fmt: skip

MAX_SCENES = 200
"""The most scenes one document may hold."""

logger = logging.getLogger("openmaic.browser_import")


class DocumentNotFound(errors.NotFound):
    """No such document (or it is another owner's, or it was deleted)."""

    error_code = "DOCUMENT_NOT_FOUND"


class SceneNotFound(errors.NotFound):
    """The document has no such scene."""

    error_code = "SCENE_NOT_FOUND"


class FutureVersion(errors.Conflict):
    """The document was written by a newer OpenMAIC than this server reads: it is never downgraded."""

    error_code = "FUTURE_VERSION"


class StaleDocument(errors.InvalidInput):
    """The document is stored at an older DSL version: load it and save it whole before writing a part of it."""

    code = "stale_document"
    error_code = "VALIDATION_FAILED"


class DocumentUnreadable(errors.OpenMaicError):
    """The document's stored version stamp is malformed or has no migration path: it cannot be read or written
    (it can be deleted)."""

    code = "document_unreadable"


def _quoted(value: str | None) -> str:
    return "undefined" if value is None else msgspec.json.encode(value).decode()


def stored_stamp(doc: CourseDocument, document_id: str) -> str:
    """How the stored document's stamp reads: ``current``, ``stale`` (older: migrated on read) or ``future``
    (newer: kept as it is). A malformed stamp, or one the migration ladder has no path from, raises
    :class:`DocumentUnreadable` (the server log names the document)."""
    version = doc.stored_version
    if version == fmt.DSL_VERSION:
        return "current"
    try:
        fmt.migrate({} if version is None else {"dslVersion": version})
        future = version is not None and fmt.is_future(version)
    except fmt.FormatInvalid as exc:
        logger.warning("document %r is stored at DSL version %s, which cannot be read (%s); only deleting it works",
                    document_id, _quoted(version), exc.problems[0].message)
        raise DocumentUnreadable(f"@openmaic/storage: document {_quoted(document_id)} is stored at DSL version "
                                 f"{_quoted(version)}, which cannot be migrated", stageId=document_id) from None
    return "future" if future else "stale"


def _current_for(doc: CourseDocument, document_id: str, operation: str) -> None:
    """The guard of a part write (``putStage``, ``putScene``, ``deleteScene``): the stored document must be at
    this server's DSL version. A stale one is first loaded and saved whole; a newer one is never downgraded."""
    stamp = stored_stamp(doc, document_id)
    if stamp == "current":
        return
    where = f"{operation} {'from' if operation == 'deleteScene' else 'into'} document {_quoted(document_id)} at " \
            f"DSL version {_quoted(doc.stored_version)}"
    if stamp == "future":
        raise FutureVersion(f"@openmaic/storage: cannot {where} — it was written by a newer OpenMAIC than this "
                            f"server's {fmt.DSL_VERSION}", stageId=document_id, storedVersion=doc.stored_version)
    raise StaleDocument(f"@openmaic/storage: cannot {where} — load and save it to bring it to {fmt.DSL_VERSION} "
                        "first", stageId=document_id)


def missing(document_id: str) -> DocumentNotFound:
    """The refusal of a missing document, worded as OpenMAIC's storage words it (its clients match the words)."""
    return DocumentNotFound(f"@openmaic/storage: missing document {msgspec.json.encode(document_id).decode()}")


class DocumentQuotaFull(QuotaFull):
    """Your saved documents take as many bytes as they may (limits.document_bytes_per_owner)."""


_ENCODE = msgspec.json.Encoder().encode


async def _charge(w: Writer, owner: str, course_id: str, size: int, limit: int | None, *, delta: bool = False) -> None:
    """Record what a browser document takes (``size`` bytes, or ``size`` more with ``delta``), refusing it when the
    owner's documents would pass ``limit``. A generated course (no document row) is not counted. Under the owner's
    persistence lock, so two saves cannot both fit the last bytes."""
    row = await w.conn.fetchrow(Q.browser_documents_bytes, owner, course_id)
    if row["own"] is None:
        return
    own, used = int(row["own"]), int(row["used"])
    after = own + size if delta else size
    if limit is not None and after > own and used - own + after > limit:
        raise DocumentQuotaFull(
            f"your documents take {used:,} bytes and this one would take {after:,}; at most {limit:,} are allowed "
            "(limits.document_bytes_per_owner); delete some (DELETE /api/persistence/documents/{id}) first",
            key="limits.document_bytes_per_owner", limit=limit)
    await w.conn.execute(Q.browser_document_set_bytes, course_id, max(after, 0))


class CourseLocked(errors.Conflict):
    """A run is still writing the course: it is read-only until the run completes."""

    error_code = "COURSE_LOCKED"


def document_course_id(owner: str, document_id: str) -> str:
    digest = hashlib.sha256(f"openmaic.document\x1f{owner}\x1f{document_id}".encode()).digest()
    return "course-" + base64.urlsafe_b64encode(digest).decode()[:16]


TOMBSTONE = "\x1fdeleted\x1f"
"""The prefix a deleted document's id is filed under (see ``browser_document_bury``)."""


async def find_document(conn: Connection | Any, owner: str, document_id: str, *, buried: bool = False) -> str | None:
    """The course of ``owner``'s document ``document_id``, or None: a document a browser saved (``buried``: also
    one deleted since), else the owner's course of that id (a generated one, deleted or not)."""
    found = await conn.fetchval(Q.browser_document_find, owner, document_id)
    if found is None and buried:
        found = await conn.fetchval(Q.browser_document_find, owner, TOMBSTONE + document_id)
    if found is not None:
        return found  # type: ignore[no-any-return]
    row = await conn.fetchrow(Q.stream, document_id)
    if row is not None and row["kind"] == "course" and row["owner_id"] == owner:
        return document_id
    return None


FOLD_CACHE_BYTES = 8 * 1024 * 1024
"""What the courses this process folded last may take, per event log, counted as their JSON's bytes (in memory,
as structs, a 20-scene course takes about twice its JSON); a course over a quarter of it is not kept."""

_folds: weakref.WeakKeyDictionary[EventLog, FoldCache[CourseDocument]] = weakref.WeakKeyDictionary()


def _cache(log: EventLog) -> FoldCache[CourseDocument]:
    cache = _folds.get(log)
    if cache is None:
        cache = _folds[log] = FoldCache(FOLD_CACHE_BYTES, lambda doc: len(_ENCODE(doc)))
    return cache


async def _load(conn: Connection | None, log: EventLog, course_id: str | None) -> tuple[CourseDocument, int]:
    """The course folded (and its head seq). A document saved whole again and again is a stream of whole
    documents: only what was appended since this process last folded it is read (:func:`fold_cached`)."""
    if course_id is None:
        return CourseDocument(), 0
    return await fold_cached(conn, log, _cache(log), course_id, CourseDocument(), evolve_course)


async def read_document(log: EventLog, owner: str, document_id: str) -> fmt.Document:
    """``owner``'s document; DocumentNotFound when it is missing, deleted or another owner's."""
    course_id = await find_document(log.db, owner, document_id)
    doc, head = await _load(None, log, course_id)
    if course_id is None or head == 0 or doc.deleted:
        raise missing(document_id)
    document = document_of(course_id, doc)  # stamped current: an older document is migrated on read
    if stored_stamp(doc, document_id) == "future":
        # Never downgraded: a newer server's document keeps its stamp (OpenMAIC's clients refuse to edit it).
        return msgspec.structs.replace(document, dslVersion=doc.stored_version)
    return document


def _now_ms() -> int:
    return int(time.time() * 1000)


async def _existing(w: Writer, owner: str, document_id: str, operation: str) -> tuple[str, CourseDocument, int]:
    """The course of an existing, writable document at this server's DSL version (DocumentNotFound, CourseLocked,
    StaleDocument, FutureVersion)."""
    course_id = await find_document(w.conn, owner, document_id)
    doc, head = await _load(w.conn, w.log, course_id)
    if course_id is None or head == 0 or doc.deleted:
        raise missing(document_id)
    _current_for(doc, document_id, operation)
    _writable(doc, document_id)
    return course_id, doc, head


def _writable(doc: CourseDocument, document_id: str) -> None:
    if doc.locked_by is not None:
        raise CourseLocked(f"document {document_id!r} is being generated by run {doc.locked_by}; it can be written "
                           "once the run completes", id=document_id)


async def put_document(log: EventLog, owner: str, document_id: str, body: Any, *, browser: str | None = None,
                       byte_limit: int | None = None) -> bool:
    """Save ``owner``'s whole document (creating its course at the first save; by the importer of ``browser``,
    bound to ``owner``, when given); True when it changed. A document deleted before is saved anew (a new course
    under the same document id), but for the importer, to which a deleted document stays deleted. ``byte_limit``:
    what the owner's saved documents may take together (:class:`DocumentQuotaFull` past it)."""
    _refuse_future(body, document_id)
    # Decoding and validating a whole document is the heaviest work of a save: off the event loop, so the requests
    # of others are answered meanwhile (the GIL is handed over every few milliseconds; the loop is not held).
    document, size = await trio.to_thread.run_sync(_decoded, body, document_id)
    if len(document.scenes) > MAX_SCENES:
        raise fmt.FormatInvalid([fmt.Problem("/scenes", f"a document holds at most {MAX_SCENES} scenes")])
    async with writing(log, owner) as w:
        course_id = await find_document(w.conn, owner, document_id, buried=browser is not None)
        before, head = await _load(w.conn, log, course_id)
        if course_id is not None and before.deleted:
            if browser is not None:  # the importer's tombstone rule: "deleted on the server"
                raise DocumentNotFound(f"document {document_id!r} was deleted", id=document_id)
            course_id, before, head = await _fresh_course(w.conn, owner, document_id), CourseDocument(), 0
        if head:
            if stored_stamp(before, document_id) == "future":
                raise FutureVersion(
                    f"@openmaic/storage: refusing to overwrite document {_quoted(document_id)} — the stored copy is "
                    f"at DSL version {_quoted(before.stored_version)}, newer than this server's {fmt.DSL_VERSION}",
                    stageId=document_id, storedVersion=before.stored_version)
            _writable(before, document_id)
            as_stored = msgspec.structs.replace(document, scenes=sorted(document.scenes, key=lambda s: s.order))
            if (before.stored_version == fmt.DSL_VERSION  # a stale one is saved anew, stamped current
                    and document_of(course_id, before, ready_only=False) == as_stored):  # type: ignore[arg-type]
                return False  # the same document again: nothing to record
        course_id = course_id or await _fresh_course(w.conn, owner, document_id)
        events: list[Event] = []
        title = document.stage.name.strip() or "Untitled course"
        if head == 0:
            events.append(CourseCreated(title=title, requirement=(document.stage.description or "")[:2000],
                                        created_ms=int(document.stage.createdAt)))
            await w.conn.execute(Q.browser_document_insert, course_id, owner, document_id, title)
        elif title != before.title:
            await w.conn.execute(Q.browser_document_retitle, course_id, title)
        await _charge(w, owner, course_id, size, byte_limit)
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


async def put_stage(log: EventLog, owner: str, document_id: str, body: Any, *, byte_limit: int | None = None) -> bool:
    """Save the stage of ``owner``'s existing document; True when it changed."""
    stage = fmt.decode_stage(body)
    if stage.id != document_id:
        raise fmt.FormatInvalid([fmt.Problem("/id", f"the stage's id must be the document's id ({document_id!r})")])
    async with writing(log, owner) as w:
        course_id, doc, head = await _existing(w, owner, document_id, "putStage")
        if stage_of(course_id, doc) == stage:
            return False
        if stage.name.strip() and stage.name != doc.title:
            await w.conn.execute(Q.browser_document_retitle, course_id, stage.name)
        await _charge(w, owner, course_id, len(_ENCODE(stage)) - len(_ENCODE(stage_of(course_id, doc))), byte_limit,
                      delta=True)
        await w.append(StreamAppend(stream_id=course_id, events=[CourseStageSet(stage=stage)], expected_seq=head))
        return True


async def put_scene(log: EventLog, owner: str, document_id: str, scene_id: str, body: Any, *,
                    byte_limit: int | None = None) -> bool:
    """Save (or add) one scene of ``owner``'s existing document; True when it changed."""
    scene = fmt.decode_scene(body, stage_id=document_id, scene_id=scene_id)
    async with writing(log, owner) as w:
        course_id, doc, head = await _existing(w, owner, document_id, "putScene")
        if doc.scene(scene_id) == scene and scene_id in doc.ready:
            return False
        if doc.scene(scene_id) is None and len(doc.scenes) >= MAX_SCENES:
            raise fmt.FormatInvalid([fmt.Problem("/id", f"a document holds at most {MAX_SCENES} scenes")])
        old = doc.scene(scene_id)
        await _charge(w, owner, course_id, len(_ENCODE(scene)) - (len(_ENCODE(old)) if old is not None else 0),
                      byte_limit, delta=True)
        event = CourseSceneSet(scene=scene, ready=True, at_ms=_now_ms())
        await w.append(StreamAppend(stream_id=course_id, events=[event], expected_seq=head))
        return True


def _refuse_future(body: Any, document_id: str) -> None:
    version = body.get("dslVersion") if isinstance(body, dict) else None
    if isinstance(version, str) and _future(version):
        raise FutureVersion(f"@openmaic/storage: document {msgspec.json.encode(document_id).decode()} was written at "
                            f"DSL version {version}, newer than this server's {fmt.DSL_VERSION}",
                            stageId=document_id, storedVersion=version)


def _decoded(body: Any, document_id: str) -> tuple[fmt.Document, int]:
    document = fmt.decode_document(body, stage_id=document_id)
    return document, len(_ENCODE(document))


def _future(version: str) -> bool:
    try:
        return fmt.is_future(version)
    except fmt.FormatInvalid:
        return False  # a malformed stamp: the validator names it


async def _fresh_course(conn: Connection, owner: str, document_id: str) -> str:
    """A course id for a new document: derived from the owner and the document id, then (the id was deleted and
    saved again) from a generation number, so a repeated save after a lost answer finds the same one."""
    n = 0
    while True:
        course_id = document_course_id(owner, document_id if n == 0 else f"{document_id}\x1f{n}")
        if await conn.fetchrow(Q.stream, course_id) is None:
            return course_id
        n += 1


async def delete_document(log: EventLog, owner: str, document_id: str) -> bool:
    """Delete ``owner``'s document (a missing one is fine); True when it was there. Its id is free again."""
    async with writing(log, owner) as w:
        course_id = await find_document(w.conn, owner, document_id)
        doc, head = await _load(w.conn, log, course_id)
        if course_id is None or head == 0 or doc.deleted:
            return False
        _writable(doc, document_id)
        await w.conn.execute(Q.browser_document_bury, course_id, TOMBSTONE + document_id)
        await w.append(StreamAppend(stream_id=course_id, events=[CourseDeleted()], expected_seq=head))
        return True


async def delete_scene(log: EventLog, owner: str, document_id: str, scene_id: str) -> bool:
    """Delete one scene of ``owner``'s document (a missing document or scene is fine); True when it was there."""
    async with writing(log, owner) as w:
        course_id = await find_document(w.conn, owner, document_id)
        doc, head = await _load(w.conn, log, course_id)
        if course_id is None or head == 0 or doc.deleted:
            return False
        _current_for(doc, document_id, "deleteScene")  # guarded once the parent exists, as OpenMAIC's stores are
        if doc.scene(scene_id) is None:
            return False
        _writable(doc, document_id)
        await w.append(StreamAppend(stream_id=course_id, events=[CourseSceneDeleted(scene_id=scene_id)],
                                    expected_seq=head))
        return True


class DocumentSummary(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One line of OpenMAIC's document listing."""

    id: str
    name: str
    description: str | msgspec.UnsetType = msgspec.UNSET
    interactiveMode: bool | msgspec.UnsetType = msgspec.UNSET
    taskEngineMode: Any = msgspec.UNSET
    createdAt: int | float
    updatedAt: int | float
    sceneCount: int


async def list_documents(log: EventLog, owner: str) -> list[DocumentSummary]:
    """``owner``'s documents: those a browser saved and the courses generated here, not deleted, newest first."""
    rows = await log.db.fetch(Q.browser_documents_of_owner, owner)
    named = {r["course_id"]: r["document_id"] for r in rows}
    generated = await log.db.fetch(Q.course_streams_of_owner, owner)
    for r in generated:
        named.setdefault(r["id"], r["id"])
    out = []
    for course_id, document_id in named.items():
        doc, head = await _load(None, log, course_id)
        if head == 0 or doc.deleted:
            continue
        stage = document_of(course_id, doc).stage
        out.append(DocumentSummary(
            id=document_id, name=stage.name, description=stage.description, interactiveMode=stage.interactiveMode,
            taskEngineMode=getattr(stage, "taskEngineMode", msgspec.UNSET), createdAt=stage.createdAt,
            updatedAt=stage.updatedAt, sceneCount=sum(1 for s in doc.scenes if s.id in doc.ready)))
    out.sort(key=lambda d: (-float(d.updatedAt), d.id))
    return out


def scene_of(document: fmt.Document, document_id: str, scene_id: str) -> fmt.Scene:
    """A scene of a document read with :func:`read_document` (SceneNotFound when it has none of that id)."""
    scene = next((s for s in document.scenes if s.id == scene_id), None)
    if scene is None:
        raise SceneNotFound(f"document {document_id!r} has no scene {scene_id!r}", id=scene_id)
    return scene


def encode(document: fmt.Document) -> Any:
    return msgspec.to_builtins(document)
