"""The asset store for generated media: PostgreSQL, content-addressed, owner-scoped, within a per-owner quota.

Generated pictures, videos, posters and narration clips are rows of the ``assets`` table (with the materials'
images; migration 0012), so a backup of the database is a backup of every course with its media.

* **Content-addressed.** An asset's id is ``asset_`` + the first 32 hex digits of sha256(owner ‖ 0 ‖ sha256 of
  the bytes): storing the same bytes twice for one owner is one row and costs the quota once, which makes a
  re-run step (a takeover after the bytes were stored) free. Two owners never share a row, so an id tells
  nothing about another owner's files. The ETag is the bytes' sha256.
* **Owner-scoped.** Every read names the owner; another owner's asset is the same NotFound as a missing one.
  A write names the owner its step folded; when that owner has since been claimed into an account, the write
  lands with the account and is judged by the account's usage (``openmaic_owner``, migration 0010).
* **Quota.** An owner's assets together stay within ``limits.asset_bytes_per_owner``; a write past it is
  :class:`AssetQuotaExceeded` and writes nothing. Writes of one owner are serialized by a transaction-scoped
  advisory lock, and the usage is read by the statement after the lock, so concurrent writes cannot overshoot.
* **Nothing else is kept**: no provider name, model, prompt or key; only what the bytes are for (``kind``) and
  the course they were made for.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Literal

import msgspec

from openmaic import errors
from openmaic.models.media import GeneratedMedia
from openmaic.store.database import Database
from openmaic.store.gateway import typed
from openmaic.store.queries import Q

__all__ = ["MEDIA_TYPES", "AssetHead", "AssetKind", "AssetQuotaExceeded", "StoredAsset", "asset_id_for",
           "check_media_type", "read_asset_head", "read_asset_range", "store_generated", "usage"]  # fmt: skip

AssetKind = Literal["image", "video", "poster", "narration"]

DEFAULT_QUOTA_BYTES = 2 * 1024**3

MEDIA_TYPES = frozenset({
    "image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "image/bmp",
    "video/mp4", "video/webm", "video/ogg", "video/quicktime",
    "audio/mpeg", "audio/mp4", "audio/aac", "audio/wav", "audio/ogg", "audio/webm", "audio/flac",
})
"""The media types an asset is stored (and served) as: the one list for uploads, imports and generated media. An
asset is served under its stored type, so a type outside it (``text/html``, ``image/svg+xml``, anything with
parameters or a list) would let a stored file run as a page of this origin."""
_MEDIA_ALIASES = {"image/jpg": "image/jpeg", "audio/mp3": "audio/mpeg", "audio/x-wav": "audio/wav",
                  "audio/wave": "audio/wav", "audio/x-flac": "audio/flac", "audio/x-m4a": "audio/mp4"}


class AssetQuotaExceeded(errors.OpenMaicError):
    """The owner's asset storage is full."""

    code = "asset_quota_exceeded"
    status = 507
    error_code = "ASSET_QUOTA_EXCEEDED"


def check_media_type(value: str, *, path: str, kind: str = "") -> str:
    """``value`` as the asset media type it names (lowercase, aliases resolved), or :class:`errors.InvalidInput`
    (400, ``details.path`` = ``path``) when it holds control characters or is not one of :data:`MEDIA_TYPES`
    (starting with ``kind``, e.g. ``image/``, when given)."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise errors.InvalidInput(
            f"{path}: the media type holds control characters ({value[:40]!r}); send one type such as image/png",
            path=path)
    media_type = value.strip().lower()
    media_type = _MEDIA_ALIASES.get(media_type, media_type)
    if media_type not in MEDIA_TYPES or not media_type.startswith(kind):
        allowed = ", ".join(sorted(t for t in MEDIA_TYPES if t.startswith(kind)))
        raise errors.InvalidInput(f"{path}: {value[:40]!r} is not a media type this server stores; one of {allowed}",
                                  path=path)
    return media_type


class StoredAsset(msgspec.Struct, frozen=True, kw_only=True):
    """An asset as stored: its id, media type, size and sha256 (hex, the ETag)."""

    id: str
    media_type: str
    size: int
    sha256: str


class AssetHead(msgspec.Struct, frozen=True, kw_only=True):
    """An asset's metadata, without its bytes."""

    id: str
    media_type: str
    size: int
    sha256: str
    kind: str
    course_id: str | None
    created_at: dt.datetime


