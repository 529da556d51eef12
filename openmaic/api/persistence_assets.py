"""OpenMAIC's asset contract (``@openmaic/storage``'s ``asset-http-contract.md``) at ``/api/persistence/assets``
(the registry is :mod:`openmaic.media.storage_assets`).

* ``POST /assets`` (multipart: ``meta`` then ``bytes``, each with a filename) → 201 ``{"id": "ast_…"}`` and
  ``X-Asset-Revision: 1``: a new id every time, whatever the bytes.
* ``GET``/``HEAD /assets/{id}/content`` → the bytes (``HEAD``: the headers only, the bytes untouched).
* ``PUT /assets/{id}/content`` (multipart: ``meta`` optional, then ``bytes``) → 204 and ``X-Asset-Revision``, one
  more than before.
* ``DELETE /assets/{id}`` → 204 for any id (own, foreign, missing or deleted alike).

Byte answers carry ``Content-Type`` only for the allowlisted media (pictures, audio and video that browsers
render inertly: :data:`SAFE_TYPES`); anything else (HTML, SVG, XML, PDF, scripts, unknown types) is
``application/octet-stream`` with ``Content-Disposition: attachment``. Always ``X-Content-Type-Options: nosniff``,
``Content-Security-Policy: sandbox``, ``Cache-Control: private, no-store``, ``Vary: Cookie, Authorization`` and
the revision; never ``ETag``, ``Last-Modified`` or ``Accept-Ranges`` (a ``Range`` is ignored: the whole 200).

Refused: a query string, a ``Content-Encoding``, a body on ``GET``/``HEAD``/``DELETE``, any multipart shape but
the two parts in order (duplicates, other parts, parts without a filename), a ``meta`` that is not a JSON object
or holds negative zero, U+0000 or the members ``principal``/``contentHash`` — 400 ``VALIDATION_FAILED``; a write
that is not multipart — 415; more than :data:`MAX_PARTS` parts or a part over its limit — 413; past the owner's
quota — 507 ``ASSET_QUOTA_EXCEEDED``. A miss is 404 ``ASSET_NOT_FOUND``, byte-identical for a foreign, missing,
deleted or unaddressable id (an encoded ``/`` or NUL included). A known path with another method is 405
``METHOD_NOT_ALLOWED`` with ``Allow``. Every error also carries its code in ``X-Error-Code`` (style ``asset``).
"""

from __future__ import annotations

import json
from typing import Any

from quart import Blueprint, Response

from openmaic import errors
from openmaic.api.persistence import UnsupportedAsset, import_fence, owner_writes
from openmaic.api.routing import Call, api_route, too_large
from openmaic.api.wire import Wire, encode
from openmaic.media import storage_assets

__all__ = ["SAFE_TYPES", "bp"]

bp = Blueprint("persistence_assets", __name__)

SAFE_TYPES = frozenset({
    "image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "audio/mpeg", "audio/mp4", "audio/ogg",
    "audio/wav", "audio/webm", "video/mp4", "video/webm", "video/ogg",
})  # fmt: skip
"""Media types served as themselves (exact, case-insensitive, no parameters); every other is an attachment."""
MAX_PARTS = 8
MAX_META_BYTES = 64 * 1024
MAX_ASSET_BYTES = 32 * 1024 * 1024
_STYLE: dict[str, Any] = {"error_style": "asset"}
_FORBIDDEN_META = ("principal", "contentHash")


class AssetAllocated(Wire):
    id: str


def _invalid(message: str) -> errors.InvalidInput:
    return errors.InvalidInput(f"@openmaic/storage: {message}")


def _plain_request(call: Call, *, bodyless: bool) -> None:
    request = call.request
    if request.query_string:
        raise _invalid("asset routes take no query string")
    if request.headers.get("Content-Encoding"):
        raise _invalid("asset requests must not carry a Content-Encoding")
    if bodyless and ((request.content_length or 0) > 0 or request.headers.get("Transfer-Encoding")):
        raise _invalid(f"{request.method} takes no request body")


def _reject_negative_zero(literal: str) -> Any:
    value = float(literal) if any(c in literal for c in ".eE") else int(literal)
    if value == 0 and literal.startswith("-"):
        raise ValueError("negative zero")
    return value


def _no_nul(value: Any) -> None:
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError("U+0000")
    elif isinstance(value, dict):
        for k, v in value.items():
            _no_nul(k)
            _no_nul(v)
    elif isinstance(value, list):
        for v in value:
            _no_nul(v)


