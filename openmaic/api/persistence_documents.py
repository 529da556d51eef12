"""OpenMAIC's document contract (``@openmaic/storage``'s ``document-http-contract.md``) at
``/api/persistence/documents``: a document is one of the caller's courses, saved by a browser or generated here.

* ``GET /documents`` → ``[{id, name, description?, interactiveMode?, taskEngineMode?, createdAt, updatedAt,
  sceneCount}]``, newest first: every course of the caller's that is not deleted (a generated one under its
  course id).
* ``PUT /documents/{id}`` ``{stage, scenes, outline?, dslVersion?}`` → 204: the whole document, migrated and
  validated by the course format (400 ``VALIDATION_FAILED``, ``details`` the problem list; nothing stored); a
  document stamped newer than this server's DSL version is 409 ``FUTURE_VERSION`` (``details {stageId,
  storedVersion}``). A deleted document's id is saved anew.
* ``GET /documents/{id}`` → the document, ``dslVersion`` at its root; 404 ``DOCUMENT_NOT_FOUND`` (message
  ``@openmaic/storage: missing document "<id>"``) for a missing, deleted or another owner's document.
* ``DELETE /documents/{id}`` → 204, for a missing one too.
* ``PUT …/{id}/stage``, ``PUT …/{id}/scenes/{sceneId}`` → 204 (the document must exist: 404
  ``DOCUMENT_NOT_FOUND``); ``GET …/{id}/scenes/{sceneId}`` → the scene, or 404 ``SCENE_NOT_FOUND``;
  ``DELETE …/{id}/scenes/{sceneId}`` → 204, for a missing scene or document too.
* The stored version stamp (:func:`openmaic.browser_import.documents.stored_stamp`): a document an earlier server
  stored unstamped or older is migrated on read (answered at this server's ``dslVersion``); the part writes
  (stage, scene, scene delete) need it current (400 ``VALIDATION_FAILED``: load it and save it whole first); a
  document a newer server stored is read with its stamp and never overwritten (409 ``FUTURE_VERSION``, for a whole
  save or a part write); one whose stamp is malformed is listed but not read or written (500 ``INTERNAL_ERROR``,
  named in the server log), and can be deleted.

Errors are the storage contract's (:mod:`openmaic.api.errors`, style ``storage``): an unknown path under
``/api/persistence`` or a method a path does not take is 404 ``ROUTE_NOT_FOUND``. A course a run is still writing
is 409 ``COURSE_LOCKED`` (this server's addition). Fenced by ``X-OpenMAIC-Legacy-Import`` like every persistence
route (:func:`openmaic.api.persistence.import_fence`).
"""

from __future__ import annotations

from typing import Any

import msgspec
from quart import Blueprint

from openmaic.api.persistence import import_fence, owner_writes
from openmaic.api.routing import Call, api_route
from openmaic.browser_import import documents

__all__ = ["bp"]

bp = Blueprint("persistence_documents", __name__)

_STYLE: dict[str, Any] = {"error_style": "storage"}


@api_route(bp, "GET", "/api/persistence/documents", response=list[documents.DocumentSummary], errors=(409,),
           **_STYLE)
async def list_documents(call: Call) -> list[documents.DocumentSummary]:
    """Your documents (courses you saved or generated), newest first."""
    await import_fence(call)
    return await documents.list_documents(call.services.log, call.user)


@api_route(bp, "GET", "/api/persistence/documents/{document_id}", response=dict[str, Any], errors=(404, 409),
           **_STYLE)
async def get_document(call: Call, document_id: str) -> dict[str, Any]:
    """One of your documents (a course you generated or saved): OpenMAIC's document, ``dslVersion`` at its root."""
    await import_fence(call)
    return documents.encode(await documents.read_document(call.services.log, call.user, document_id))


@api_route(bp, "PUT", "/api/persistence/documents/{document_id}", body=dict[str, Any], body_limit="upload",
           errors=(404, 409, 413, 429), **_STYLE)
@owner_writes
async def put_document(call: Call, document_id: str) -> None:
    """Save a whole document as one of your courses (validated by the course format; the same document again
    changes nothing)."""
    browser = await import_fence(call)
    await documents.put_document(call.services.log, call.user, document_id, call.body, browser=browser,
                                 byte_limit=call.services.config.limits.document_bytes_per_owner)


@api_route(bp, "DELETE", "/api/persistence/documents/{document_id}", errors=(409,), **_STYLE)
@owner_writes
async def delete_document(call: Call, document_id: str) -> None:
    """Delete one of your documents (its stage, scenes and outline); a missing one is fine."""
    await import_fence(call)
    await documents.delete_document(call.services.log, call.user, document_id)


@api_route(bp, "PUT", "/api/persistence/documents/{document_id}/stage", body=dict[str, Any], body_limit="upload",
           errors=(404, 409, 413, 429), **_STYLE)
@owner_writes
async def put_document_stage(call: Call, document_id: str) -> None:
    """Save the stage (title, description, roster …) of one of your documents."""
    await import_fence(call)
    await documents.put_stage(call.services.log, call.user, document_id, call.body,
                              byte_limit=call.services.config.limits.document_bytes_per_owner)


@api_route(bp, "PUT", "/api/persistence/documents/{document_id}/scenes/{scene_id}", body=dict[str, Any],
           body_limit="upload", errors=(404, 409, 413, 429), **_STYLE)
@owner_writes
async def put_document_scene(call: Call, document_id: str, scene_id: str) -> None:
    """Save (or add) one scene of one of your documents."""
    await import_fence(call)
    await documents.put_scene(call.services.log, call.user, document_id, scene_id, call.body,
                              byte_limit=call.services.config.limits.document_bytes_per_owner)


@api_route(bp, "GET", "/api/persistence/documents/{document_id}/scenes/{scene_id}", response=dict[str, Any],
           errors=(404, 409), **_STYLE)
async def get_document_scene(call: Call, document_id: str, scene_id: str) -> dict[str, Any]:
    """One scene of one of your documents."""
    await import_fence(call)
    try:
        doc = await documents.read_document(call.services.log, call.user, document_id)
    except documents.DocumentNotFound:
        raise documents.SceneNotFound(f"@openmaic/storage: missing scene {scene_id!r}") from None
    return msgspec.to_builtins(documents.scene_of(doc, document_id, scene_id))  # type: ignore[no-any-return]


@api_route(bp, "DELETE", "/api/persistence/documents/{document_id}/scenes/{scene_id}", errors=(400, 409),
           **_STYLE)
@owner_writes
async def delete_document_scene(call: Call, document_id: str, scene_id: str) -> None:
    """Delete one scene of one of your documents; a missing scene or document is fine."""
    await import_fence(call)
    await documents.delete_scene(call.services.log, call.user, document_id, scene_id)
