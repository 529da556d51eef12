"""Uploaded materials: text extracted on the server, images kept as assets, everything owner-scoped.

A material is what a run's ``material_ids`` refer to. Its id is OpenMAIC's shape, ``mat_`` and 26 Crockford
base32 characters (a ULID: its time first, so ids sort by upload). Each owner may keep
``limits.materials_per_owner`` materials of at most ``limits.material_bytes_per_owner`` bytes in all: an upload
past either is refused (:class:`MaterialQuotaFull`), checked and inserted under the owner's lock so that
concurrent uploads cannot pass it together. Deleting a material removes it for good (a run that already read
it keeps what it read: the text is in the run's log, an image's asset stays). Its type is judged by its bytes first (PDF and image magic
numbers), then by its declared type or file name for plain text (``.txt``, ``.md``): a client's label alone
never decides how bytes are parsed. Text must be UTF-8 (a byte-order mark is tolerated); PDFs are read in a
child process on a budget (:mod:`openmaic.extraction`: a hostile PDF costs its child, never the server); images
are stored as assets (bytes in the database, referenced by id, never inlined as base64 in events or prompts).

Reads filter by owner, so another owner's material is a NotFound identical to a missing one.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import time
import uuid
from collections.abc import Sequence

import msgspec

from openmaic import errors, quotas
from openmaic.extraction.pdf import Extractor, UnreadableFile
from openmaic.store.database import Database
from openmaic.store.gateway import typed
from openmaic.store.queries import Q

MATERIALS_LOCK = 0x6F6D6D61
"""First key of the owner lock that serializes an owner's uploads (see :func:`store_material`)."""

__all__ = [
    "EXCERPT_CHARS", "FORMATS", "MAX_RUN_MATERIALS", "MAX_RUN_MATERIAL_BYTES", "MaterialFormat", "MAX_TEXT_CHARS",
    "MODEL_IMAGES", "MODEL_IMAGE_BYTES", "Material", "MaterialQuotaFull", "MaterialSummary", "UnreadableFile", "UnsupportedFileType",
    "declared_type", "delete_material", "excerpt_of", "get_asset", "get_material", "images_for_model", "list_materials", "material_sizes",
    "material_texts", "missing_materials", "new_material_id", "store_material", "valid_material_id",
]  # fmt: skip

MAX_TEXT_CHARS = 1_000_000
"""Extracted text kept per material; the rest of a very long document is dropped."""

MAX_RUN_MATERIALS = 5
"""Materials one run may use (OpenMAIC's limit)."""
MAX_RUN_MATERIAL_BYTES = 150 * 1024 * 1024
"""The total size of one run's materials (OpenMAIC's ``maxTotalBytes``)."""

MODEL_IMAGES = 8
"""At most this many of a run's images are shown to the model (the first ones, in the order given)."""
MODEL_IMAGE_BYTES = 5 * 1024 * 1024
"""Larger images are not shown to the model: providers refuse images over about 5 MB."""


class MaterialFormat(msgspec.Struct, frozen=True, kw_only=True):
    """A format this server reads: an id, its MIME type and the file name extensions it goes by."""

    id: str
    mime: str
    extensions: tuple[str, ...]


FORMATS: tuple[MaterialFormat, ...] = (
    MaterialFormat(id="pdf", mime="application/pdf", extensions=(".pdf",)),
    MaterialFormat(id="txt", mime="text/plain", extensions=(".txt",)),
    MaterialFormat(id="md", mime="text/markdown", extensions=(".md", ".markdown")),
    MaterialFormat(id="png", mime="image/png", extensions=(".png",)),
    MaterialFormat(id="jpeg", mime="image/jpeg", extensions=(".jpg", ".jpeg")),
    MaterialFormat(id="gif", mime="image/gif", extensions=(".gif",)),
    MaterialFormat(id="webp", mime="image/webp", extensions=(".webp",)),
)
"""What an upload may be: text is extracted from documents; images are shown to the model that plans the outline."""

_TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/x-markdown"})
_TEXT_SUFFIXES = (".txt", ".md", ".markdown")
_IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


class UnsupportedFileType(errors.InvalidInput):
    """This file type is not supported; upload PDF, plain text, Markdown or an image (PNG, JPEG, GIF, WebP)."""

    code = "unsupported_file_type"
    status = 415


class MaterialQuotaFull(errors.TooManyRequests):
    """You keep as many materials as you may; delete some (DELETE /api/materials/{id}) and upload again."""

    code = "material_quota_full"


MATERIALS_QUOTA = quotas.Quota(
    key="materials_per_owner", bytes_key="material_bytes_per_owner", namespace=MATERIALS_LOCK, usage=Q.materials_usage,
    noun="materials", remedy="delete some (DELETE /api/materials/{id}) and upload again", error=MaterialQuotaFull)


class MaterialSummary(msgspec.Struct, frozen=True, kw_only=True):
    """An uploaded material as its owner's list shows it: what reading it found, without the text itself."""

    id: str
    filename: str
    media_type: str
    size: int
    asset_id: str | None
    created_at: dt.datetime
    characters: int = 0
    """Characters of text read (0 for an image)."""
    excerpt: str = ""
    """The first words read (:func:`excerpt_of`), so the owner sees the file was understood."""
    pages: int | None = None
    """The pages read from a PDF; None for other files, and for PDFs uploaded before the count was stored."""

    @property
    def format(self) -> str:
        """The id of its format in :data:`FORMATS` (``pdf``, ``md``, ``png``, …)."""
        return format_of(self.media_type)


class Material(MaterialSummary, frozen=True, kw_only=True):
    """An uploaded material. ``text`` is what was extracted (empty for an image, whose bytes are ``asset_id``)."""

    text: str


EXCERPT_CHARS = 240
"""The longest excerpt kept (the migration that added the column cuts older materials' text the same way)."""


def excerpt_of(text: str) -> str:
    """The first words of ``text``: whitespace folded, at most :data:`EXCERPT_CHARS` characters, cut at a word."""
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS].rsplit(" ", 1)[0] + "…"


# -- ids -----------------------------------------------------------------------------------------------------------

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_ID = re.compile(r"mat_[0-9A-HJKMNP-TV-Z]{26}")
_LEGACY_ID = re.compile(r"mat_[0-9a-f]{32}")  # uploads stored before ids took OpenMAIC's shape


def new_material_id() -> str:
    """``mat_`` and a ULID: 48 bits of milliseconds, then 80 random bits, in Crockford base32."""
    value = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(os.urandom(10), "big")
    return "mat_" + "".join(_CROCKFORD[(value >> (5 * i)) & 31] for i in reversed(range(26)))


def valid_material_id(material_id: str) -> bool:
    """Whether ``material_id`` has a material id's shape (OpenMAIC's, or this server's earlier one)."""
    return bool(_ID.fullmatch(material_id) or _LEGACY_ID.fullmatch(material_id))


# -- types -------------------------------------------------------------------------------------------------------

_ALIASES = {"text/x-markdown": "text/markdown", "image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg",
            "application/x-pdf": "application/pdf"}  # fmt: skip


def declared_type(content_type: str) -> str | None:
    """The format's MIME type a declared ``Content-Type`` names (parameters dropped, aliases resolved), or None
    when this server does not read that type."""
    mime = content_type.split(";", 1)[0].strip().lower()
    mime = _ALIASES.get(mime, mime)
    return mime if any(f.mime == mime for f in FORMATS) else None


def format_of(media_type: str) -> str:
    return next((f.id for f in FORMATS if f.mime == media_type), media_type)


