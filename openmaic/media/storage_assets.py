"""OpenMAIC's asset registry (``@openmaic/storage``'s asset contract): ids, each one owner's, naming stored bytes.

* **A new id per upload.** :func:`create` allocates ``ast_`` + 26 lowercase base-32 characters (128 random bits)
  every time, even for bytes already stored; the bytes are a row of the ``assets`` table
  (:func:`openmaic.media.assets.store_upload`, kind ``upload``), content-addressed per owner, so one owner's
  same bytes are stored once. Their hash never leaves the database: only the id, the media type, the size and the
  revision are answered.
* **Revisions.** An entry starts at revision 1; :func:`replace` stores new bytes under the same id and adds one.
* **Metadata** (``meta``) is kept verbatim and never answered. The recorded media type is ``meta.contentType``
  when present (even empty), else the type of the uploaded part.
* **Owner-scoped.** Every read names the owner; another owner's id is the same :class:`AssetNotFound` as a
  missing one. A generated asset (``asset_…``, a narration clip a course's ``audioId`` names) of the owner's reads
  as an entry at revision 1, so a browser resolving ``audioId`` through its asset store finds it.
* **Quota.** The entries of one owner stay within ``limits.asset_bytes_per_owner`` counted by entry (logical
  bytes), and the stored bytes within it too (physical); past it is 507 ``ASSET_QUOTA_EXCEEDED``, writing nothing
  new to the registry.
"""

from __future__ import annotations

import base64
import secrets
from typing import Any

import msgspec

from openmaic import errors
from openmaic.media.assets import AssetQuotaExceeded, read_asset_head, read_asset_range, store_upload
from openmaic.store.database import Database
from openmaic.store.queries import Q

__all__ = ["AssetNotFound", "Entry", "create", "delete", "new_id", "read_bytes", "read_entry", "replace"]


class AssetNotFound(errors.NotFound):
    """No asset of yours has this id."""

    error_code = "ASSET_NOT_FOUND"

    def __init__(self) -> None:
        # Fixed, and the same for a missing and a foreign id: the answer must not tell them apart.
        super().__init__("@openmaic/storage: asset not found")


class Entry(msgspec.Struct, frozen=True, kw_only=True):
    """A registry entry: what a byte response's headers say."""

    id: str
    bytes_id: str
    media_type: str
    size: int
    revision: int


def new_id() -> str:
    """``ast_`` + 26 lowercase base-32 characters of 128 random bits."""
    return "ast_" + base64.b32encode(secrets.token_bytes(16)).decode().rstrip("=").lower()


def _usable(asset_id: str) -> bool:
    # Postgres text holds no NUL; such an id (like any absurd one) is simply a miss.
    return 0 < len(asset_id) <= 512 and "\x00" not in asset_id


async def read_entry(db: Database, owner: str, asset_id: str) -> Entry:
    """``owner``'s entry ``asset_id`` (or generated asset); AssetNotFound otherwise."""
    if not _usable(asset_id):
        raise AssetNotFound()
    row = await db.fetchrow(Q.storage_asset_get, asset_id, owner)
    if row is not None:
        return Entry(id=asset_id, bytes_id=row["bytes_id"], media_type=row["media_type"], size=row["size"],
                     revision=row["revision"])
    if asset_id.startswith("asset_"):
        try:
            head = await read_asset_head(db, owner, asset_id)
        except errors.NotFound:
            raise AssetNotFound() from None
        return Entry(id=asset_id, bytes_id=asset_id, media_type=head.media_type, size=head.size, revision=1)
    raise AssetNotFound()


async def read_bytes(db: Database, owner: str, entry: Entry) -> bytes:
    """The bytes an entry names (re-checking the owner)."""
    try:
        return await read_asset_range(db, owner, entry.bytes_id, 0, entry.size)
    except errors.NotFound:
        raise AssetNotFound() from None


async def _store(db: Database, owner: str, data: bytes, quota: int) -> str:
    return (await store_upload(db, owner, data, quota_bytes=quota)).id


def _full(used: int, size: int, quota: int) -> AssetQuotaExceeded:
    return AssetQuotaExceeded(f"your assets take {used:,} bytes and this one {size:,}; at most {quota:,} are allowed "
                              "(limits.asset_bytes_per_owner); delete some (DELETE /api/persistence/assets/{id}) "
                              "first", key="limits.asset_bytes_per_owner", limit=quota)


async def create(db: Database, owner: str, data: bytes, media_type: str, meta: dict[str, Any], quota: int) -> str:
    """A new entry of ``owner``'s for ``data``; its id."""
    bytes_id = await _store(db, owner, data, quota)
    asset_id = new_id()
    results = await db.transaction([
        (Q.asset_owner_lock, (owner,)),
        (Q.storage_asset_insert, (asset_id, owner, bytes_id, media_type, len(data),
                                  msgspec.json.encode(meta).decode(), quota)),
    ])  # fmt: skip
    row = results[-1][0]
    if row["inserted"] is None:
        raise _full(int(row["used"]), len(data), quota)
    return asset_id


async def replace(db: Database, owner: str, asset_id: str, data: bytes, media_type: str, meta: dict[str, Any] | None,
                  quota: int) -> int:
    """New bytes (and metadata, when given) for ``owner``'s entry ``asset_id``; its new revision."""
    await read_entry(db, owner, asset_id)  # a miss stores nothing
    bytes_id = await _store(db, owner, data, quota)
    meta_json = None if meta is None else msgspec.json.encode(meta).decode()
    results = await db.transaction([
        (Q.asset_owner_lock, (owner,)),
        (Q.storage_asset_replace, (asset_id, owner, bytes_id, media_type, len(data), meta_json, quota)),
    ])  # fmt: skip
    row = results[-1][0]
    if row["revision"] is None:
        if not row["present"]:
            raise AssetNotFound()  # deleted meanwhile
        raise _full(int(row["used"]), len(data), quota)
    return int(row["revision"])


async def delete(db: Database, owner: str, asset_id: str) -> None:
    """Forget ``owner``'s entry ``asset_id`` (any other id: nothing happens). Its bytes stay for the collector."""
    if _usable(asset_id):
        await db.execute(Q.storage_asset_delete, asset_id, owner)
