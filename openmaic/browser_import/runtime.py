"""Learner runtime sessions (OpenMAIC's ``/api/persistence/runtime/…``): a learner's chat, quiz attempt,
whiteboard or project on a course, and its records in order.

A session is a stream of its own (kind ``runtime_session``, id ``runtime-`` + a digest of its owner and its
client-chosen id) holding ``runtime.session_created`` (the session as created), one ``runtime.record_appended``
per record (with the seq this server assigned: 1, 2, … in append order) and ``runtime.session_status_set``;
``runtime_sessions`` (migration 0015) finds a session by its id and a course's sessions by learner. Reads fold the
stream.

The rules, as OpenMAIC's runtime store keeps them:

* a session belongs to one of its owner's courses (``stageId``: a document id or a course id; 404
  ``DOCUMENT_NOT_FOUND`` otherwise) and is filed under the owner's learner key (403 ``LEARNER_KEY_MISMATCH``
  for another key);
* ids are the owner's: another owner's session reads as missing (404 ``SESSION_NOT_FOUND``); a claim moves an
  anonymous owner's sessions to the account, and the account's learner key lists them beside its own (they keep
  the key they were filed under);
* **idempotent**: creating a session that exists exactly so, or appending a record that exists exactly so,
  answers what is stored and appends nothing; the same id with other content is a 409 (``SESSION_ALREADY_EXISTS``
  / ``RECORD_ALREADY_EXISTS``). Setting the status a session has changes nothing;
* records are appended to an ``active`` session only (409 ``SESSION_NOT_ACTIVE``); ``expectedLastSeq`` (``null``:
  no record yet) makes an append or a status change conditional (409 ``RUNTIME_APPEND_CONFLICT`` with ``details
  {sessionId, expectedLastSeq, actualLastSeq}``); at most :data:`MAX_RECORDS` records per session.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from typing import Any

import msgspec

from openmaic import errors
from openmaic.browser_import.documents import DocumentNotFound, find_document
from openmaic.browser_import.store import Writer, fold_on, writing
from openmaic.events.log import EventLog, NewStream, StreamAppend, StreamRow
from openmaic.events.types import Event, register
from openmaic.owners.learners import learner_key
from openmaic.owners.claims import claims_into
from openmaic.store.queries import Q

__all__ = [
    "MAX_RECORDS", "RecordAppended", "RuntimeSession", "SessionCreated", "SessionNotFound", "SessionStatusSet",
    "append_record", "create_session", "list_records", "read_session", "sessions_of", "set_status",
]  # fmt: skip

MAX_RECORDS = 10_000
MAX_LISTED = 1_000
NO_SEQ: Any = msgspec.UNSET
"""``expectedLastSeq`` not given (``None`` is given: "no record yet")."""


class SessionNotFound(errors.NotFound):
    """No such runtime session (or it is another owner's)."""

    error_code = "SESSION_NOT_FOUND"


class SessionExists(errors.Conflict):
    """A runtime session with this id exists with other content."""

    error_code = "SESSION_ALREADY_EXISTS"


class RecordExists(errors.Conflict):
    """A record with this id exists in the session with other content."""

    error_code = "RECORD_ALREADY_EXISTS"


class SessionNotActive(errors.Conflict):
    """Records are appended to active sessions only."""

    error_code = "SESSION_NOT_ACTIVE"


class AppendConflict(errors.Conflict):
    """The session's records are not the ones the request expected."""

    error_code = "RUNTIME_APPEND_CONFLICT"


class LearnerMismatch(errors.OpenMaicError):
    """Sessions are filed under your learner key (GET /api/persistence/learner-key)."""

    code = "learner_key_mismatch"
    status = 403
    error_code = "LEARNER_KEY_MISMATCH"


@register
class SessionCreated(Event, tag="runtime.session_created"):
    session: dict[str, Any]


@register
class RecordAppended(Event, tag="runtime.record_appended"):
    record: dict[str, Any]


@register
class SessionStatusSet(Event, tag="runtime.session_status_set"):
    status: str
    updated_at: str


class RuntimeSession(msgspec.Struct, frozen=True, kw_only=True):
    """A session stream folded."""

    session: dict[str, Any] | None = None
    """The session as it is now."""
    created: dict[str, Any] | None = None
    """The session as it was created."""
    records: tuple[dict[str, Any], ...] = ()

    @property
    def last_seq(self) -> int | None:
        return self.records[-1]["seq"] if self.records else None


def evolve_session(state: RuntimeSession, event: Event, seq: int) -> RuntimeSession:
    r = msgspec.structs.replace
    match event:
        case SessionCreated(session=session):
            return r(state, session=session, created=session)
        case RecordAppended(record=record):
            return r(state, records=(*state.records, record))
        case SessionStatusSet(status=status, updated_at=at) if state.session is not None:
            return r(state, session={**state.session, "status": status, "updatedAt": at})
    return state


def _stream_id(owner: str, session_id: str) -> str:
    return "runtime-" + hashlib.sha256(f"openmaic.runtime\x1f{owner}\x1f{session_id}".encode()).hexdigest()[:24]


async def _find(conn: Any, owner: str, session_id: str) -> str | None:
    return await conn.fetchval(Q.runtime_session_find, owner, session_id)


async def _locked(w: Writer, owner: str, session_id: str) -> tuple[str, RuntimeSession, int]:
    sid = await _find(w.conn, owner, session_id)
    if sid is None:
        raise SessionNotFound(f"no runtime session {session_id!r}", id=session_id)
    state, head = await w.fold(sid, RuntimeSession(), evolve_session)
    return sid, state, head


def _expect(state: RuntimeSession, session_id: str, expected: Any) -> None:
    if expected is not NO_SEQ and expected != state.last_seq:
        raise AppendConflict(f"session {session_id!r} has moved on: its last record is {state.last_seq}",
                             session_id=session_id, expected_last_seq=expected, actual_last_seq=state.last_seq)


async def read_session(log: EventLog, owner: str, session_id: str) -> RuntimeSession:
    sid = await _find(log.db, owner, session_id)
    state = (await fold_on(None, log, sid, RuntimeSession(), evolve_session))[0] if sid else RuntimeSession()
    if state.session is None:
        raise SessionNotFound(f"no runtime session {session_id!r}", id=session_id)
    return state


async def create_session(log: EventLog, owner: str, session: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Create ``owner``'s session (see the module's doc); returns it and whether it was created now."""
    if session["learnerKey"] != learner_key(owner):
        raise LearnerMismatch("sessions are filed under your learner key (GET /api/persistence/learner-key)",
                              path="learnerKey")
    async with writing(log, owner) as w:
        sid = await _find(w.conn, owner, session["id"])
        if sid is not None:
            state, _ = await w.fold(sid, RuntimeSession(), evolve_session)
            if state.created != session:
                raise SessionExists(f"runtime session {session['id']!r} exists with other content",
                                    id=session["id"])
            return state.session or session, False
        stage = session["stageId"]
        if await find_document(w.conn, owner, stage) is None:
            row = await w.conn.fetchrow_as(StreamRow, Q.stream, stage)
            if row is None or row.owner_id != owner or row.kind != "course":
                raise DocumentNotFound(f"no course {stage!r}", id=stage)
        sid = _stream_id(owner, session["id"])
        await w.conn.execute(Q.runtime_session_insert, sid, owner, session["id"], stage, session["learnerKey"])
        await w.append(StreamAppend(stream_id=sid, create=NewStream("runtime_session", owner), status="terminal",
                                    events=[SessionCreated(session=session)]))
    return session, True


async def append_record(log: EventLog, owner: str, session_id: str, record: dict[str, Any], *,
                        expected_last_seq: Any = NO_SEQ,
                        transition: dict[str, Any] | None = None) -> tuple[dict[str, Any], bool]:
    """Append a record to ``owner``'s session (see the module's doc); returns it (with its seq) and whether it
    was appended now."""
    async with writing(log, owner) as w:
        sid, state, head = await _locked(w, owner, session_id)
        known = next((r for r in state.records if r["id"] == record["id"]), None)
        if known is not None:
            if {k: v for k, v in known.items() if k != "seq"} != record:
                raise RecordExists(f"record {record['id']!r} exists with other content", id=record["id"])
            return known, False
        _expect(state, session_id, expected_last_seq)
        assert state.session is not None
        if state.session.get("status") != "active":
            raise SessionNotActive(f"session {session_id!r} is {state.session.get('status')}, not active")
        if len(state.records) >= MAX_RECORDS:
            raise errors.Conflict(f"a session holds at most {MAX_RECORDS} records")
        stored = {**record, "seq": len(state.records) + 1}
        events: list[Event] = [RecordAppended(record=stored)]
        if transition is not None and transition.get("status") != state.session.get("status"):
            events.append(SessionStatusSet(status=transition["status"],
                                           updated_at=transition.get("updatedAt") or record["createdAt"]))
        await w.append(StreamAppend(stream_id=sid, events=events, expected_seq=head))
    return stored, True


async def set_status(log: EventLog, owner: str, session_id: str, status: str, updated_at: str, *,
                     expected_last_seq: Any = NO_SEQ) -> bool:
    """Set the status of ``owner``'s session; True when it changed."""
    async with writing(log, owner) as w:
        sid, state, head = await _locked(w, owner, session_id)
        _expect(state, session_id, expected_last_seq)
        assert state.session is not None
        if (state.session.get("status"), state.session.get("updatedAt")) == (status, updated_at):
            return False
        await w.append(StreamAppend(stream_id=sid, expected_seq=head,
                                    events=[SessionStatusSet(status=status, updated_at=updated_at)]))
    return True


