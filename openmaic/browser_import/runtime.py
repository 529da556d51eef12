"""Learner runtime sessions (OpenMAIC's ``/api/persistence/runtime/…``): a learner's chat, quiz attempt,
whiteboard or playback on a course, and its records in order.

A session is a stream of its own (kind ``runtime_session``) holding ``runtime.session_created`` (the session as
created, stamped with :data:`~openmaic.browser_import.runtime_rules.RUNTIME_DSL_VERSION`), one
``runtime.record_appended`` per record (with the ``seq`` this server assigned: 0, 1, … in append order),
``runtime.session_status_set``, ``runtime.session_rekeyed`` (a learner merge) and ``runtime.session_deleted``.
Its row in ``runtime_sessions`` (migrations 0015, 0021) finds it by its id and is its **head**: the session as it
is now, its last ``seq``, how many records it holds and their bytes, and its last record. Every write reads and
updates the head in the transaction of its events, so an append costs the same at the 10th record and at the
10,000th; only listing the records reads the stream (a page at a time, bounded in bytes).

The rules, as OpenMAIC's runtime store keeps them (:mod:`openmaic.browser_import.runtime_rules` for the shapes):

* a session is filed under its owner's learner key (``learnerKey``: :func:`openmaic.owners.learners.learner_key`
  of the owner; 403 ``FORBIDDEN_LEARNER`` for another key, on a create and on every partition route); its
  ``stageId`` is an opaque partition key;
* ids are the owner's: another owner's session reads as missing (404 ``SESSION_NOT_FOUND``, message ``no session
  "<id>"``); creating an id that exists is 409 ``SESSION_ALREADY_EXISTS``; a deleted session's id is free again;
* records are appended to an ``active`` session only (400 ``VALIDATION_FAILED``); ``expectedLastSeq`` (``null``:
  no record yet) makes an append or a status change conditional (409 ``RUNTIME_APPEND_CONFLICT`` with ``details
  {sessionId, expectedLastSeq, actualLastSeq}``); an append may move its session to another status at once
  (``sessionTransition``). A record sent again just after it was stored (the same id and content as the last
  record: a retry after a lost answer) answers the stored record and appends nothing;
* quotas: ``limits.runtime_sessions_per_owner``, ``limits.runtime_records_per_session``,
  ``limits.runtime_record_bytes_per_owner`` (429, naming the key).

Every write holds the owner's persistence lock (:mod:`openmaic.browser_import.store`).
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Sequence
from typing import Any

import msgspec

from openmaic import errors
from openmaic.browser_import import runtime_rules as rules
from openmaic.browser_import.runtime_rules import quoted
from openmaic.browser_import.store import Writer, fold_on, writing
from openmaic.config.schema import LimitsConfig
from openmaic.events.log import FOLD_PAGE, EventLog, NewStream, StreamAppend, recorded
from openmaic.events.types import Event, register
from openmaic.owners.claims import claims_into
from openmaic.owners.learners import learner_key as learner_key_of
from openmaic.quotas import Quota, Usage, check
from openmaic.store.queries import Q

__all__ = [
    "AppendConflict", "ForbiddenLearner", "Head", "RecordAppended", "RuntimeSession", "SessionCreated",
    "SessionDeleted", "SessionExists", "SessionNotFound", "SessionRekeyed", "SessionStatusSet", "append_record",
    "create_session", "delete_sessions", "list_records", "merge_learner", "read_session", "sessions_of",
    "set_status", "tail_records",
]  # fmt: skip

NO_SEQ: Any = msgspec.UNSET
"""``expectedLastSeq`` not given (``None`` is given: "no record yet")."""
MAX_LISTED = 1_000
"""The most sessions one listing answers."""


class SessionNotFound(errors.NotFound):
    """No such runtime session (or it is another owner's)."""

    error_code = "SESSION_NOT_FOUND"


class SessionExists(errors.Conflict):
    """A runtime session with this id exists: creating twice is a caller's bug."""

    error_code = "SESSION_ALREADY_EXISTS"


class AppendConflict(errors.Conflict):
    """The session's records are not the ones the request expected."""

    error_code = "RUNTIME_APPEND_CONFLICT"


class ForbiddenLearner(errors.OpenMaicError):
    """Sessions are filed under your learner key (GET /api/persistence/learner-key)."""

    code = "forbidden_learner"
    status = 403
    error_code = "FORBIDDEN_LEARNER"


_SESSIONS = Quota("runtime_sessions_per_owner", 0, "", "runtime sessions",
                  "delete some (DELETE /api/persistence/runtime/sessions/{id}) first")
_RECORDS = Quota("runtime_records_per_session", 0, "", "records in this session", "start another session")
_BYTES = Quota("runtime_records_per_owner", 0, "", "runtime records",
               "delete some sessions (DELETE /api/persistence/runtime/sessions/{id}) first",
               bytes_key="runtime_record_bytes_per_owner")


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


@register
class SessionRekeyed(Event, tag="runtime.session_rekeyed"):
    """A learner merge filed the session under another learner key."""

    learner_key: str


@register
class SessionDeleted(Event, tag="runtime.session_deleted"):
    pass


class RuntimeSession(msgspec.Struct, frozen=True, kw_only=True):
    """A session stream folded (only to fill in the head of a session written before heads were kept)."""

    session: dict[str, Any] | None = None
    last_seq: int | None = None
    records: int = 0
    record_bytes: int = 0
    last_record: dict[str, Any] | None = None


def evolve_session(state: RuntimeSession, event: Event, seq: int) -> RuntimeSession:
    r = msgspec.structs.replace
    match event:
        case SessionCreated(session=session):
            return r(state, session=session)
        case RecordAppended(record=record):
            return r(state, last_seq=record["seq"], records=state.records + 1, last_record=record,
                     record_bytes=state.record_bytes + len(msgspec.json.encode(record)))
        case SessionStatusSet(status=status, updated_at=at) if state.session is not None:
            return r(state, session={**state.session, "status": status, "updatedAt": at})
        case SessionRekeyed(learner_key=key) if state.session is not None:
            return r(state, session={**state.session, "learnerKey": key})
        case SessionDeleted():
            return RuntimeSession()
    return state


class Head(msgspec.Struct, frozen=True, kw_only=True):
    """A session's row: where its stream is, and its head (see the module doc)."""

    stream_id: str
    session: dict[str, Any]
    last_seq: int | None
    records: int
    record_bytes: int
    last_record: dict[str, Any] | None


class _Row(msgspec.Struct, frozen=True):
    stream_id: str
    session: str | None
    last_seq: int | None
    records: int
    record_bytes: int
    last_record: str | None


def _not_found(session_id: str) -> SessionNotFound:
    return SessionNotFound(f"@openmaic/storage: no session {quoted(session_id)}")


async def _head(conn: Any, log: EventLog, owner: str, session_id: str) -> Head | None:
    row = await conn.fetchrow_as(_Row, Q.runtime_session_head, owner, session_id)
    if row is None:
        return None
    if row.session is not None:
        return Head(stream_id=row.stream_id, session=msgspec.json.decode(row.session), last_seq=row.last_seq,
                    records=row.records, record_bytes=row.record_bytes,
                    last_record=None if row.last_record is None else msgspec.json.decode(row.last_record))
    # Written before heads were kept: fold it once and keep the head (the first to fill it wins; a writer holds
    # the owner's lock, so nothing it wrote is overwritten by a reader's older fold).
    state, _ = await fold_on(conn, log, row.stream_id, RuntimeSession(), evolve_session)
    if state.session is None:
        return None
    head = Head(stream_id=row.stream_id, session=state.session, last_seq=state.last_seq, records=state.records,
                record_bytes=state.record_bytes, last_record=state.last_record)
    await conn.execute(Q.runtime_session_fill_head, row.stream_id, *_head_args(head),
                       rules.instant_of(state.session.get("createdAt", "")))
    return head


def _head_args(head: Head) -> tuple[Any, ...]:
    last = None if head.last_record is None else msgspec.json.encode(head.last_record).decode()
    return (msgspec.json.encode(head.session).decode(), head.last_seq, head.records, head.record_bytes, last)


async def _write_head(w: Writer, head: Head) -> None:
    await w.conn.execute(Q.runtime_session_set_head, head.stream_id, *_head_args(head))


async def _owned(w: Writer, owner: str, session_id: str) -> Head:
    head = await _head(w.conn, w.log, owner, session_id)
    if head is None:
        raise _not_found(session_id)
    return head


def _expect(head: Head, session_id: str, expected: Any) -> None:
    if expected is not NO_SEQ and expected != head.last_seq:
        raise AppendConflict(
            f"@openmaic/storage: runtime append conflict on session {quoted(session_id)}: expected last seq "
            f"{quoted(expected)}, actual {quoted(head.last_seq)}",
            sessionId=session_id, expectedLastSeq=expected, actualLastSeq=head.last_seq)


def _mine(owner: str, learner_key: Any) -> None:
    if learner_key != learner_key_of(owner):
        raise ForbiddenLearner("@openmaic/storage: this learner key is not yours; runtime sessions are filed under "
                               "your learner key (GET /api/persistence/learner-key)")


async def _aliases(log: EventLog, owner: str) -> list[str]:
    """The keys ``owner``'s own learner key also stands for: those its sessions were filed under before (its id,
    when the learner key was the owner id) and the ids and keys of the anonymous owners claimed into it, whose
    sessions moved with the claim and keep their key."""
    claimed = await claims_into(log.db, owner)
    return [owner, *claimed, *map(learner_key_of, claimed)]


async def read_session(log: EventLog, owner: str, session_id: str) -> dict[str, Any]:
    """``owner``'s session as it is now; SessionNotFound when it is missing or another owner's."""
    head = await _head(log.db, log, owner, session_id)
    if head is None:
        raise _not_found(session_id)
    return head.session


async def create_session(log: EventLog, owner: str, body: Any, limits: LimitsConfig) -> dict[str, Any]:
    """Create ``owner``'s session (see the module doc); returns it as stored (stamped)."""
    session = rules.check_session(body)
    _mine(owner, session["learnerKey"])
    async with writing(log, owner) as w:
        if await w.conn.fetchval(Q.runtime_session_find, owner, session["id"]) is not None:
            raise SessionExists(f"@openmaic/storage: session {quoted(session['id'])} already exists")
        count = await w.conn.fetchval(Q.runtime_sessions_count, owner)
        check(_SESSIONS, Usage(int(count)), limits.runtime_sessions_per_owner)
        sid = "runtime-" + secrets.token_hex(12)
        await w.conn.execute(Q.runtime_session_insert, sid, owner, session["id"], session["stageId"],
                             session["learnerKey"], msgspec.json.encode(session).decode(),
                             rules.instant_of(session["createdAt"]))
        await w.append(StreamAppend(stream_id=sid, create=NewStream("runtime_session", owner), status="terminal",
                                    events=[SessionCreated(session=session)]))
    return session


async def append_record(log: EventLog, owner: str, session_id: str, body: dict[str, Any], limits: LimitsConfig, *,
                        expected_last_seq: Any = NO_SEQ,
                        transition: dict[str, Any] | None = None) -> tuple[dict[str, Any], bool]:
    """Append a record to ``owner``'s session (see the module doc); returns it (with its seq) and whether it was
    appended now."""
    async with writing(log, owner) as w:
        head = await _owned(w, owner, session_id)
        record = rules.check_record(body, head.session.get("kind"))
        if record["sessionId"] != session_id:
            raise rules.RuntimeInvalid(f"runtime record {quoted(record['id'])}", [
                {"path": "/sessionId", "message": f"expected the session of the path ({quoted(session_id)})"}])
        last = head.last_record
        if last is not None and last["id"] == record["id"] and {k: v for k, v in last.items() if k != "seq"} == record:
            return last, False  # the last record sent again (a retry after a lost answer)
        _expect(head, session_id, expected_last_seq)
        status = head.session.get("status")
        if status != "active":
            raise rules.RuntimeInvalid(f"runtime record {quoted(record['id'])}", [
                {"path": "/sessionId", "message": f"session {quoted(session_id)} is not active (it is {status})"}])
        if transition is not None:
            rules.check_transition(transition.get("status"), transition.get("updatedAt"),
                                   f"session transition of {quoted(session_id)}")
        stored = {**record, "seq": 0 if head.last_seq is None else head.last_seq + 1}
        size = len(msgspec.json.encode(stored))
        check(_RECORDS, Usage(head.records), limits.runtime_records_per_session)
        usage = await w.conn.fetchrow(Q.runtime_records_of_owner, owner)
        check(_BYTES, Usage(int(usage["count"]), int(usage["bytes"])), limits.runtime_records_per_owner,
              adding_bytes=size, byte_limit=limits.runtime_record_bytes_per_owner)
        events: list[Event] = [RecordAppended(record=stored)]
        session = head.session
        if transition is not None:
            events.append(SessionStatusSet(status=transition["status"], updated_at=transition["updatedAt"]))
            session = {**session, "status": transition["status"], "updatedAt": transition["updatedAt"]}
        await w.append(StreamAppend(stream_id=head.stream_id, events=events))
        await _write_head(w, msgspec.structs.replace(
            head, session=session, last_seq=stored["seq"], records=head.records + 1,
            record_bytes=head.record_bytes + size, last_record=stored))
    return stored, True


async def set_status(log: EventLog, owner: str, session_id: str, status: Any, updated_at: Any, *,
                     expected_last_seq: Any = NO_SEQ) -> bool:
    """Set the status of ``owner``'s session; True when it changed."""
    rules.check_transition(status, updated_at, f"session status of {quoted(session_id)}")
    async with writing(log, owner) as w:
        head = await _owned(w, owner, session_id)
        _expect(head, session_id, expected_last_seq)
        if (head.session.get("status"), head.session.get("updatedAt")) == (status, updated_at):
            return False
        await w.append(StreamAppend(stream_id=head.stream_id,
                                    events=[SessionStatusSet(status=status, updated_at=updated_at)]))
        await _write_head(w, msgspec.structs.replace(
            head, session={**head.session, "status": status, "updatedAt": updated_at}))
    return True


async def list_records(log: EventLog, owner: str, session_id: str, scene_id: str | None, *, limit: int,
                       after: int, budget: int) -> tuple[list[dict[str, Any]], int | None]:
    """``owner``'s session's records in ``seq`` order (``scene_id``: only those anchored to it), after the stream
    position ``after``: at most ``limit``, and past ``budget`` bytes no more; with the position to go on from when
    more may follow."""
    head = await _head(log.db, log, owner, session_id)
    if head is None:
        raise _not_found(session_id)
    out: list[dict[str, Any]] = []
    size = 0
    seq = after
    while True:
        page = [recorded(r) for r in await log.db.fetch(Q.read_stream, head.stream_id, seq, FOLD_PAGE, None,
                                                         budget)]
        for e in page:
            seq = e.seq
            if e.type != RecordAppended.__struct_config__.tag:
                continue
            record = msgspec.json.decode(e.data, type=RecordAppended).record
            if scene_id is not None and record.get("sceneId") != scene_id:
                continue
            out.append(record)
            size += len(e.data)
            if len(out) >= limit or size >= budget:
                return out, seq
        if len(page) < FOLD_PAGE:
            return out, None


async def tail_records(log: EventLog, owner: str, session_id: str, count: int) -> list[dict[str, Any]]:
    """The last ``count`` records of ``owner``'s session, oldest first: read from the session's end, so its cost does
    not grow with the session."""
    head = await _head(log.db, log, owner, session_id)
    if head is None:
        raise _not_found(session_id)
    rows = await log.db.fetch(Q.runtime_session_tail, head.stream_id, RecordAppended.__struct_config__.tag, count)
    return [msgspec.json.decode(recorded(r).data, type=RecordAppended).record for r in reversed(rows)]


async def sessions_of(log: EventLog, owner: str, stage_id: str, learner_key: str, *, limit: int | None = None,
                      after: Sequence[Any] | None = None) -> tuple[list[dict[str, Any]], tuple[Any, str] | None]:
    """``owner``'s sessions on ``stage_id`` under ``learner_key`` (the owner's: ForbiddenLearner otherwise),
    ordered by the instant of ``createdAt`` then id: at most ``limit`` (:data:`MAX_LISTED` when None) after the
    ``(instant, id)`` ``after``, and that key of the last one given when more follow."""
    _mine(owner, learner_key)
    want = MAX_LISTED if limit is None else limit
    start = (None, None) if after is None else tuple(after)
    rows = await log.db.fetch(Q.runtime_sessions_of_stage, owner, stage_id, learner_key, want + 1, *start,
                              await _aliases(log, owner))
    out: list[tuple[dt.datetime, str, dict[str, Any]]] = []
    for row in rows:
        if row["session"] is None:  # written before heads were kept
            head = await _head(log.db, log, owner, row["session_id"])
            if head is not None:
                at = rules.instant_of(head.session.get("createdAt", "")) or dt.datetime.min.replace(tzinfo=dt.UTC)
                out.append((at, head.session["id"], head.session))
        else:
            out.append((row["created_instant"], row["session_id"], msgspec.json.decode(row["session"])))
    out.sort(key=lambda t: (t[0], t[1]))
    more = limit is not None and len(out) > want
    out = out[:want]
    return [s for _, _, s in out], (out[-1][0], out[-1][1]) if more else None


async def delete_sessions(log: EventLog, owner: str, *, session_id: str | None = None, stage_id: str | None = None,
                          learner_key: str | None = None) -> int:
    """Delete ``owner``'s sessions and their records: one by id, or those on a stage (under one learner key, the
    owner's), or all of them; how many. A missing one is fine."""
    aliases: list[str] = []
    if learner_key is not None:
        _mine(owner, learner_key)
        aliases = await _aliases(log, owner)
    async with writing(log, owner) as w:
        if session_id is not None:
            found = await w.conn.fetch(Q.runtime_session_streams_by_id, owner, session_id)
        else:
            found = await w.conn.fetch(Q.runtime_session_streams, owner, stage_id, learner_key, aliases)
        for row in found:
            await w.conn.execute(Q.runtime_session_delete, row["stream_id"])
        if found:
            await w.append(*(StreamAppend(stream_id=r["stream_id"], events=[SessionDeleted()]) for r in found))
    return len(found)


async def merge_learner(log: EventLog, owner: str, from_key: Any, to_key: Any) -> int:
    """File ``owner``'s sessions under ``from_key`` (a key of theirs: an anonymous visitor's they claimed) under
    ``to_key`` (theirs: ForbiddenLearner otherwise); how many moved (0 again when repeated)."""
    rules.check_learner_keys(from_key, to_key)
    _mine(owner, to_key)
    if from_key == to_key:
        return 0
    async with writing(log, owner) as w:
        found = await w.conn.fetch(Q.runtime_session_streams, owner, None, from_key, [])
        for row in found:
            head = await _owned(w, owner, row["session_id"])
            await _write_head(w, msgspec.structs.replace(head, session={**head.session, "learnerKey": to_key}))
            await w.conn.execute(Q.runtime_session_rekey, row["stream_id"], to_key)
        if found:
            await w.append(*(StreamAppend(stream_id=r["stream_id"], events=[SessionRekeyed(learner_key=to_key)])
                             for r in found))
    return len(found)
