"""OpenMAIC's library routes that its browser persistence uses: the owner's courses and folders (errors in
OpenMAIC's ``jsonErr`` form).

* ``GET /api/stages`` → ``{stages: [{id, name, courseId, folderId?, updatedAt}]}``: every course of the caller's,
  a document's under its document id (what ``/api/persistence/documents/{id}`` names), a course this server
  generated under its course id; ``courseId`` is the course's id here (``/classroom/{courseId}``). A document
  written a moment ago is listed at once.
* ``GET /api/folders`` → ``{folders: [{id, name, order, createdAt, updatedAt}]}``.
* ``POST /api/folders {name}`` → 201 ``{folder}``; 409 ``FOLDER_NAME_DUPLICATE`` (a repeat), ``FOLDER_LIMIT_REACHED``;
  400 ``FOLDER_NAME_EMPTY``, ``FOLDER_NAME_TOO_LONG``.
* ``POST /api/folders/members {stageId, folderId}`` (``folderId`` null: out of its folder) → ``{stageId,
  folderId}``; 404 ``DOCUMENT_NOT_FOUND`` / ``FOLDER_NOT_FOUND`` for what is not the caller's.

Like the persistence routes, a request with ``X-OpenMAIC-Legacy-Import`` is refused (409
``LEGACY_IMPORT_NOT_BOUND``) unless its owner holds that browser's binding.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import msgspec
from quart import Blueprint

from openmaic.api.persistence import import_fence
from openmaic.api.pages import WholeByDefault, page_of
from openmaic.api.routing import Call, api_route
from openmaic.api.wire import Wire
from openmaic.browser_import import folders
from openmaic.projections import LibraryCard
from openmaic.store.queries import Q

__all__ = ["bp"]

bp = Blueprint("persistence_library", __name__)

ClientId = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class StageEntry(Wire):
    id: str
    name: str
    course_id: str
    updated_at: dt.datetime
    folder_id: str | None = None


class Stages(Wire):
    stages: list[StageEntry]
    """Newest first; every one unless ``?limit=`` asks for a page (:mod:`openmaic.api.pages`)."""
    next_cursor: str | None = None
    """The ``cursor`` of the next page; null on the last."""


class FolderView(Wire):
    id: str
    name: str
    order: int
    created_at: dt.datetime
    updated_at: dt.datetime


class Folders(Wire):
    folders: list[FolderView]
    """In order; every one unless ``?limit=`` asks for a page."""
    next_cursor: str | None = None
    """The ``cursor`` of the next page; null on the last."""


class FolderCreated(Wire):
    folder: FolderView


class NewFolder(Wire, forbid_unknown_fields=True):
    name: Annotated[str, msgspec.Meta(max_length=10_000)]


class Membership(Wire, forbid_unknown_fields=True):
    stage_id: ClientId
    folder_id: ClientId | None


def _view(f: folders.Folder) -> FolderView:
    return FolderView(id=f.id, name=f.name, order=f.order, created_at=f.created_at, updated_at=f.updated_at)


@api_route(bp, "GET", "/api/stages", query=WholeByDefault, response=Stages, error_style="json", errors=(400, 409))
async def list_stages(call: Call) -> Stages:
    """Your courses, newest first, with the folder each is filed in (?limit=&cursor=: a page of them)."""
    await import_fence(call)
    db = call.services.db
    filed = await folders.filed_documents(db, call.user)
    cards = {r.course_id: r for r in await db.fetch_as(LibraryCard, Q.library_cards_of_owner, call.user, None, None,
                                                        None)}
    stages = [
        StageEntry(id=r.document_id, course_id=r.course_id, updated_at=r.updated_at,
                   name=r.title or (cards[r.course_id].title if r.course_id in cards else ""), folder_id=r.folder_id)
        for r in filed
    ]  # fmt: skip
    known = {r.course_id for r in filed}
    stages += [StageEntry(id=cid, course_id=cid, name=c.title, updated_at=c.updated_at)
               for cid, c in cards.items() if cid not in known]
    page, nxt = page_of(stages, lambda s: (s.updated_at, s.id), call.query, (dt.datetime, str), descending=True)
    return Stages(stages=page, next_cursor=nxt)


@api_route(bp, "GET", "/api/folders", query=WholeByDefault, response=Folders, error_style="json", errors=(400, 409))
async def list_folders(call: Call) -> Folders:
    """Your library's folders, in order (?limit=&cursor=: a page of them)."""
    await import_fence(call)
    found = await folders.list_folders(call.services.db, call.user)
    page, nxt = page_of(found, lambda f: (f.order, f.id), call.query, (int, str))
    return Folders(folders=[_view(f) for f in page], next_cursor=nxt)


@api_route(bp, "POST", "/api/folders", body=NewFolder, response=FolderCreated, status=201, error_style="json",
           errors=(400, 409))
async def create_folder(call: Call) -> FolderCreated:
    """Add a folder to your library."""
    await import_fence(call)
    return FolderCreated(folder=_view(await folders.create_folder(call.services.log, call.user, call.body.name)))


@api_route(bp, "POST", "/api/folders/members", body=Membership, response=Membership, error_style="json",
           errors=(400, 404, 409))
async def file_course(call: Call) -> Membership:
    """File one of your courses in one of your folders (folderId null: in none)."""
    await import_fence(call)
    body: Membership = call.body
    await folders.file_course(call.services.log, call.user, body.stage_id, body.folder_id)
    return body