async def list_records(log: EventLog, owner: str, session_id: str, scene_id: str | None) -> list[dict[str, Any]]:
    state = await read_session(log, owner, session_id)
    return [r for r in state.records if scene_id is None or r.get("sceneId") == scene_id]


async def sessions_of(log: EventLog, owner: str, stage_id: str, key: str, *, limit: int | None = None,
                      after: Sequence[Any] | None = None) -> tuple[list[dict[str, Any]], tuple[Any, str] | None]:
    """``owner``'s sessions on course ``stage_id`` filed under the learner key ``key`` (oldest first): at most ``limit``
    (:data:`MAX_LISTED` when None) after the one whose ``(created_at, stream id)`` is ``after``, and that key of
    the last one given when more follow."""
    want = MAX_LISTED if limit is None else limit
    start = (None, None) if after is None else tuple(after)
    aliases: list[str] = []
    if key == learner_key(owner):
        # Keys this owner's sessions were filed under before: its id (the learner key once was the owner id), and
        # the ids and keys of the anonymous owners claimed into it.
        claimed = await claims_into(log.db, owner)
        aliases = [owner, *claimed, *map(learner_key, claimed)]
    rows = await log.db.fetch_as(_Filed, Q.runtime_sessions_of_stage, owner, stage_id, key, want + 1, *start,
                                 aliases)
    more = limit is not None and len(rows) > want
    rows = rows[:want]
    out = []
    for row in rows:
        state, _ = await fold_on(None, log, row.stream_id, RuntimeSession(), evolve_session)
        if state.session is not None:
            out.append(state.session)
    return out, (rows[-1].created_at, rows[-1].stream_id) if more else None


class _Filed(msgspec.Struct, frozen=True):
    """A runtime session's stream, and when it was filed (the listing's keyset)."""

    stream_id: str
    created_at: dt.datetime
