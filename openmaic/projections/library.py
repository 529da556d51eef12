"""``library_cards``: one card per course for the library page, with the state of the run building it.

Read model (what the API reads)::

    library_cards(course_id PK, owner_id, title, run_id, run_state, label, scenes_total, scenes_completed,
                  updated_at)          -- index (owner_id, updated_at DESC)

``label`` is the card's text: "preparing", "outlining", "waiting for confirmation", "generating 3/8",
"paused after a failure", "ready", "ended". ``scenes`` (scene id → status, in course order) is fold state.
A deleted course has no card; ``library_deleted`` remembers it so that later run events cannot bring it back,
and ``library_runs`` links a run to its course (run events carry only the run's id).

Events are decoded into small local Structs holding just what a card needs (msgspec skips the rest), so a
scene's full content is never materialised here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import msgspec

from openmaic.events.log import RecordedEvent
from openmaic.events.wakeups import CHANNEL, owner_hint
from openmaic.projections.base import Context, Projection, lite_decode
from openmaic.store.database import Op
from openmaic.store.queries import load_sql

LABELS = {
    "preparing": "preparing",
    "outlining": "outlining",
    "awaiting_outline_confirmation": "waiting for confirmation",
    "paused": "paused after a failure",
    "completed": "ready",
    "ended": "ended",
    "stopped": "ended",  # older logs' name for ended
}


def card_label(run_state: str | None, completed: int, total: int) -> str:
    """The card's text for a run state ("generating 3/8" while scenes are being generated)."""
    if run_state is None:
        return "ready"
    if run_state == "generating":
        return f"generating {completed}/{total}"
    return LABELS.get(run_state, run_state)


class _Scene(msgspec.Struct):
    id: str
    status: str = "pending"


class _Created(msgspec.Struct):
    title: str = ""


class _Outline(msgspec.Struct):
    title: str = ""
    scenes: list[_Scene] = []


class _SceneSet(msgspec.Struct):
    scene: _Scene


class _Id(msgspec.Struct):
    id: str


class _OutlineV2(msgspec.Struct):
    """``course.outline_set`` v2: the outline's scene ids (each pending until its scene is written)."""

    title: str = ""
    scene_ids: list[str] = []


class _SceneSetV2(msgspec.Struct):
    """``course.scene_set`` v2: an OpenMAIC scene and whether it is ready to play."""

    scene: _Id | None = None
    ready: bool = True


class _Named(msgspec.Struct):
    name: str = ""


class _StageSet(msgspec.Struct):
    stage: _Named


class _Document(msgspec.Struct):
    stage: _Named
    scenes: list[_Id] = []


class _DocumentSet(msgspec.Struct):
    """``course.document_set``: a whole document, saved at once (every scene of it ready)."""

    document: _Document


class _RestoredDoc(msgspec.Struct):
    title: str = ""
    scenes: list[_Id] = []
    ready: list[str] = []


class _Restored(msgspec.Struct):
    """``course.restored``: an earlier version of the course brought back whole."""

    document: _RestoredDoc


class _SceneDeleted(msgspec.Struct):
    scene_id: str


class _RunCreated(msgspec.Struct):
    course_id: str
    owner_id: str


class _RunState(msgspec.Struct):
    state: str


class _OwnerChanged(msgspec.Struct):
    to_owner_id: str


_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    "course.created": msgspec.json.Decoder(_Created),
    "course.retitled": msgspec.json.Decoder(_Created),
    "course.outline_set": msgspec.json.Decoder(_Outline),
    "course.scene_set": msgspec.json.Decoder(_SceneSet),
    "course.scene_deleted": msgspec.json.Decoder(_SceneDeleted),
    "course.restored": msgspec.json.Decoder(_Restored),
    "run.created": msgspec.json.Decoder(_RunCreated),
    "run.state_changed": msgspec.json.Decoder(_RunState),
    "stream.owner_changed": msgspec.json.Decoder(_OwnerChanged),
    "course.stage_set": msgspec.json.Decoder(_StageSet),
    "course.document_set": msgspec.json.Decoder(_DocumentSet),
}
_V2: dict[str, msgspec.json.Decoder[Any]] = {
    "course.outline_set": msgspec.json.Decoder(_OutlineV2),
    "course.scene_set": msgspec.json.Decoder(_SceneSetV2),
}
"""The course events whose version 2 holds OpenMAIC's document (openmaic.courses.events): read by their version."""
_scenes_decoder = msgspec.json.Decoder(dict[str, str])
_encode = msgspec.json.Encoder().encode

