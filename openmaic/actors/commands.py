"""The control plane: commands that clients send to sessions, as fenced, idempotent appends.

Every command carries a client-chosen ``command_id``: repeating it returns the original result and writes
nothing; reusing it for a different command is a conflict. Commands that depend on the stream's state (is it
waiting? ended?) read the stream row and append with ``expected_seq`` set to what they read, retrying when the
stream moved on in between, so a decision is never made on stale state.

Two things every such command shares live here, once:

* **the same 404** (:func:`owned_stream`, :func:`not_found`): a missing stream, another owner's, one of another
  kind and (for reads of live resources) a deleted one get one answer, so it never tells which ids exist;
* **the retry loop** (:func:`until_decided`): read, decide, append fenced by what was read; when another writer
  moved the stream in between (``WrongExpectedSeq``), decide again on fresh state, at most :data:`RACE_BUDGET`
  times, then give up with a Conflict the caller names.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import msgspec

from openmaic import errors
from openmaic.events.core import SessionCancelRequested, SessionCreated, SessionMessagePosted
from openmaic.events.log import EventLog, NewStream, StreamAppend, StreamRow
from openmaic.events.types import Event

RACE_BUDGET = 50
"""How many times a read-decide-append is decided again because other writers kept moving its stream. Each try
is a read and an append of milliseconds; a stream that moves on fifty times during one command is being written
far faster than any client can follow, and the client is better told to retry."""

T = TypeVar("T")


class CommandResult(msgspec.Struct, frozen=True):
    """The outcome of an accepted command: the seq of the event that recorded it.

    ``replayed`` is true when the same ``command_id`` had already been accepted on that stream: nothing new was
    written and ``seq`` is the original one.
    """

    command_id: str
    seq: int
    replayed: bool = False
    last_seq: int = 0
    """The last seq the command wrote on the stream (0: not known): what it did is the stream as of this seq, so a
    repeat answers from the state there, not from where the stream has moved on to since."""


def not_found(stream_id: str) -> errors.StreamNotFound:
    """The one answer for a stream the caller may not see, whatever the reason."""
    return errors.StreamNotFound(f"no stream {stream_id!r}", stream_id=stream_id)


async def owned_stream(log: EventLog, owner_id: str, stream_id: str, kind: str | None = None, *,
                       live: bool = False) -> StreamRow:
    """The stream row, or :func:`not_found`: the same for a missing stream, another owner's, one of another
    ``kind`` and, with ``live``, a deleted one."""
    row = await log.stream_row(stream_id)
    if (row is None or row.owner_id != owner_id or (kind is not None and row.kind != kind)
            or (live and row.deleted_at is not None)):
        raise not_found(stream_id)
    return row


async def until_decided(attempt: Callable[[], Awaitable[T]], exhausted: Callable[[], BaseException], *,
                        races: tuple[type[BaseException], ...] = (errors.WrongExpectedSeq,)) -> T:
    """``await attempt()`` until it returns: an attempt reads, decides and appends fenced by what it read, and a
    fence that another writer broke in between (``races``) means deciding again on fresh state. After
    :data:`RACE_BUDGET` lost races, raises ``exhausted()`` (a Conflict saying what could not be done)."""
    for _ in range(RACE_BUDGET):
        try:
            return await attempt()
        except races:
            continue
    raise exhausted()


async def previous_result(log: EventLog, stream_id: str, command_id: str, event_type: str) -> CommandResult | None:
    """The original result of an already-applied command (or a conflict when the id was used otherwise)."""
    first = await log.command_event(stream_id, command_id)
    if first is None:
        return None
    if first.type != event_type:
        raise errors.CommandConflict(
            f"command_id {command_id!r} was already used for {first.type} on this stream", command_id=command_id
        )
    return CommandResult(command_id, first.seq, True, first.last_seq)


async def apply(
    log: EventLog,
    owner_id: str,
    stream_id: str,
    command_id: str,
    event_type: str,
    decide: Callable[[StreamRow], tuple[Sequence[Event], str | None]],
    *,
    kind: str | None = None,
) -> CommandResult:
    """Run a state-dependent command: ``decide(row) -> (events, new status or None)`` may raise to refuse.

    The first event (of type ``event_type``) carries the command id. A refusal is still checked against an
    earlier identical command first, so a client retrying a command that has since changed the state gets its original answer.
    """
    async def attempt() -> CommandResult:
        row = await owned_stream(log, owner_id, stream_id, kind)
        try:
            events, status = decide(row)
        except errors.OpenMaicError:
            prev = await previous_result(log, stream_id, command_id, event_type)
            if prev is not None:
                return prev
            raise
        r = await log.append_one(
            stream_id, events, command_id=command_id, expected_seq=row.head_seq, status=status,
            progress=status == "queued",
        )
        return CommandResult(command_id, r.first_seq, r.replayed, r.last_seq)

    return await until_decided(
        attempt, lambda: errors.Conflict("the stream is changing too fast to apply this command; retry it"))


async def create_session(
    log: EventLog,
    *,
    stream_id: str,
    kind: str,
    owner_id: str,
    command_id: str | None,
    events: Sequence[Event] = (),
    input: dict[str, Any] | None = None,
    status: str = "queued",
    also: Sequence[StreamAppend] = (),
) -> CommandResult:
    """Create a session stream (and, with ``also``, related streams) in one transaction."""
    first: list[Event] = [SessionCreated(kind=kind, owner_id=owner_id, input=input or {})]
    try:
        results = await log.append(
            StreamAppend(
                stream_id=stream_id, events=[*first, *events], create=NewStream(kind, owner_id),
                command_id=command_id, status=status,
            ),
            *also,
        )
    except errors.StreamExists:
        if command_id is not None:
            prev = await previous_result(log, stream_id, command_id, "session.created")
            if prev is not None:
                row = await log.stream_row(stream_id)
                if row is not None and row.owner_id == owner_id:
                    return prev
        raise
    main = next(r for r in results if r.stream_id == stream_id)
    return CommandResult(command_id or "", main.first_seq, main.replayed, main.last_seq)


class Commands:
    """Messages and cancellation for any session kind; kinds add their own commands beside these."""

    def __init__(self, log: EventLog, *, message_kinds: Sequence[str] = ("workbench",)) -> None:
        self.log = log
        self.message_kinds = set(message_kinds)

    async def post_message(
        self, owner_id: str, stream_id: str, command_id: str, text: str, delivery: str = "queued"
    ) -> CommandResult:
        def decide(row: StreamRow) -> tuple[Sequence[Event], str | None]:
            if row.kind not in self.message_kinds:
                raise errors.Conflict(f"a {row.kind} session does not take messages")
            # A running actor picks the message up at its next boundary; an idle or ended one is re-queued.
            status = None if row.status in ("running", "queued") else "queued"
            return [SessionMessagePosted(text=text, delivery=delivery)], status

        return await apply(self.log, owner_id, stream_id, command_id, "session.message_posted", decide)

    async def cancel(self, owner_id: str, stream_id: str, command_id: str) -> CommandResult:
        def decide(row: StreamRow) -> tuple[Sequence[Event], str | None]:
            if row.status == "terminal":
                raise errors.Conflict("this session has already ended; there is nothing to cancel")
            # A waiting session has no actor to notice the request: queue it, and a worker settles it.
            status = "queued" if row.status == "waiting" else None
            return [SessionCancelRequested()], status

        return await apply(self.log, owner_id, stream_id, command_id, "session.cancel_requested", decide)
