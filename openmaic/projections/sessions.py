"""``session_list``: each owner's sessions (workbench sessions and generation runs) for listing.

Read model (what the API reads)::

    session_list(session_id PK, owner_id, kind, course_id, status, title, created_at, updated_at, seq)
        -- index (owner_id, updated_at DESC)

``kind`` is the session's kind (``workbench``, or ``generation`` for a run); ``title`` is the input's title (or
message, or a run's requirement), else the first message posted, cut to 120 characters. ``status``:

* workbench: ``queued`` when created or a message is posted, ``running`` once a worker claims it, ``idle``
  when it gives its lease back to wait for a follow-up, ``queued`` again after a shutdown interruption, and the
  status of ``session.ended`` (``failed``, ``cancelled``, …);
* generation: the run's state (``preparing``, ``outlining``, ``awaiting_outline_confirmation``, ``generating``,
  ``paused``, ``completed``, ``stopped``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import msgspec

from openmaic.events.core import REQUEUED
from openmaic.events.log import RecordedEvent
from openmaic.projections.base import Context, Projection, lite_decode
from openmaic.store.database import Op
from openmaic.store.queries import load_sql

TITLE_CHARS = 120


def short_title(text: str) -> str:
    line = text.strip().split("\n", 1)[0].strip()
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"


class _Created(msgspec.Struct):
    kind: str
    owner_id: str
    input: dict[str, Any] = {}


class _RunInput(msgspec.Struct, frozen=True):
    requirement: str = ""


class _RunCreated(msgspec.Struct):
    course_id: str
    owner_id: str
    input: _RunInput = _RunInput()


class _Text(msgspec.Struct):
    text: str = ""


class _Status(msgspec.Struct):
    status: str


class _Reason(msgspec.Struct):
    reason: str = ""


class _State(msgspec.Struct):
    state: str


class _OwnerChanged(msgspec.Struct):
    to_owner_id: str


_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    "session.created": msgspec.json.Decoder(_Created),
    "run.created": msgspec.json.Decoder(_RunCreated),
    "session.message_posted": msgspec.json.Decoder(_Text),
    "session.ended": msgspec.json.Decoder(_Status),
    "lease.released": msgspec.json.Decoder(_Reason),
    "run.state_changed": msgspec.json.Decoder(_State),
    "stream.owner_changed": msgspec.json.Decoder(_OwnerChanged),
}
_NO_DATA = frozenset({"lease.claimed", "session.interrupted"})

SQL = load_sql(__package__, "sessions.sql")


class _Stored(msgspec.Struct, frozen=True):
    """A session's stored row (``load``)."""

    session_id: str
    owner_id: str
    kind: str
    course_id: str | None
    status: str
    title: str
    created_at: dt.datetime
    updated_at: dt.datetime
    seq: int


class _Row:
    __slots__ = ("session_id", "owner_id", "kind", "course_id", "status", "title", "created_at", "updated_at",
                 "seq", "dirty")

    def __init__(self, session_id: str, owner_id: str, kind: str, created_at: dt.datetime) -> None:
        self.session_id = session_id
        self.owner_id = owner_id
        self.kind = kind
        self.course_id: str | None = None
        self.status = "queued"
        self.title = ""
        self.created_at = created_at
        self.updated_at = created_at
        self.seq = 0
        self.dirty = True


class SessionList(Projection):
    """Every session of every owner, with its status and title."""

    name = "session_list"
    tables = {
        "session_list": (SQL.create_session_list, SQL.create_session_list_owner_index),
    }
    types = frozenset(_DECODERS) | _NO_DATA

    async def apply(self, ctx: Context, events: Sequence[RecordedEvent]) -> list[Op]:
        ids = list(dict.fromkeys(e.stream_id for e in events))
        rows: dict[str, _Row] = {}
        for r in await ctx.fetch(_Stored, SQL.load, ids):
            row = _Row(r.session_id, r.owner_id, r.kind, r.created_at)
            row.course_id, row.status, row.title = r.course_id, r.status, r.title
            row.updated_at, row.seq, row.dirty = r.updated_at, r.seq, False
            rows[row.session_id] = row
        for e in events:
            dec = _DECODERS.get(e.type)
            ev = lite_decode(dec, e) if dec is not None else None
            if dec is not None and ev is None:
                continue
            sid = e.stream_id
            row = rows.get(sid)
            if isinstance(ev, _Created):
                if row is None:
                    row = rows[sid] = _Row(sid, ev.owner_id, ev.kind, e.recorded_at)
                course = ev.input.get("course_id")
                row.course_id = course if isinstance(course, str) else row.course_id
                for key in ("title", "message", "text", "requirement"):
                    if isinstance(ev.input.get(key), str) and ev.input[key].strip():
                        row.title = short_title(ev.input[key])
                        break
            elif isinstance(ev, _RunCreated):
                if row is None:
                    row = rows[sid] = _Row(sid, ev.owner_id, "generation", e.recorded_at)
                    row.status = "preparing"
                row.course_id = row.course_id or ev.course_id
                row.title = row.title or short_title(ev.input.requirement)
            elif row is None:
                # Not a session this projection lists (a course stream, or one created before its creation
                # event was readable, which per-stream order rules out).
                continue
            elif isinstance(ev, _OwnerChanged):
                row.owner_id = ev.to_owner_id  # claimed into an account
            elif isinstance(ev, _State):
                row.status = ev.state
            elif row.kind != "generation":
                if isinstance(ev, _Text):
                    row.status = "queued"
                    row.title = row.title or short_title(ev.text)
                elif isinstance(ev, _Status):
                    row.status = ev.status
                elif isinstance(ev, _Reason):
                    row.status = "queued" if ev.reason in REQUEUED else "idle"
                elif e.type == "lease.claimed":
                    row.status = "running"
                elif e.type == "session.interrupted":
                    row.status = "queued"
            row.seq = e.seq
            row.dirty = True
            if e.recorded_at > row.updated_at:
                row.updated_at = e.recorded_at
        out = [r for r in rows.values() if r.dirty]
        if not out:
            return []
        return [ctx.op(
            SQL.upsert,
            [r.session_id for r in out], [r.owner_id for r in out], [r.kind for r in out],
            [r.course_id for r in out], [r.status for r in out], [r.title for r in out],
            [r.created_at for r in out], [r.updated_at for r in out], [r.seq for r in out],
        )]