def _meta_of(raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_META_BYTES:
        raise too_large(MAX_META_BYTES)
    try:
        text = raw.decode("utf-8")
        meta = json.loads(text, parse_int=_reject_negative_zero, parse_float=_reject_negative_zero,
                          parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        _no_nul(meta)
    except (UnicodeDecodeError, ValueError) as exc:
        raise _invalid(f"meta must be a JSON object without negative zero or U+0000 ({exc.__class__.__name__})") \
            from None
    if not isinstance(meta, dict):
        raise _invalid("meta must be a JSON object")
    present = [k for k in _FORBIDDEN_META if k in meta]
    if present:
        raise _invalid(f"meta must not carry {', '.join(present)}")
    return meta


async def _parts(call: Call, *, meta_required: bool) -> tuple[dict[str, Any] | None, bytes, str]:
    """The write's ``meta`` (None when absent), bytes and recorded media type; refusals as the module says."""
    request = call.request
    if request.mimetype != "multipart/form-data":
        raise UnsupportedAsset("@openmaic/storage: send the asset as multipart/form-data: parts meta (JSON) then "
                               "bytes, each with a filename")
    form, files = await request.form, await request.files
    count = sum(len(v) for v in form.listvalues()) + sum(len(v) for v in files.listvalues())
    if count > MAX_PARTS:
        raise too_large(MAX_PARTS)
    if form:
        raise _invalid("every part must carry a filename")
    names = list(files.keys())
    if names not in (["meta", "bytes"], ["bytes"]) or any(len(files.getlist(n)) != 1 for n in names):
        raise _invalid("the parts must be meta (optional on PUT) then bytes, once each")
    if meta_required and "meta" not in files:
        raise _invalid("a new asset needs its meta part")
    meta = None
    if "meta" in files:
        part = files["meta"]
        if (part.mimetype or "").lower() != "application/json":
            raise _invalid("the meta part must be application/json")
        meta = _meta_of(part.read(MAX_META_BYTES + 1))
    upload = files["bytes"]
    data = upload.read(MAX_ASSET_BYTES + 1)
    if len(data) > MAX_ASSET_BYTES:
        raise too_large(MAX_ASSET_BYTES)
    media_type = upload.content_type or "application/octet-stream"
    if meta is not None and "contentType" in meta:
        media_type = meta["contentType"] if isinstance(meta["contentType"], str) else ""
    return meta, data, media_type


@api_route(bp, "POST", "/api/persistence/assets", response=AssetAllocated, status=201, body_limit="upload",
           upload="multipart", upload_field="bytes", errors=(400, 409, 413, 415, 507), **_STYLE)
@owner_writes
async def create_asset(call: Call) -> Response:
    """Store an asset (any type; see the module doc for how it is served); a new id every time."""
    await import_fence(call)
    _plain_request(call, bodyless=False)
    meta, data, media_type = await _parts(call, meta_required=True)
    assert meta is not None
    asset_id = await storage_assets.create(call.services.db, call.user, data, media_type, meta,
                                           call.services.config.limits.asset_bytes_per_owner)
    return Response(encode(AssetAllocated(id=asset_id)), 201, content_type="application/json", headers={"X-Asset-Revision": "1"})


def _byte_headers(entry: storage_assets.Entry) -> dict[str, str]:
    media_type = entry.media_type.strip().lower()
    headers = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox",
               "Cache-Control": "private, no-store", "Vary": "Cookie, Authorization",
               "X-Asset-Revision": str(entry.revision), "Content-Length": str(entry.size)}
    if media_type in SAFE_TYPES:
        headers["Content-Type"] = media_type
    else:
        headers["Content-Type"] = "application/octet-stream"
        headers["Content-Disposition"] = "attachment"
    return headers


@api_route(bp, "GET", "/api/persistence/assets/{asset_id}/content", media_type="application/octet-stream",
           errors=(400, 404, 409), **_STYLE)
async def get_asset_content(call: Call, asset_id: str) -> Response:
    """The bytes of one of your assets (HEAD: its headers; a generated asset's id, such as a narration clip's
    audioId, reads here too)."""
    await import_fence(call)
    _plain_request(call, bodyless=True)
    entry = await storage_assets.read_entry(call.services.db, call.user, asset_id)
    headers = _byte_headers(entry)
    if call.request.method == "HEAD":
        response = Response(b"", 200, headers=headers)
        response.headers["Content-Length"] = str(entry.size)  # the GET's length, though no bytes follow
        return response
    data = await storage_assets.read_bytes(call.services.db, call.user, entry)
    return Response(data, 200, headers=headers)


@api_route(bp, "PUT", "/api/persistence/assets/{asset_id}/content", body_limit="upload", upload="multipart",
           upload_field="bytes", errors=(400, 404, 409, 413, 415, 507), **_STYLE)
@owner_writes
async def replace_asset_content(call: Call, asset_id: str) -> Response:
    """New bytes for one of your assets (meta optional: the old one is kept); its revision goes up by one."""
    await import_fence(call)
    _plain_request(call, bodyless=False)
    meta, data, media_type = await _parts(call, meta_required=False)
    revision = await storage_assets.replace(call.services.db, call.user, asset_id, data, media_type, meta,
                                            call.services.config.limits.asset_bytes_per_owner)
    return Response(b"", 204, headers={"X-Asset-Revision": str(revision)})


@api_route(bp, "DELETE", "/api/persistence/assets/{asset_id}", errors=(400, 409), **_STYLE)
@owner_writes
async def delete_asset(call: Call, asset_id: str) -> None:
    """Forget one of your assets (any id: 204)."""
    await import_fence(call)
    _plain_request(call, bodyless=True)
    await storage_assets.delete(call.services.db, call.user, asset_id)
