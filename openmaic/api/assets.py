"""``GET /api/assets/{id}``: an owner's stored asset (a course's pictures, videos, posters, narration clips).

Owner-scoped: another owner's asset, a missing one and a malformed id are the same plain ``Not found``. The answer
carries the stored ``Content-Type`` (``application/octet-stream`` for a type outside
:data:`~openmaic.media.assets.MEDIA_TYPES`, stored before every type was checked), ``ETag`` (the bytes' sha256, quoted; assets are content-addressed, so it
never changes), ``Cache-Control: private, max-age=31536000, immutable`` and ``Accept-Ranges: bytes``, with
``X-Content-Type-Options: nosniff`` so a browser never reinterprets the bytes, and a sandboxing
``Content-Security-Policy`` so an asset opened on its own (an SVG a client uploaded) runs no script.

Ranges (RFC 9110 §14): one ``bytes=a-b``, ``bytes=a-`` or ``bytes=-n`` range answers 206 with
``Content-Range``; a range past the end answers 416 with ``Content-Range: bytes */<size>``; several ranges, or a
malformed header, get the whole asset (a server may ignore ``Range``). ``If-Range`` with another validator and
``If-None-Match`` follow the RFC (the latter answers 304). The body is read from PostgreSQL in 1 MiB slices as it
is sent, so a long video never sits whole in memory.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from quart import Blueprint, Response

from openmaic import errors
from openmaic.api.routing import Call, api_route
from openmaic.media.assets import MEDIA_TYPES, AssetHead, read_asset_head, read_asset_range

__all__ = ["bp", "parse_range"]

bp = Blueprint("assets", __name__)

CHUNK = 1024 * 1024
_ID = re.compile(r"^asset_[0-9a-f]{32}$")
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def parse_range(header: str | None, size: int) -> tuple[int, int] | None | str:
    """``(start, end)`` (inclusive) of a single satisfiable range; None to send everything; ``"unsatisfiable"``."""
    if not header:
        return None
    m = _RANGE.match(header.strip().replace(" ", ""))
    if m is None:
        return None  # several ranges, or another unit: the whole asset is a valid answer
    first, last = m.group(1), m.group(2)
    if not first and not last:
        return None
    if not first:  # the last n bytes
        n = int(last)
        if n == 0:
            return "unsatisfiable"
        return max(0, size - n), size - 1
    start = int(first)
    end = min(int(last), size - 1) if last else size - 1
    if last and int(last) < start:
        return None  # invalid: ignored
    if start >= size:
        return "unsatisfiable"
    return start, end


def _etag(head: AssetHead) -> str:
    return f'"{head.sha256}"'


def _matches(header: str | None, etag: str) -> bool:
    if not header:
        return False
    tags = [t.strip().removeprefix("W/") for t in header.split(",")]
    return "*" in tags or etag in tags


@api_route(bp, "GET", "/api/assets/{asset_id}", plain_not_found=True, media_type="application/octet-stream",
           errors=(404, 416))
async def get_asset(call: Call, asset_id: str) -> Response:
    """One of your stored assets (a course's media), with ranges for audio and video.

    Answers 200 with the whole asset, 206 for a byte range, 304 for a matching If-None-Match, 416 for a range
    past the end, and the plain text Not found for an asset that is not yours.
    """
    if not _ID.match(asset_id):
        raise errors.NotFound(f"no asset {asset_id!r}", asset_id=asset_id)
    db = call.services.db
    owner = call.user
    head = await read_asset_head(db, owner, asset_id)
    etag = _etag(head)
    headers = {
        "ETag": etag, "Cache-Control": "private, max-age=31536000, immutable", "Accept-Ranges": "bytes",
        "X-Content-Type-Options": "nosniff", "Content-Disposition": "inline",
        # Opened on its own (not in an <img> or <video>), an asset is a document of this origin: an SVG a client
        # uploaded must not run its scripts there.
        "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
    }  # fmt: skip
    request = call.request
    if _matches(request.headers.get("If-None-Match"), etag):
        return Response(b"", 304, headers=headers)
    wanted = parse_range(request.headers.get("Range"), head.size)
    if_range = request.headers.get("If-Range")
    if if_range is not None and if_range.strip() != etag:
        wanted = None  # the client's copy is another version: send the whole asset
    if wanted == "unsatisfiable":
        return Response(b"", 416, headers={**headers, "Content-Range": f"bytes */{head.size}"})
    status = 200
    start, end = 0, head.size - 1
    if isinstance(wanted, tuple):
        start, end = wanted
        status = 206
        headers["Content-Range"] = f"bytes {start}-{end}/{head.size}"
    length = end - start + 1 if head.size else 0
    headers["Content-Length"] = str(length)

    async def body() -> AsyncIterator[bytes]:
        at = start
        while at <= end:
            chunk = await read_asset_range(db, owner, asset_id, at, min(CHUNK, end - at + 1))
            if not chunk:
                return
            yield chunk
            at += len(chunk)

    # Stored before every stored type was checked, an asset may carry one outside the list (text/html, or one
    # holding CR LF that no header may carry): such bytes are served as what they cannot be run as.
    media_type = head.media_type if head.media_type in MEDIA_TYPES else "application/octet-stream"
    response = Response(body(), status, headers=headers, content_type=media_type)
    response.timeout = None  # a long video is sent at the client's pace
    return response
