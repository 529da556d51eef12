"""OpenMAIC's browser persistence routes for documents, assets and the learner key (``/api/persistence/…``), as
its ``@openmaic/storage`` HTTP clients use them (errors in OpenMAIC's ``jsonErr`` form: the clients read
``error.code``).

* ``GET /api/persistence/learner-key`` → ``{learnerKey}``: the key runtime sessions are filed under (derived from
  the owner id, :func:`openmaic.owners.anonymous.learner_key`).
* ``GET /api/persistence/documents/{id}`` → the document ``{stage, scenes, outline?, dslVersion}`` (a course you
  saved or generated: every door serves the same document); 404 ``DOCUMENT_NOT_FOUND`` for a missing, deleted or
  another owner's document (the same answer).
* ``PUT /api/persistence/documents/{id}`` ``{stage, scenes, outline?, dslVersion?}`` → 204: the whole document,
  validated by the course format (400 ``VALIDATION_FAILED`` naming the path; nothing stored); creates its course at
  the first save; a deleted course's id is 404 ``DOCUMENT_NOT_FOUND``; a course a run is still writing is 409
  ``COURSE_LOCKED``.
* ``PUT …/{id}/stage`` (the stage object) and ``PUT …/{id}/scenes/{sceneId}`` (the scene object) → 204; ``GET
  …/{id}/scenes/{sceneId}`` → the scene, or 404 ``SCENE_NOT_FOUND``.
* ``POST /api/persistence/assets`` (multipart: ``meta`` JSON, ``bytes`` with its ``Content-Type``) → 201 ``{id}``
  with ``X-Asset-Revision``; pictures, video and audio, within ``limits.upload_bytes`` (413) and the owner's
  asset quota (507 ``ASSET_QUOTA_EXCEEDED``). Content-addressed: the same bytes again are the same id.
* ``GET``/``HEAD /api/persistence/assets/{id}/content`` → the bytes with ``Content-Type`` and ``X-Asset-Revision``
  (ranges as ``GET /api/assets/{id}``); 404 ``ASSET_NOT_FOUND`` (also in ``X-Error-Code``, for ``HEAD``).

A request carrying ``X-OpenMAIC-Legacy-Import`` (OpenMAIC's importer of a 1.1.x browser's data) is refused with
409 ``LEGACY_IMPORT_NOT_BOUND`` unless its owner holds that browser's binding, before anything is read or written.
What the stores do is in :mod:`openmaic.browser_import.documents`.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from quart import Blueprint, Response

from openmaic import errors
from openmaic.api.assets import get_asset
from openmaic.api.routing import Call, api_route
from openmaic.api.wire import Wire
from openmaic.browser_import import documents
from openmaic.browser_import.service import HEADER, browser_of
from openmaic.media.assets import MEDIA_TYPES, AssetKind, store_generated
from openmaic.models.media import GeneratedMedia
from openmaic.owners.learners import learner_key as learner_key_of

__all__ = ["bp", "import_fence"]

bp = Blueprint("persistence", __name__)

REVISION = "1"
"""Every asset's revision: assets are content-addressed, so the bytes under an id never change."""
_KINDS: dict[str, AssetKind] = {"image": "image", "video": "video", "audio": "narration"}


class UnsupportedAsset(errors.InvalidInput):
    """An asset is a picture, a video or audio, sent as multipart/form-data."""

    code = "unsupported_media_type"
    status = 415
    error_code = "UNSUPPORTED_MEDIA_TYPE"


async def import_fence(call: Call) -> str | None:
    """The browser an importer request names (checked to be bound to the caller), or None for other requests."""
    header = call.request.headers.get(HEADER)
    return await browser_of(call.services.log, call.user, header) if header is not None else None


class LearnerKey(Wire):
    learner_key: str


class AssetAllocated(Wire):
    id: str


@api_route(bp, "GET", "/api/persistence/learner-key", response=LearnerKey, error_style="json", errors=(409,))
async def learner_key(call: Call) -> LearnerKey:
    """The key your runtime sessions are filed under."""
    await import_fence(call)
    return LearnerKey(learner_key=learner_key_of(call.user))


@api_route(bp, "GET", "/api/persistence/documents/{document_id}", response=dict[str, Any], error_style="json",
           errors=(404, 409))
async def get_document(call: Call, document_id: str) -> dict[str, Any]:
    """One of your documents (a course you generated or saved): OpenMAIC's document, ``dslVersion`` at its root."""
    await import_fence(call)
    return documents.encode(await documents.read_document(call.services.log, call.user, document_id))


@api_route(bp, "PUT", "/api/persistence/documents/{document_id}", body=dict[str, Any], body_limit="upload",
           error_style="json", errors=(404, 409, 413))