SQL = load_sql(__package__, "library.sql")


class LibraryCard(msgspec.Struct, frozen=True):
    """An owner's card as the read side lists it (``library_cards_of_owner``)."""

    course_id: str
    title: str
    run_id: str | None
    run_state: str | None
    label: str
    scenes_total: int
    scenes_completed: int
    updated_at: dt.datetime


class _Loaded(msgspec.Struct, frozen=True):
    """A course a batch touches, as ``load`` reads it: its stored card (``stored``), if any, and its runs."""

    id: str
    stream_owner: str | None
    deleted: bool
    owner_id: str | None
    title: str | None
    run_id: str | None
    run_state: str | None
    scenes: str | None
    updated_at: dt.datetime | None
    stored: bool
    runs: list[str] | None


class _Card:
    __slots__ = ("course_id", "owner_id", "title", "run_id", "run_state", "scenes", "updated_at", "stored",
                 "deleted", "dirty")

    def __init__(self, course_id: str, owner_id: str | None) -> None:
        self.course_id = course_id
        self.owner_id = owner_id
        self.title = ""
        self.run_id: str | None = None
        self.run_state: str | None = None
        self.scenes: dict[str, str] = {}
        self.updated_at: dt.datetime | None = None
        self.stored = False
        self.deleted = False
        self.dirty = False

    def touch(self, at: dt.datetime) -> None:
        self.dirty = True
        if self.updated_at is None or at > self.updated_at:
            self.updated_at = at