class AssetPut(msgspec.Struct, frozen=True):
    """What ``asset_put_within_quota`` answers: the asset already there, or the one it inserted, or neither (the
    quota is full: ``used`` bytes already)."""

    existing: str | None
    inserted: str | None
    used: int

    @property
    def stored(self) -> bool:
        return self.existing is not None or self.inserted is not None


class _Head(msgspec.Struct, frozen=True):
    id: str
    media_type: str
    size: int
    sha256: bytes
    kind: str
    course_id: str | None
    created_at: dt.datetime


class _Data(msgspec.Struct, frozen=True):
    data: bytes


class _Used(msgspec.Struct, frozen=True):
    bytes: int
    count: int


def asset_id_for(owner: str, digest: bytes) -> str:
    """The id of ``owner``'s asset whose bytes hash to ``digest`` (sha256)."""
    return "asset_" + hashlib.sha256(owner.encode() + b"\x00" + digest).hexdigest()[:32]


async def store_generated(
    db: Database, owner: str, course_id: str | None, kind: AssetKind, media: GeneratedMedia,
    *, quota_bytes: int = DEFAULT_QUOTA_BYTES,
) -> StoredAsset:
    """Store ``media`` for ``owner`` (idempotent: the same bytes give the same asset); AssetQuotaExceeded past
    the quota, and InvalidInput for a media type outside :data:`MEDIA_TYPES`, with nothing written."""
    media = msgspec.structs.replace(media, media_type=check_media_type(media.media_type, path="mediaType"))
    digest = hashlib.sha256(media.data).digest()
    asset_id = asset_id_for(owner, digest)
    size = len(media.data)
    results = await db.transaction([
        (Q.asset_owner_lock, (owner,)),
        (Q.asset_put_within_quota, (asset_id, owner, media.media_type, size, digest, media.data, kind, course_id,
                                    quota_bytes)),
    ])  # fmt: skip
    put = typed(AssetPut, results[-1][0])
    if not put.stored:
        raise AssetQuotaExceeded(
            f"the asset storage is full ({put.used} of {quota_bytes} bytes used; this {kind} needs {size})",
            used=put.used, quota=quota_bytes, size=size,
        )
    return StoredAsset(id=asset_id, media_type=media.media_type, size=size, sha256=digest.hex())


async def read_asset_head(db: Database, owner: str, asset_id: str) -> AssetHead:
    """The asset's metadata; NotFound for a missing asset or another owner's."""
    row = await db.fetchrow_as(_Head, Q.asset_head, asset_id, owner)
    if row is None:
        raise errors.NotFound(f"no asset {asset_id!r}", asset_id=asset_id)
    return AssetHead(id=row.id, media_type=row.media_type, size=row.size, sha256=bytes(row.sha256).hex(),
                     kind=row.kind, course_id=row.course_id, created_at=row.created_at)


async def read_asset_range(db: Database, owner: str, asset_id: str, start: int, length: int) -> bytes:
    """Bytes ``[start, start + length)`` of the asset (fewer at its end); NotFound as for ``read_asset_head``."""
    row = await db.fetchrow_as(_Data, Q.asset_range, asset_id, owner, start, length)
    if row is None:
        raise errors.NotFound(f"no asset {asset_id!r}", asset_id=asset_id)
    return bytes(row.data)


async def usage(db: Database, owner: str) -> tuple[int, int]:
    """``(bytes, count)`` of everything ``owner`` has stored."""
    row = await db.fetchrow_as(_Used, Q.assets_used, owner)
    assert row is not None  # an aggregate always answers one row
    return int(row.bytes), int(row.count)