async def put_document(call: Call, document_id: str) -> None:
    """Save a whole document as one of your courses (validated by the course format; the same document again
    changes nothing)."""
    browser = await import_fence(call)
    await documents.put_document(call.services.log, call.user, document_id, call.body, browser=browser)


@api_route(bp, "PUT", "/api/persistence/documents/{document_id}/stage", body=dict[str, Any], body_limit="upload",
           error_style="json", errors=(404, 409, 413))
async def put_document_stage(call: Call, document_id: str) -> None:
    """Save the stage (title, description, roster …) of one of your documents."""
    await import_fence(call)
    await documents.put_stage(call.services.log, call.user, document_id, call.body)


@api_route(bp, "PUT", "/api/persistence/documents/{document_id}/scenes/{scene_id}", body=dict[str, Any],
           body_limit="upload", error_style="json", errors=(404, 409, 413))
async def put_document_scene(call: Call, document_id: str, scene_id: str) -> None:
    """Save (or add) one scene of one of your documents."""
    await import_fence(call)
    await documents.put_scene(call.services.log, call.user, document_id, scene_id, call.body)


@api_route(bp, "GET", "/api/persistence/documents/{document_id}/scenes/{scene_id}", response=dict[str, Any],
           error_style="json", errors=(404, 409))
async def get_document_scene(call: Call, document_id: str, scene_id: str) -> dict[str, Any]:
    """One scene of one of your documents."""
    await import_fence(call)
    doc = await documents.read_document(call.services.log, call.user, document_id)
    return msgspec.to_builtins(documents.scene_of(doc, document_id, scene_id))  # type: ignore[no-any-return]


def _asset_kind(media_type: str) -> AssetKind:
    kind = _KINDS.get(media_type.split("/", 1)[0].strip().lower())
    if kind is None or media_type not in MEDIA_TYPES:
        raise UnsupportedAsset(
            f"an asset is a picture, a video or audio ({', '.join(sorted(MEDIA_TYPES))}), not "
            f"{media_type or 'untyped'}", path="bytes")
    return kind


@api_route(bp, "POST", "/api/persistence/assets", response=AssetAllocated, status=201, body_limit="upload",
           upload="multipart", upload_field="bytes", error_style="json", errors=(400, 409, 413, 415, 507))
async def put_asset(call: Call) -> Response:
    """Store a picture, video or audio clip for your documents; the same bytes again are the same asset."""
    await import_fence(call)
    request = call.request
    if request.mimetype != "multipart/form-data":
        raise UnsupportedAsset("send the asset as multipart/form-data: parts meta (JSON) and bytes",
                                          path="Content-Type")
    files = await request.files
    upload = files.get("bytes")
    if upload is None:
        raise errors.MissingField("Missing required field: bytes (the multipart part holding the asset)",
                                  path="bytes")
    meta = files.get("meta")
    raw_meta = meta.read() if meta is not None else (await request.form).get("meta", "{}")
    try:
        parsed = msgspec.json.decode(raw_meta or b"{}")
    except msgspec.DecodeError:
        raise errors.InvalidInput("meta must be a JSON object", path="meta") from None
    if not isinstance(parsed, dict):
        raise errors.InvalidInput("meta must be a JSON object", path="meta")
    media_type = (upload.mimetype or "").strip().lower()
    data = upload.read()
    if not data:
        raise errors.InvalidInput("the asset is empty", path="bytes")
    stored = await store_generated(
        call.services.db, call.user, None, _asset_kind(media_type), GeneratedMedia(media_type=media_type, data=data),
        quota_bytes=call.services.config.limits.asset_bytes_per_owner)  # fmt: skip
    return Response(msgspec.json.encode(AssetAllocated(id=stored.id)), 201, content_type="application/json",
                    headers={"X-Asset-Revision": REVISION})


@api_route(bp, "GET", "/api/persistence/assets/{asset_id}/content", media_type="application/octet-stream",
           error_style="json", errors=(404, 409, 416))
async def get_asset_content(call: Call, asset_id: str) -> Response:
    """The bytes of one of your assets (HEAD: whether it exists); ranges as for GET /api/assets/{id}."""
    await import_fence(call)
    try:
        response = await get_asset(call, asset_id)
    except errors.NotFound:
        body = {"error": {"code": "ASSET_NOT_FOUND", "message": f"no asset {asset_id!r}"}}
        return Response(msgspec.json.encode(body), 404, content_type="application/json",
                        headers={"X-Error-Code": "ASSET_NOT_FOUND"})
    response.headers["X-Asset-Revision"] = REVISION
    return response
