"""The library's folders (OpenMAIC's ``/api/folders``) and which folder each course is filed in.

A folder is a stream of its own (kind ``folder``, its id ``folder-…``) that records its creation
(``folder.created``); ``library_folders`` (migration 0015) lists an owner's folders and is written in the same
transaction. Filing a course is an event on the course's stream (``course.filed {folder_id}``, ``None``: taken
out of its folder), with its current folder kept in ``browser_documents.folder_id`` beside it, so the library
(``GET /api/stages``) says at once where each course is.

Names are an owner's own: unique per owner ignoring case and surrounding spaces (409 ``FOLDER_NAME_DUPLICATE``,
which is also what a repeated create answers, changing nothing), 1 to :data:`MAX_NAME` characters (400
``FOLDER_NAME_EMPTY`` / ``FOLDER_NAME_TOO_LONG``), at most :data:`MAX_FOLDERS` folders (409
``FOLDER_LIMIT_REACHED``). Filing a course where it already is changes nothing.
"""

from __future__ import annotations

import datetime as dt
import secrets

import msgspec

from openmaic import errors
from openmaic.browser_import.documents import DocumentNotFound, find_document
from openmaic.browser_import.store import writing
from openmaic.events.log import EventLog, NewStream, StreamAppend, StreamRow
from openmaic.events.types import Event, register
from openmaic.store.database import Database
from openmaic.store.gateway import Gateway
from openmaic.store.queries import Q

__all__ = [
    "CourseFiled", "Folder", "FolderCreated", "FolderNotFound", "MAX_FOLDERS", "MAX_NAME", "create_folder",
    "file_course", "list_folders",
]  # fmt: skip

MAX_NAME = 100
MAX_FOLDERS = 100


class FolderNameError(errors.InvalidInput):
    """The folder name is not one a folder can have."""

    error_code = "FOLDER_NAME_EMPTY"


class FolderNameTooLong(FolderNameError):
    error_code = "FOLDER_NAME_TOO_LONG"


class FolderNameDuplicate(errors.Conflict):
    """You have a folder of that name already."""

    error_code = "FOLDER_NAME_DUPLICATE"


class FolderLimitReached(errors.Conflict):
    """You have as many folders as you may."""

    error_code = "FOLDER_LIMIT_REACHED"


class FolderNotFound(errors.NotFound):
    """No such folder (or it is another owner's)."""

    error_code = "FOLDER_NOT_FOUND"


@register
class FolderCreated(Event, tag="folder.created"):
    name: str


@register
class CourseFiled(Event, tag="course.filed"):
    """The course was put in a folder of its owner's library (``None``: taken out of its folder)."""

    folder_id: str | None


class Folder(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str
    order: int
    created_at: dt.datetime
    updated_at: dt.datetime


class _FolderRow(msgspec.Struct, frozen=True):
    id: str
    name: str
    position: int
    created_at: dt.datetime
    updated_at: dt.datetime

    def folder(self) -> Folder:
        return Folder(id=self.id, name=self.name, order=self.position, created_at=self.created_at,
                      updated_at=self.updated_at)


class FiledDocument(msgspec.Struct, frozen=True):
    """One of an owner's document courses (``browser_documents_of_owner``), and the folder it is filed in."""

    course_id: str
    document_id: str
    title: str
    folder_id: str | None
    updated_at: dt.datetime


async def filed_documents(db: Gateway, owner: str) -> list[FiledDocument]:
    """``owner``'s document courses but those deleted since."""
    return await db.fetch_as(FiledDocument, Q.browser_documents_of_owner, owner)


async def list_folders(db: Database, owner: str) -> list[Folder]:
    return [r.folder() for r in await db.fetch_as(_FolderRow, Q.library_folders_of_owner, owner)]


async def create_folder(log: EventLog, owner: str, name: str) -> Folder:
    """A new folder of ``owner``'s named ``name`` (trimmed); the refusals are in the module's doc."""
    name = name.strip()
    if not name:
        raise FolderNameError("a folder needs a name", path="name")
    if len(name) > MAX_NAME:
        raise FolderNameTooLong(f"a folder's name is at most {MAX_NAME} characters", path="name")
    async with writing(log, owner) as w:
        rows = await w.conn.fetch_as(_FolderRow, Q.library_folders_of_owner, owner)
        if any(r.name.casefold() == name.casefold() for r in rows):
            raise FolderNameDuplicate(f"you have a folder named {name!r} already", name=name)
        if len(rows) >= MAX_FOLDERS:
            raise FolderLimitReached(f"you have {MAX_FOLDERS} folders, the most you may have")
        folder_id = "folder-" + secrets.token_urlsafe(12)
        position = max((r.position for r in rows), default=-1) + 1
        row = await w.conn.fetchrow_as(_FolderRow, Q.library_folder_insert, folder_id, owner, name, position)
        assert row is not None  # an INSERT … RETURNING returns its row
        await w.append(StreamAppend(stream_id=folder_id, create=NewStream("folder", owner), status="terminal",
                                    events=[FolderCreated(name=name)]))
    return row.folder()


async def file_course(log: EventLog, owner: str, stage_id: str, folder_id: str | None) -> bool:
    """File ``owner``'s course ``stage_id`` (a document id, or a course id) in ``folder_id`` (None: in none);
    True when it moved."""
    async with writing(log, owner) as w:
        course_id = await find_document(w.conn, owner, stage_id)
        if course_id is None:
            stream = await w.conn.fetchrow_as(StreamRow, Q.stream, stage_id)
            if stream is None or stream.owner_id != owner or stream.kind != "course":
                raise DocumentNotFound(f"no course {stage_id!r}", id=stage_id)
            # A course this server generated: filed under its own id from now on.
            course_id = stage_id
            await w.conn.execute(Q.browser_document_insert, course_id, owner, stage_id, "")
        listed = {r.course_id: r for r in await filed_documents(w.conn, owner)}
        if course_id not in listed:
            raise DocumentNotFound(f"course {stage_id!r} was deleted", id=stage_id)
        if folder_id is not None and all(r.id != folder_id for r in await w.conn.fetch_as(
                _FolderRow, Q.library_folders_of_owner, owner)):
            raise FolderNotFound(f"no folder {folder_id!r}", id=folder_id)
        if listed[course_id].folder_id == folder_id:
            return False
        await w.conn.execute(Q.browser_document_file, course_id, folder_id)
        await w.append(StreamAppend(stream_id=course_id, events=[CourseFiled(folder_id=folder_id)]))
    return True
