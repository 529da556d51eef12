"""The event log: append (fenced, idempotent, hash-chained), read a stream, tail the global log.

Appends go through one SQL function call, a single round trip whose row lock on ``streams`` serializes
appenders of a stream, so seq order is commit order and seqs are gap-free. After a commit the log pokes
in-process watchers directly and queues a coalesced NOTIFY hint (stream ids only) for other processes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import msgspec

from openmaic.events.types import Event, Registry, registry
from openmaic.events.wakeups import CHANNEL, RUNNABLE, Wakeups
from openmaic.store.database import Database, Record
from openmaic.store.queries import Q

_UNSET: Any = msgspec.UNSET


class NewStream(msgspec.Struct, frozen=True):
    kind: str
    owner_id: str


class StreamAppend(msgspec.Struct, frozen=True, kw_only=True):
    """What to append to one stream, and under which fences."""

    stream_id: str
    events: Sequence[Event]
    attempt: int | None = None
    """Worker fence: refused (StaleAttempt) unless the stream's attempt still equals this."""
    expected_seq: int | None = None
    """Control-plane fence: refused (WrongExpectedSeq) unless head_seq equals this."""
    command_id: str | None = None
    """Idempotency key: a repeat returns the original seqs and writes nothing."""
    create: NewStream | None = None
    status: str | None = None
    wake_at: dt.datetime | None | msgspec.UnsetType = msgspec.UNSET
    release: bool = False
    progress: bool = False


class AppendResult(msgspec.Struct, frozen=True):
    stream_id: str
    first_seq: int
    last_seq: int
    replayed: bool


class RecordedEvent(msgspec.Struct, frozen=True):
    """An event as stored. ``data`` stays the exact stored JSON bytes (hashed, exported, sent as they are)."""

    stream_id: str
    seq: int
    type: str
    v: int
    data: msgspec.Raw
    attempt: int | None
    command_id: str | None
    recorded_at: dt.datetime
    position: int
    tx: int
    hash: bytes

    @property
    def cursor(self) -> tuple[int, int]:
        """Position of this event in the global log: ``(tx, position)``."""
        return (self.tx, self.position)


class Envelope(msgspec.Struct, frozen=True):
    """The event as it leaves the server (JSON page, SSE, WebSocket, audit export). Names are stable."""

    stream_id: str
    seq: int
    type: str
    v: int
    data: msgspec.Raw
    attempt: int | None
    command_id: str | None
    recorded_at: dt.datetime


def envelope(e: RecordedEvent) -> Envelope:
    return Envelope(e.stream_id, e.seq, e.type, e.v, e.data, e.attempt, e.command_id, e.recorded_at)


def _recorded(r: Record) -> RecordedEvent:
    return RecordedEvent(
        r["stream_id"], r["seq"], r["type"], r["v"], msgspec.Raw(r["data"].encode()), r["attempt"],
        r["command_id"], r["recorded_at"], r["position"], int(r["tx"]), r["hash"],
    )


START: tuple[int, int] = (0, 0)
"""The global-log cursor before the first event."""


class EventLog:
    def __init__(self, db: Database, wakeups: Wakeups | None = None, types: Registry = registry) -> None:
        self.db = db
        self.wakeups = wakeups
        self.types = types
        self.appended_events = 0

    async def append(self, *batches: StreamAppend) -> list[AppendResult]:
        """Append to one or more streams in one transaction (all or nothing).

        Raises StaleAttempt, WrongExpectedSeq, CommandConflict, StreamNotFound or StreamExists; then nothing
        was written.
        """
        args = self.append_args(batches)
        rows = await self.db.fetch(Q.append, *args)
        results = [AppendResult(r["stream_id"], r["first_seq"], r["last_seq"], r["replayed"]) for r in rows]
        if results and not results[0].replayed:
            self.appended_events += len(args[12])
            ids = [r.stream_id for r in results]
            if any(b.status == "queued" for b in batches):
                ids.append(RUNNABLE)
            self.hint(ids)
        return results

    def append_args(self, batches: Sequence[StreamAppend]) -> tuple[list[Any], ...]:
        """The arguments of the ``append`` query (column arrays) for these batches."""
        ids, kinds, owners, attempts, expected, commands, statuses = [], [], [], [], [], [], []
        set_wake, wake_at, release, progress, counts = [], [], [], [], []
        types, versions, datas = [], [], []
        encode = self.types.encode
        for b in batches:
            ids.append(b.stream_id)
            kinds.append(b.create.kind if b.create else None)
            owners.append(b.create.owner_id if b.create else None)
            attempts.append(b.attempt)
            expected.append(b.expected_seq)
            commands.append(b.command_id)
            statuses.append(b.status)
            set_wake.append(b.wake_at is not _UNSET)
            wake_at.append(None if b.wake_at is _UNSET else b.wake_at)
            release.append(b.release)
            progress.append(b.progress)
            counts.append(len(b.events))
            for ev in b.events:
                t, v, data = encode(ev)
                types.append(t)
                versions.append(v)
                datas.append(data.decode())
        return (ids, kinds, owners, attempts, expected, commands, statuses, set_wake, wake_at, release, progress,
                counts, types, versions, datas)

    async def append_one(self, stream_id: str, events: Sequence[Event], **fences: Any) -> AppendResult:
        (result,) = await self.append(StreamAppend(stream_id=stream_id, events=events, **fences))
        return result

    def hint(self, stream_ids: Sequence[str]) -> None:
        """Tell watchers here (at once) and in other processes (by NOTIFY) that these streams changed."""
        if self.wakeups is not None:
            self.wakeups.poke(stream_ids)
        for sid in stream_ids:
            self.db.notify_soon(CHANNEL, sid)

    async def read_stream(
        self, stream_id: str, after_seq: int = 0, limit: int = 1000, *, to_seq: int | None = None
    ) -> list[RecordedEvent]:
        rows = await self.db.fetch(Q.read_stream, stream_id, after_seq, limit, to_seq)
        return [_recorded(r) for r in rows]

    async def read_all(self, after: tuple[int, int] = START, limit: int = 1000) -> list[RecordedEvent]:
        """The next events of the global log after the cursor ``(tx, position)``, in an order that only grows
        at its end: no later call can return an event that sorts before one already returned."""
        rows = await self.db.fetch(Q.read_all, str(after[0]), after[1], limit)
        return [_recorded(r) for r in rows]

    async def stream(self, stream_id: str) -> Record | None:
        return await self.db.fetchrow(Q.stream, stream_id)

    def decode(self, e: RecordedEvent) -> Event:
        return self.types.decode(e.type, e.v, e.data, stream_id=e.stream_id, seq=e.seq)