class LibraryCards(Projection):
    """Course cards for the library, from ``course.*``, ``run.created`` / ``run.state_changed`` and a course's
    ``stream.owner_changed`` (a claim: the card follows its course to the account)."""

    name = "library_cards"
    tables = {
        "library_cards": (SQL.create_library_cards, SQL.create_library_cards_owner_index),
        "library_runs": (SQL.create_library_runs,),
        "library_deleted": (SQL.create_library_deleted,),
    }
    types = frozenset(_DECODERS) | {"course.deleted"}

    async def apply(self, ctx: Context, events: Sequence[RecordedEvent]) -> list[Op]:
        decoded: list[tuple[RecordedEvent, Any]] = []
        course_ids: dict[str, None] = {}
        run_ids: dict[str, None] = {}
        for e in events:
            dec = _V2.get(e.type) if e.v >= 2 else None
            dec = dec or _DECODERS.get(e.type)
            ev = lite_decode(dec, e) if dec is not None else True
            if ev is None:
                continue
            decoded.append((e, ev))
            if e.type.startswith("run."):
                run_ids[e.stream_id] = None
                if isinstance(ev, _RunCreated):
                    course_ids[ev.course_id] = None
            else:
                course_ids[e.stream_id] = None  # a course's event (or any stream's owner change, sorted out below)

        cards: dict[str, _Card] = {}
        run_course: dict[str, str] = {}
        loaded_owner: dict[str, str | None] = {}
        for r in await ctx.fetch(_Loaded, SQL.load, list(course_ids), list(run_ids)):
            card = _Card(r.id, r.owner_id or r.stream_owner)
            loaded_owner[card.course_id] = card.owner_id
            card.deleted = r.deleted
            if r.stored:
                card.stored = True
                card.title = r.title or ""
                card.run_id = r.run_id
                card.run_state = r.run_state
                card.scenes = _scenes_decoder.decode(r.scenes or "{}")
                card.updated_at = r.updated_at
            cards[card.course_id] = card
            for run_id in r.runs or ():
                run_course[run_id] = card.course_id

        new_runs: dict[str, str] = {}
        newly_deleted: list[str] = []
        for e, ev in decoded:
            if e.type.startswith("run."):
                if isinstance(ev, _RunCreated):
                    run_course[e.stream_id] = new_runs[e.stream_id] = ev.course_id
                    card = cards[ev.course_id]
                    if card.deleted:
                        continue
                    card.owner_id = card.owner_id or ev.owner_id
                    card.run_id, card.run_state = e.stream_id, "preparing"
                    card.touch(e.recorded_at)
                elif isinstance(ev, _RunState):
                    course_id = run_course.get(e.stream_id)
                    card = cards.get(course_id) if course_id else None
                    # Only the course's current run speaks for it; a deleted course stays gone.
                    if card is None or card.deleted or card.run_id != e.stream_id:
                        continue
                    card.run_state = ev.state
                    card.touch(e.recorded_at)
                continue
            card = cards[e.stream_id]
            if isinstance(ev, _OwnerChanged):
                # Every claimed stream records its owner change; only a course has a card to move.
                if card.stored or card.dirty:
                    card.owner_id = ev.to_owner_id
                    if not card.deleted:
                        card.touch(e.recorded_at)
                continue
            if card.deleted:
                continue
            match e.type:
                case "course.created" | "course.retitled":
                    card.title = ev.title
                case "course.outline_set" if isinstance(ev, _OutlineV2):
                    card.title = ev.title or card.title
                    written = {k: v for k, v in card.scenes.items() if k not in ev.scene_ids}
                    card.scenes = {**{sid: card.scenes.get(sid, "pending") for sid in ev.scene_ids}, **written}
                case "course.outline_set":
                    card.title = ev.title or card.title
                    card.scenes = {s.id: s.status for s in ev.scenes}
                case "course.scene_set" if isinstance(ev, _SceneSetV2):
                    if ev.scene is not None:
                        card.scenes[ev.scene.id] = "ready" if ev.ready else "pending"
                case "course.scene_set":
                    card.scenes[ev.scene.id] = ev.scene.status
                case "course.stage_set":
                    card.title = ev.stage.name or card.title
                case "course.document_set":
                    card.title = ev.document.stage.name or card.title
                    card.scenes = {s.id: "ready" for s in ev.document.scenes}
                case "course.scene_deleted":
                    card.scenes.pop(ev.scene_id, None)
                case "course.restored":
                    ready = set(ev.document.ready)
                    card.title = ev.document.title or card.title
                    card.scenes = {x.id: "ready" if x.id in ready else "pending" for x in ev.document.scenes}
                case "course.deleted":
                    card.deleted = True
                    newly_deleted.append(card.course_id)
                    continue
            card.touch(e.recorded_at)

        ops: list[Op] = []
        rows = [c for c in cards.values() if c.dirty and not c.deleted and c.owner_id is not None]
        if rows:
            totals = [len(c.scenes) for c in rows]
            done = [sum(1 for s in c.scenes.values() if s == "ready") for c in rows]
            ops.append(ctx.op(
                SQL.upsert,
                [c.course_id for c in rows], [c.owner_id for c in rows], [c.title for c in rows],
                [c.run_id for c in rows], [c.run_state for c in rows],
                [card_label(c.run_state, d, t) for c, d, t in zip(rows, done, totals)],
                totals, done, [c.updated_at for c in rows], [_encode(c.scenes).decode() for c in rows],
            ))
        if newly_deleted:
            ops.append(ctx.op(SQL.delete_cards, newly_deleted))
            ops.append(ctx.op(SQL.mark_deleted, newly_deleted))
        if new_runs:
            ops.append(ctx.op(SQL.upsert_runs, list(new_runs), list(new_runs.values())))
        # Each owner whose cards changed (both owners of a moved card) is told so in the same transaction: its
        # live list wakes after the change is visible, and no other owner's does.
        gone = set(newly_deleted)
        changed = [c for c in cards.values() if (c.dirty and not c.deleted) or c.course_id in gone]
        owners = {o for c in changed for o in (c.owner_id, loaded_owner.get(c.course_id)) if o is not None}
        if owners:
            ops.append(ctx.op(SQL.hint_owners, CHANNEL, [owner_hint("library", o) for o in sorted(owners)]))
        return ops
