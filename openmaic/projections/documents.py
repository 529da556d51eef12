"""``course_documents``: each course's current document, folded with the same ``evolve_course`` the actors use.

Read model (what the API reads)::

    course_documents(course_id PK, owner_id, document json, seq, deleted, updated_at)   -- index (owner_id)

``document`` is the msgspec JSON of :class:`~openmaic.courses.events.CourseDocument` (decode it with
``msgspec.json.decode(document, type=CourseDocument)`` or serve the text as it is); ``seq`` is the course
stream's seq it reflects; ``deleted`` mirrors ``document.deleted`` for filtering in SQL.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import NamedTuple

import msgspec

from openmaic.courses.events import CourseDocument, evolve_course
from openmaic.events.core import StreamOwnerChanged
from openmaic.events.fold_cache import FoldCache
from openmaic.events.log import RecordedEvent
from openmaic.events.types import registry
from openmaic.projections.base import Context, Projection
from openmaic.store.database import Op
from openmaic.store.queries import load_sql

_decode_doc = msgspec.json.Decoder(CourseDocument).decode
_encode = msgspec.json.Encoder().encode

SQL = load_sql(__package__, "documents.sql")


class _Loaded(msgspec.Struct, frozen=True):
    """A course a batch touches (``load``): its stored document, if any, and its owner."""

    id: str
    owner_id: str | None
    document: str | None
    updated_at: dt.datetime | None


class _Kept(NamedTuple):
    """A course's row as this applier committed it (see ``Context.kept``)."""

    document: CourseDocument
    owner_id: str | None
    updated_at: object
    size: int
    """The document's JSON length: what it counts against :data:`KEPT_BYTES`."""


KEPT_BYTES = 8 * 1024 * 1024
"""The documents kept in memory per applier, by their JSON's length (least recently written dropped first)."""

COURSE_TYPES = frozenset(t for t in registry.tags() if t.startswith("course."))
OWNER_CHANGED = StreamOwnerChanged.__struct_config__.tag


class CourseDocuments(Projection):
    """The folded :class:`CourseDocument` of every course stream."""

    name = "course_documents"
    tables = {
        "course_documents": (SQL.create_course_documents, SQL.create_course_documents_owner_index),
    }
    types = COURSE_TYPES | {OWNER_CHANGED}

    def wants(self, type_: str) -> bool:
        # Every course event counts, including types added after this module was imported: evolve_course
        # advances the document's seq for those it does not know. A claim moves a document with its course.
        return type_.startswith("course.") or type_ == OWNER_CHANGED

    async def apply(self, ctx: Context, events: Sequence[RecordedEvent]) -> list[Op]:
        ids = list(dict.fromkeys(e.stream_id for e in events))
        docs: dict[str, CourseDocument] = {}
        owners: dict[str, str | None] = {}
        updated: dict[str, object] = {}
        courses: set[str] = set()
        # The rows this applier wrote last are kept (as committed), so a course written batch after batch is not
        # read back and decoded each time; the others are loaded.
        kept: FoldCache[_Kept] = ctx.kept.setdefault(self.name, FoldCache(KEPT_BYTES, lambda k: k.size))
        load = []
        for i in ids:
            hit = kept.get(i)
            if hit is None:
                load.append(i)
                continue
            k = hit[0]
            docs[i], owners[i], updated[i] = k.document, k.owner_id, k.updated_at
            courses.add(i)
        for r in await ctx.fetch(_Loaded, SQL.load, load) if load else ():
            docs[r.id] = _decode_doc(r.document) if r.document is not None else CourseDocument()
            owners[r.id] = r.owner_id
            updated[r.id] = r.updated_at
            if r.document is not None:
                courses.add(r.id)
        for e in events:
            if e.type == OWNER_CHANGED:
                # Every claimed stream records its owner change; only a course has a document to move.
                if e.stream_id in courses:
                    owners[e.stream_id] = msgspec.json.decode(e.data, type=StreamOwnerChanged).to_owner_id
                    docs[e.stream_id] = msgspec.structs.replace(docs[e.stream_id], seq=e.seq)
                continue
            courses.add(e.stream_id)
            ev = ctx.decode(e)
            doc = docs[e.stream_id]
            docs[e.stream_id] = evolve_course(doc, ev, e.seq) if ev is not None else msgspec.structs.replace(
                doc, seq=e.seq
            )
            prev = updated[e.stream_id]
            if prev is None or e.recorded_at > prev:  # type: ignore[operator]
                updated[e.stream_id] = e.recorded_at
        rows = [i for i in ids if owners[i] is not None and i in courses]
        if not rows:
            return []
        texts = [_encode(docs[i]).decode() for i in rows]
        written = [_Kept(docs[i], owners[i], updated[i], len(t)) for i, t in zip(rows, texts)]

        def keep() -> None:
            for i, k in zip(rows, written):
                kept.put(i, k, k.document.seq, b"")

        ctx.after_commit(keep)
        return [ctx.op(
            SQL.upsert,
            rows, [owners[i] for i in rows], texts, [docs[i].seq for i in rows],
            [docs[i].deleted for i in rows], [updated[i] for i in rows],
        )]
