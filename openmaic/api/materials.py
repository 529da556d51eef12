"""Materials over HTTP, as OpenMAIC's clients upload them.

``POST /api/materials`` takes the file as the raw body, described by headers (OpenMAIC's skill and scripts):
``Content-Type`` is its MIME type (one this server reads, else 415), ``X-Material-Filename`` its name
(percent-encoded; required), ``X-Request-Id`` is echoed back. A browser's ``multipart/form-data`` upload (the
field ``file``) is accepted too. The bytes decide how a file is read (a PDF is a PDF whatever it is labelled);
the text is extracted at once, so an unreadable file is refused at once rather than failing the run later.
Answers 201 ``{materialId, originalName, bytes, mime, extraction}`` and what reading it found (``characters``,
``excerpt``, ``pages`` for a PDF), which is stored with it and shown again wherever it is listed.

``DELETE /api/materials/{id}`` answers ``{materialId, deleted: true}``; an unknown, deleted or another owner's
id is the plain 404.

``GET /api/materials?limit=&before=`` lists the owner's materials, newest first, each with what reading it found;
``GET /api/materials/{id}`` reads one. With ``sessionId`` (OpenMAIC's session routes) it must be one of the
owner's live Pro sessions; materials are not bound to one session here: every one of the owner's is in scope.
"""

from __future__ import annotations

import datetime as dt
import urllib.parse
from typing import Annotated

import msgspec

from quart import Blueprint, Response

from openmaic import errors, materials
from openmaic.actors.commands import owned_stream
from openmaic.api.routing import Call, api_route
from openmaic.api.wire import Wire, encode

__all__ = ["bp"]

bp = Blueprint("materials", __name__)


class Extraction(Wire):
    status: str
    """``done``: the text was extracted at upload."""


class UploadedMaterial(Wire):
    material_id: str
    original_name: str
    bytes: int
    mime: str
    extraction: Extraction
    characters: int | None = None
    """This server's addition: how many characters of text were read (0 for an image)."""
    excerpt: str | None = None
    """This server's addition: the first words read, so the uploader sees the file was understood."""
    pages: int | None = None
    """This server's addition: the pages read from a PDF (absent for other files, and for PDFs uploaded before
    the count was kept)."""


class MaterialView(UploadedMaterial):
    created_at: dt.datetime


class MaterialAnswer(Wire):
    material: MaterialView


class MaterialsAnswer(Wire):
    materials: list[MaterialView]


class ScopeQuery(Wire):
    session_id: str = ""


class ListQuery(Wire):
    session_id: str = ""
    limit: Annotated[int, msgspec.Meta(ge=1, le=200)] = 50
    before: str = ""
    """The materialId to list after (newest first): the last id of the previous page."""


class DeletedMaterial(Wire):
    material_id: str
    deleted: bool


def _full_view(m: materials.MaterialSummary) -> MaterialView:
    return MaterialView(material_id=m.id, original_name=m.filename, bytes=m.size, mime=m.media_type,
                        extraction=Extraction(status="done"), characters=m.characters, excerpt=m.excerpt,
                        pages=m.pages, created_at=m.created_at)


async def _in_session(call: Call, session_id: str) -> None:
    """Materials are the owner's; a ``sessionId`` (OpenMAIC's Pro scope), when given, must be the owner's live
    session."""
    if not session_id:
        return
    await owned_stream(call.services.log, call.user, session_id, "workbench", live=True)


@api_route(bp, "GET", "/api/materials", query=ListQuery, response=MaterialsAnswer, plain_not_found=True)
async def list_materials(call: Call) -> MaterialsAnswer:
    """Your materials, newest first (in a session's scope with ``sessionId``); page on with before=<the last
    materialId>."""
    q: ListQuery = call.query
    await _in_session(call, q.session_id)
    found = await materials.list_materials(call.services.db, call.user, q.limit, q.before or None)
    return MaterialsAnswer(materials=[_full_view(m) for m in found])


@api_route(bp, "GET", "/api/materials/{id}", query=ScopeQuery, response=MaterialAnswer, plain_not_found=True)
async def get_material(call: Call, id: str) -> MaterialAnswer:
    """One of your materials (in a session's scope with ``sessionId``)."""
    await _in_session(call, call.query.session_id)
    return MaterialAnswer(material=_full_view(await materials.get_material(call.services.db, call.user, id)))


def material_view(m: materials.MaterialSummary) -> UploadedMaterial:
    return UploadedMaterial(material_id=m.id, original_name=m.filename, bytes=m.size, mime=m.media_type,
                            extraction=Extraction(status="done"), characters=m.characters, excerpt=m.excerpt,
                            pages=m.pages)


async def _upload(call: Call) -> tuple[str, str, bytes]:
    """``(filename, declared type, bytes)`` of the request's upload, raw or multipart."""
    request = call.request
    content_type = request.headers.get("Content-Type", "")
    if content_type.split(";", 1)[0].strip().lower() == "multipart/form-data":
        files = await request.files
        upload = files.get("file")
        if upload is None:
            raise errors.MissingField("Missing required field: file (the multipart field holding the material)",
                                      path="file")
        return upload.filename or "upload", upload.mimetype or "", upload.read()
    name = urllib.parse.unquote(request.headers.get("X-Material-Filename", "")).strip()
    if not name:
        raise errors.MissingField("Missing required field: X-Material-Filename (the file's name)",
                                  path="X-Material-Filename")
    declared = materials.declared_type(content_type)
    if declared is None:
        shown = content_type.split(";", 1)[0].strip() or "none"
        raise materials.UnsupportedFileType(f"unsupported material mime type: {shown}; upload PDF, plain text, "
                                            "Markdown or an image (PNG, JPEG, GIF, WebP)", mime=shown)
    return name, declared, await request.get_data(cache=False)


@api_route(bp, "POST", "/api/materials", response=UploadedMaterial, status=201, body_limit="upload",
           upload="raw_or_multipart", upload_headers=("X-Material-Filename", "X-Request-Id"), errors=(413, 415, 429))
async def upload_material(call: Call) -> Response:
    """Upload a material: the file as the raw body (Content-Type, X-Material-Filename), or multipart field file.

    PDF, plain text and Markdown (their text is extracted), PNG, JPEG, GIF and WebP images (shown to the model
    that plans the outline). 429 when the owner keeps limits.materials_per_owner materials or
    limits.material_bytes_per_owner bytes.
    """
    filename, declared, data = await _upload(call)
    if not data:
        raise errors.InvalidInput("the upload is empty", path="body")
    limits = call.services.config.limits
    material = await materials.store_material(
        call.services.db, call.user, filename, declared, data, max_count=limits.materials_per_owner,
        max_bytes=limits.material_bytes_per_owner, extractor=call.services.extractor,
    )
    response = Response(encode(material_view(material)), 201, content_type="application/json")
    request_id = call.request.headers.get("X-Request-Id")
    if request_id:
        response.headers["X-Request-Id"] = request_id[:200]
    return response


@api_route(bp, "DELETE", "/api/materials/{id}", response=DeletedMaterial, plain_not_found=True)
async def delete_material(call: Call, id: str) -> DeletedMaterial:
    """Delete a material. Runs that already read it keep what they read."""
    if not await materials.delete_material(call.services.db, call.user, id):
        raise errors.NotFound(f"no material {id!r}")
    return DeletedMaterial(material_id=id, deleted=True)
