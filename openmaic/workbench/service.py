"""The workbench control plane: create a session, read its snapshot, post follow-ups, cancel.

What the HTTP layer calls (all idempotent by ``command_id``, all raising :class:`~openmaic.errors.OpenMaicError`
subclasses that carry their HTTP status):

* ``create_session(owner, command_id, course_id=None, message=None)`` — a session on a new, empty course or on
  one of the owner's courses that no run is building. The session id is derived from ``(owner, command_id)``,
  so repeating the call returns the same session and writes nothing. With a first message the session is
  queued (a worker takes it up); without one it waits, idle, for ``post_message``.
* ``snapshot(owner, session_id)`` — ``{id, status, course_id, head_seq, error, turns, question, …}``.
* ``post_message(owner, session_id, command_id, text, delivery)`` — a follow-up: ``steer`` joins the next model
  call; ``queued`` waits until the model finishes its current exchange. An idle, failed or cancelled session
  is re-queued by it (a failed one retries).
* ``cancel(owner, session_id, command_id)`` — aborts the turn in flight and ends the session ``cancelled``;
  a later message revives it. Cancelling an ended session is a 409.

A session of another owner is a 404, identical to a missing one.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from openmaic import errors, quotas
from openmaic.actors.commands import (
    CommandResult, Commands, create_session, not_found, owned_stream, previous_result, until_decided,
)  # fmt: skip
from openmaic.actors.idempotency import REQUEST, IdempotencyKey, as_created, created_under, read_committed
from openmaic.config import LimitsConfig
from openmaic.courses.events import CourseCreated
from openmaic.events.core import SessionMessagePosted
from openmaic.events.folds import FoldCache
from openmaic.events.log import EventLog, NewStream, StreamAppend, StreamRow, StreamSummary
from openmaic.store.queries import Q
from openmaic.workbench import fold
from openmaic.workbench.content import NEW_COURSE_TITLE
from openmaic.workbench.events import SessionTitleSet
from openmaic.workbench.fold import SessionState
from openmaic.workbench.tools import fold_course
from openmaic.workbench.views import TERMINAL, pro_status

KIND = "workbench"
MAX_MESSAGE_CHARS = 20_000

_NAMESPACE = uuid.UUID("6397d3e5-bbcb-4d96-8ea4-ec3e378ab809")

Delivery = Literal["steer", "queued"]


def session_id_for(owner_id: str, command_id: str) -> str:
    """The id of the session that ``command_id`` creates for ``owner_id`` (the same every time)."""
    return str(uuid.uuid5(_NAMESPACE, f"workbench-session\x00{owner_id}\x00{command_id}"))


def new_course_id(session_id: str) -> str:
    """The id of the course a session creates when it is not given one."""
    return str(uuid.uuid5(_NAMESPACE, f"workbench-course\x00{session_id}"))


class SessionSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """A workbench session as the control plane answers it (the API shows it as OpenMAIC's ``SessionMeta``)."""

    id: str
    status: str
    """queued | running | idle | failed | cancelled"""
    course_id: str | None
    head_seq: int
    error: str | None = None
    """Why the session last failed (cleared by its next completed turn)."""
    turns: int = 0
    """Model turns committed."""
    question: str | None = None
    """The agent's question (``ask_user``) that the session is waiting on, if any."""
    pending_messages: int = 0
    """Follow-ups posted and not yet delivered to the model."""
    created_at: dt.datetime


def _check_text(text: str, field: str) -> None:
    if not text.strip():
        raise errors.MissingField(f"Missing required field: {field}", path=field)
    if len(text) > MAX_MESSAGE_CHARS:
        raise errors.InvalidInput(f"{field} is longer than {MAX_MESSAGE_CHARS} characters", path=field)


class SessionAlreadyTerminal(errors.Conflict):
    """The session has ended; send it a new message to start it again."""

    code = "session_already_terminal"
    error_code = "SESSION_ALREADY_TERMINAL"


MAX_TITLE_CHARS = 200
MAX_LISTED = 200

SESSIONS_QUOTA = quotas.Quota(
    key="sessions_per_owner", namespace=0x6F6D7773, usage=Q.workbench_sessions_usage, noun="agent sessions",
    remedy="continue one of them (POST /api/agent/sessions/{id}/messages) instead of starting another")
MESSAGES_QUOTA = quotas.Quota(
    key="messages_per_session", namespace=0x6F6D6D73, usage=Q.session_messages_usage, noun="messages in this session",
    remedy="start a new session (POST /api/agent/sessions) to go on")


class WorkbenchSessions:
    """Workbench sessions for the API: create, snapshot, messages, cancel (see the module's doc)."""

    def __init__(self, log: EventLog, commands: Commands | None = None, limits: LimitsConfig | None = None) -> None:
        self.log = log
        self.commands = commands or Commands(log)
        self.limits = limits or LimitsConfig()
        self.sessions = FoldCache(log, fold.initial, fold.evolve)

    async def create_session(
        self, owner: str, command_id: str, course_id: str | None = None, message: str | None = None
    ) -> SessionSnapshot:
        """Create (or, for a repeated ``command_id``, find) the owner's session; see the module's doc.

        Raises StreamNotFound (404) for a course that is missing, deleted or another owner's; Conflict (409)
        for a course a generation run is building; MissingField (400) for an empty message.
        """
        if message is not None:
            _check_text(message, "message")
        await self._open(owner, command_id, course_id, message)
        return await self.snapshot(owner, session_id_for(owner, command_id))

    async def _open(self, owner: str, command_id: str, course_id: str | None, message: str | None,
                    request: str | None = None) -> None:
        """Create the session ``command_id`` names, unless it exists (see :meth:`create_session`); ``request``:
        the digest of a keyed create's request (:mod:`openmaic.actors.idempotency`)."""
        sid = session_id_for(owner, command_id)

        async def attempt() -> None:
            row = await self.log.stream_row(sid)
            if row is not None:
                return
            course, also = await self._course_for(owner, sid, course_id)
            events = [SessionMessagePosted(text=message, delivery="queued")] if message is not None else []
            inp: dict[str, Any] = {"course_id": course, "new_course": course_id is None}
            if message is not None:
                inp["message"] = message
            if request is not None:
                inp[REQUEST] = request
            # Counted and created under the owner's sessions lock: two starts at once cannot both take the
            # last place (the creation commits before the lock is released).
            async with quotas.within(self.log.db, owner, SESSIONS_QUOTA, self.limits.sessions_per_owner):
                await create_session(
                    self.log, stream_id=sid, kind=KIND, owner_id=owner, command_id=command_id, events=events,
                    input=inp, status="queued" if message is not None else "waiting", also=also,
                )

        # A lost race: the course moved on since we checked it (a run may have locked it), or the same command is
        # being applied concurrently: look again.
        await until_decided(
            attempt, lambda: errors.Conflict("the course is changing too fast to open a session on it; retry"),
            races=(errors.WrongExpectedSeq, errors.StreamExists))

    async def _course_for(
        self, owner: str, session_id: str, course_id: str | None
    ) -> tuple[str, list[StreamAppend]]:
        """The session's course id and the append that goes with the session's creation."""
        if course_id is None:
            new = new_course_id(session_id)
            return new, [StreamAppend(stream_id=new, events=[CourseCreated(title=NEW_COURSE_TITLE)],
                                      create=NewStream("course", owner))]
        row = await owned_stream(self.log, owner, course_id, kind="course")
        doc = await fold_course(self.log, course_id)
        if doc.deleted or row.deleted_at is not None:
            raise not_found(course_id)
        if doc.locked_by is not None:
            raise errors.Conflict(
                f"course {course_id} is being generated by run {doc.locked_by}; "
                "open it in the workbench once the run has completed",
                course_id=course_id, run_id=doc.locked_by,
            )
        # An empty append fenced by the head we checked: if a run locks the course before the session is
        # created, the creation is refused and we look again, so a session never opens on a locked course.
        return course_id, [StreamAppend(stream_id=course_id, events=[], expected_seq=doc.seq)]

    async def snapshot(self, owner: str, session_id: str) -> SessionSnapshot:
        """The session's current snapshot; StreamNotFound (404) when it is missing or another owner's."""
        row = await owned_stream(self.log, owner, session_id, kind=KIND)
        state = await self.sessions.state(session_id, row.head_seq)
        return SessionSnapshot(
            id=session_id, status=state.status, course_id=state.course_id, head_seq=state.seq,
            error=state.error, turns=state.turns, question=state.question,
            pending_messages=len(state.undelivered), created_at=row.created_at,
        )

    # -- OpenMAIC's Pro sessions ---------------------------------------------------------------------------------

    async def start(self, owner: str, prompt: str, stage_id: str | None = None, *,
                    keyed: IdempotencyKey | None = None) -> tuple[StreamRow, SessionState]:
        """A new session with ``prompt`` as its first message (on the course ``stage_id``, or a new one); not
        idempotent, as OpenMAIC's start is not, except a repeat ``keyed`` by the same Idempotency-Key (see
        :mod:`openmaic.actors.idempotency`). Returns the session as its creation left it (the same answer for a
        repeat); read back after the commit, and tried again through a failover rather than failed."""
        _check_text(prompt, "prompt")  # named as the route's field, before create_session checks it as "message"
        command_id = f"start-{uuid.uuid4()}" if keyed is None else keyed.command_id
        sid = session_id_for(owner, command_id)
        if keyed is not None:
            again = await self.created(owner, keyed)
            if again is not None:
                return again
        try:
            await self._open(owner, command_id, stage_id, prompt, None if keyed is None else keyed.digest)
        except errors.DatabaseUnavailable:
            # What failed may be only the answer: the session commits before the quota's lock is given back. One
            # that exists was made by this request, and is its answer.
            if await read_committed(lambda: self.log.command_event(sid, command_id)) is None:
                raise
        if keyed is not None:  # (a create sent twice at once, with another body, is refused here)
            created = await read_committed(lambda: self.created(owner, keyed))
            assert created is not None
            return created

        async def read() -> tuple[StreamRow, SessionState]:
            first = await self.log.command_event(sid, command_id)
            assert first is not None  # committed just above
            return await self._as_created(owner, sid, first.last_seq)

        return await read_committed(read)

    async def created(self, owner: str, keyed: IdempotencyKey) -> tuple[StreamRow, SessionState] | None:
        """The session a start ``keyed`` by this Idempotency-Key created, as its creation left it (its answer);
        None when there is none; IdempotencyKeyReused when the key came with another request."""
        sid = session_id_for(owner, keyed.command_id)
        last = await created_under(self.log, sid, keyed)
        return None if last is None else await self._as_created(owner, sid, last)

    async def _as_created(self, owner: str, sid: str, last_seq: int) -> tuple[StreamRow, SessionState]:
        row = await owned_stream(self.log, owner, sid, kind=KIND)
        return as_created(row, last_seq), await self.sessions.state(sid, last_seq)

    async def read(self, owner: str, session_id: str, *, catch_up: bool = False) -> tuple[StreamRow, SessionState]:
        """The session's row and its state at that row's head; StreamNotFound for a missing session or another
        owner's. ``catch_up``: the fold is a catch-up read, which the replica may serve (a snapshot route's)."""
        row = await owned_stream(self.log, owner, session_id, kind=KIND)
        return row, await self.sessions.state(session_id, row.head_seq, floor=row.head_seq if catch_up else None)

    async def of_owner(self, owner: str, limit: int = MAX_LISTED, after: Sequence[Any] | None = None,
                       ) -> list[tuple[StreamSummary, SessionState]]:
        """The owner's sessions, newest first: at most ``limit``, after the one whose ``(created_at, id)`` is
        ``after``."""
        start = (None, None) if after is None else tuple(after)
        rows = await self.log.summaries(Q.workbench_sessions_of_owner, owner, limit, *start)
        return [(row, await self.sessions.state(row.id, row.head_seq)) for row in rows]

    async def set_title(self, owner: str, session_id: str, title: str | None) -> str | None:
        """Set (or with None, clear) the session's title."""
        if title is not None:
            title = " ".join(title.split())[:MAX_TITLE_CHARS] or None
        await owned_stream(self.log, owner, session_id, kind=KIND)
        await self.log.append_one(session_id, [SessionTitleSet(title=title)])
        return title

    async def send(self, owner: str, session_id: str, text: str, *, command_id: str | None = None,
                   ) -> tuple[CommandResult, SessionMessagePosted]:
        """A follow-up; the server decides how it is delivered: ``steer`` (at the next model call) while the agent
        is working, ``queued`` otherwise (it starts the next turn). Returns the message as recorded. With
        ``command_id``, repeating the call returns the first result: the message the first call recorded, with
        the delivery decided then (not the one the session's state would give it now)."""
        _check_text(text, "text")
        _, state = await self.read(owner, session_id)
        delivery: Delivery = "steer" if state.status == "running" else "queued"
        result = await self._post(owner, session_id, command_id or f"message-{uuid.uuid4()}", text, delivery)
        if not result.replayed:
            return result, SessionMessagePosted(text=text, delivery=delivery)
        (recorded,) = await self.log.read_stream(session_id, result.seq - 1, 1)
        posted = self.log.decode(recorded)
        assert isinstance(posted, SessionMessagePosted), posted  # the command's type was checked by _post
        return result, posted

    async def _post(self, owner: str, session_id: str, command_id: str, text: str, delivery: Delivery,
                    ) -> CommandResult:
        """Append the message within the session's quota of messages; a repeated ``command_id`` answers as the
        first time, even once the quota is full."""
        prev = await previous_result(self.log, session_id, command_id, "session.message_posted")
        if prev is not None:
            return prev
        # Counted and appended under the session's messages lock; the append commits before it is released.
        async with quotas.within(self.log.db, session_id, MESSAGES_QUOTA, self.limits.messages_per_session):
            return await self.commands.post_message(owner, session_id, command_id, text, delivery)

    async def request_cancel(self, owner: str, session_id: str, *, command_id: str | None = None) -> CommandResult:
        """Cancel the session's work; SessionAlreadyTerminal (409) once it has ended (``succeeded`` included).
        With ``command_id``, repeating the call returns the first result."""
        _, state = await self.read(owner, session_id)
        if command_id is not None:
            prev = await previous_result(self.log, session_id, command_id, "session.cancel_requested")
            if prev is not None:
                return prev
        if pro_status(state.status) in TERMINAL:
            raise SessionAlreadyTerminal(f"the session has already ended ({pro_status(state.status)})",
                                         status=pro_status(state.status))
        try:
            return await self.commands.cancel(owner, session_id, command_id or f"cancel-{uuid.uuid4()}")
        except errors.Conflict as exc:
            _, state = await self.read(owner, session_id)
            raise SessionAlreadyTerminal(exc.message, status=pro_status(state.status)) from None

    async def post_message(
        self, owner: str, session_id: str, command_id: str, text: str, delivery: Delivery = "queued"
    ) -> CommandResult:
        """Append a follow-up (``session.message_posted``); re-queues an idle or ended session."""
        _check_text(text, "text")
        await owned_stream(self.log, owner, session_id, kind=KIND)
        return await self._post(owner, session_id, command_id, text, delivery)

    async def cancel(self, owner: str, session_id: str, command_id: str) -> CommandResult:
        """Request cancellation (``session.cancel_requested``); 409 when the session has already ended."""
        await owned_stream(self.log, owner, session_id, kind=KIND)
        return await self.commands.cancel(owner, session_id, command_id)