def _sniff(filename: str, media_type: str, data: bytes) -> str:
    """The media type the bytes really are (magic numbers first), or UnsupportedFileType."""
    if data[:5] == b"%PDF-":
        return "application/pdf"
    for magic, kind in _IMAGE_MAGIC:
        if data.startswith(magic):
            return kind
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    declared = media_type.split(";", 1)[0].strip().lower()
    name = filename.lower()
    if declared == "application/pdf" or name.endswith(".pdf"):
        # Named or sent as a PDF, but without the header every PDF starts with: damaged, or not a PDF at all.
        raise UnreadableFile(
            f"{filename!r} could not be read as a PDF: it does not start with the %PDF- header every PDF file has "
            "(the file is damaged or is not really a PDF); export it as a PDF again and upload that",
            filename=filename,
        )
    if declared in _TEXT_TYPES or name.endswith(_TEXT_SUFFIXES):
        return "text/markdown" if name.endswith((".md", ".markdown")) or "markdown" in declared else "text/plain"
    shown = declared or "no type"
    raise UnsupportedFileType(
        f"unsupported file type ({shown}, {filename!r}); upload PDF, plain text, Markdown or an image "
        "(PNG, JPEG, GIF, WebP)",
        media_type=declared, filename=filename,
    )


def _text_of(filename: str, data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(
            f"{filename!r} is not UTF-8 text (invalid byte at offset {exc.start}); save it as UTF-8 and upload it "
            "again", filename=filename,
        ) from None
    if "\x00" in text:
        raise UnsupportedFileType(f"{filename!r} is not a text file (it contains NUL bytes)", filename=filename)
    return text.replace("\r\n", "\n")


MAX_NAME_CHARS = 512


def _clean_name(filename: str) -> str:
    # Only the base name, without control characters: it is shown back to people and put in prompts.
    base = filename.replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(c for c in base if c.isprintable()).strip()
    return base[:MAX_NAME_CHARS] or "upload"


async def store_material(
    db: Database, owner: str, filename: str, media_type: str, data: bytes, *, max_count: int | None = None,
    max_bytes: int | None = None, extractor: Extractor | None = None,
) -> Material:
    """Store an upload of ``owner`` and extract its text (a PDF's through ``extractor``, the process's budget
    for reading documents; a default one when None).

    Raises UnsupportedFileType (415) for anything but PDF, text, Markdown and PNG/JPEG/GIF/WebP images,
    UnreadableFile (400) for text that is not UTF-8 or a PDF that cannot be parsed, the extractor's refusals
    (:mod:`openmaic.extraction.pdf`) for a PDF over its budget, and MaterialQuotaFull (429) when the owner
    already keeps ``max_count`` materials, or this one would take them past ``max_bytes``.
    """
    name = _clean_name(filename)
    kind = _sniff(name, media_type, data)
    asset_id: str | None = None
    text = ""
    pages: int | None = None
    if kind.startswith("image/"):
        asset_id = "asset_" + uuid.uuid4().hex
    elif kind == "application/pdf":
        extracted = await (extractor or Extractor()).pdf_text(data, owner=owner, filename=name)
        text, pages = extracted.text, extracted.pages_read
    else:
        text = _text_of(name, data)
    text = text[:MAX_TEXT_CHARS]
    material_id = new_material_id()
    ops: list[tuple[str, Sequence[object]]] = []
    if asset_id is not None:
        ops.append((Q.asset_insert, (asset_id, owner, kind, len(data), hashlib.sha256(data).digest(), data)))
    ops.append((Q.material_insert, (material_id, owner, name, kind, len(data), text, asset_id, len(text),
                                    excerpt_of(text), pages)))
    if max_count is None and max_bytes is None:
        results = await db.transaction(ops)
        return typed(Material, results[-1][0])
    # The quota is read and the row written in one transaction under the owner's lock: two uploads at once
    # cannot both take the last place.
    async with quotas.within(db, owner, MATERIALS_QUOTA, max_count if max_count is not None else 2**62,
                             adding_bytes=len(data), byte_limit=max_bytes) as conn:
        for sql, args in ops[:-1]:
            await conn.execute(sql, *args)
        sql, args = ops[-1]
        stored = await conn.fetchrow_as(Material, sql, *args)
    assert stored is not None  # an INSERT … RETURNING returns its row
    return stored


async def delete_material(db: Database, owner: str, material_id: str) -> bool:
    """Delete ``owner``'s material; False when there is none (missing, deleted already, or another owner's)."""
    return await db.fetchval(Q.material_delete, material_id, owner) is not None


async def material_sizes(db: Database, owner: str, material_ids: Sequence[str]) -> dict[str, int]:
    """The size in bytes of each of ``material_ids`` that is a material of ``owner``."""
    if not material_ids:
        return {}
    return {r.id: r.size for r in await db.fetch_as(_Size, Q.material_sizes, owner, list(material_ids))}


class _Size(msgspec.Struct, frozen=True):
    id: str
    size: int


class _Text(msgspec.Struct, frozen=True):
    """What a run's steps read of a material (``material_texts``)."""

    id: str
    filename: str
    media_type: str
    text: str
    asset_id: str | None


class _Blob(msgspec.Struct, frozen=True):
    media_type: str
    data: bytes


async def get_material(db: Database, owner: str, material_id: str) -> Material:
    """The material, or NotFound (also when it belongs to another owner)."""
    found = await db.fetchrow_as(Material, Q.material_get, material_id, owner)
    if found is None:
        raise errors.NotFound(f"no material {material_id!r}", material_id=material_id)
    return found


async def list_materials(db: Database, owner: str, limit: int, before: str | None = None,
                         ) -> list[MaterialSummary]:
    """``owner``'s materials, newest first (ids sort by upload time), after the id ``before``: their summaries, as
    the upload read them (never their text)."""
    return await db.fetch_as(MaterialSummary, Q.materials_of_owner, owner, limit, before)


async def get_asset(db: Database, owner: str, asset_id: str) -> tuple[str, bytes]:
    """``(media_type, bytes)`` of an asset, or NotFound (also when it belongs to another owner)."""
    blob = await db.fetchrow_as(_Blob, Q.asset_get, asset_id, owner)
    if blob is None:
        raise errors.NotFound(f"no asset {asset_id!r}", asset_id=asset_id)
    return blob.media_type, bytes(blob.data)


async def missing_materials(db: Database, owner: str, material_ids: Sequence[str]) -> list[str]:
    """The ids among ``material_ids`` that are not materials of ``owner``."""
    if not material_ids:
        return []
    found = {r.id for r in await db.fetch_as(_Text, Q.material_texts, owner, list(material_ids))}
    return [m for m in material_ids if m not in found]


async def images_for_model(db: Database, owner: str, asset_ids: Sequence[str]) -> list[tuple[str, bytes]]:
    """``(media_type, bytes)`` of the first :data:`MODEL_IMAGES` of ``owner``'s image assets among ``asset_ids``
    that a model accepts (at most :data:`MODEL_IMAGE_BYTES` each), in order."""
    rows = await db.fetch_as(_Blob, Q.assets_for_model, owner, list(dict.fromkeys(asset_ids)), MODEL_IMAGE_BYTES)
    return [(r.media_type, bytes(r.data)) for r in rows[:MODEL_IMAGES]]


async def material_texts(db: Database, owner: str, material_ids: Sequence[str]) -> tuple[str, list[str], list[str]]:
    """The text of the materials in the given order (each headed by its file name), their image asset ids, and
    the formats read (``pdf``, ``md``, ``png``, … once each).

    Raises NotFound when one of them is missing (deleted, or never the owner's).
    """
    rows = {r.id: r for r in await db.fetch_as(_Text, Q.material_texts, owner, list(material_ids))}
    missing = [m for m in material_ids if m not in rows]
    if missing:
        raise errors.NotFound(f"material {missing[0]!r} no longer exists", material_id=missing[0])
    parts: list[str] = []
    images: list[str] = []
    kinds: list[str] = []
    for mid in dict.fromkeys(material_ids):
        r = rows[mid]
        kinds.append(format_of(r.media_type))
        if r.asset_id is not None:
            images.append(r.asset_id)
        if r.text.strip():
            parts.append(f"# {r.filename}\n\n{r.text.strip()}")
    return "\n\n".join(parts), images, list(dict.fromkeys(kinds))
