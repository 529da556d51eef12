"""The event log: append (fenced, idempotent, hash-chained), read a stream, tail the global log.

An append request to one existing stream is applied by one plain statement (``append_one``); any other, and
any that statement leaves to it (a refusal, a replay), by ``openmaic_append`` (0001, leaner since 0005). Either
way the stream's row lock serializes its appenders, so seq order is commit order and seqs are gap-free.
Concurrent appends of one process share database calls (:mod:`openmaic.events.group_commit`, which also says
what a cancelled append guarantees). After a commit the log pokes in-process watchers directly and queues a
coalesced NOTIFY hint (stream ids only) for other processes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from decimal import Decimal
from typing import Any, TypeVar

import msgspec

from openmaic import errors, metrics
from openmaic.events.core import SessionCancelRequested
from openmaic.events.group_commit import AppendRequest, AppendResult, NewStream, StreamAppend, columns, group_commit
from openmaic.events.types import Event, Registry, registry
from openmaic.events.wakeups import CHANNEL, RUNNABLE, Wakeups, cancel_hint
from openmaic.store.database import Connection, Database, Record
from openmaic.store.gateway import Gateway
from openmaic.store.replica import Replica
from openmaic.store.queries import Q
from openmaic.text import json_has_nul, unstorable_message

__all__ = [  # the append's own types live with the group commit, which sends them; they are the log's API
    "CANCEL_REQUESTED", "FOLD_PAGE", "START", "AppendResult", "Appender", "Cursor", "Envelope", "EventLog", "Horizon",
    "NewStream", "RecordedEvent", "StreamAppend", "CommandEvent", "StreamRow", "StreamSummary", "envelope", "reaches",
    "recorded",
]

Cursor = tuple[int, int, int]
"""A place in the global log: ``(epoch, tx, position)``."""


class Horizon(msgspec.Struct, frozen=True):
    """What holds the tailing horizon back (see :meth:`EventLog.horizon`)."""

    xmin: int
    """The horizon: the oldest transaction id still running in the cluster."""
    behind: int
    """Transaction ids handed out since then: how far the readable log trails the newest writes."""
    oldest_s: float | None
    """How long the transaction holding the horizon has been open (None: none is, or it is not visible to us)."""
    pid: int | None
    """Its backend (None for a prepared transaction, or when there is none)."""


class HorizonRow(msgspec.Struct, frozen=True):
    """What ``horizon`` reads: the snapshot's xmin and how far ids ran past it, and the open transaction holding it
    (its backend, database, state and age; all None when none does)."""

    xmin: str
    behind: Decimal
    pid: int | None
    database: str | None
    state: str | None
    age_s: float | None


class StreamRow(msgspec.Struct, frozen=True, kw_only=True):
    """A stream's row (table ``streams``) as :meth:`EventLog.stream_row` reads it: its head, its scheduling columns
    and its lease, typed here at the log so that nothing above it indexes the driver's rows by column name."""

    id: str
    kind: str
    owner_id: str
    head_seq: int
    head_hash: bytes
    status: str
    """``queued``, ``running``, ``waiting`` or ``terminal``."""
    wake_at: dt.datetime | None
    attempt: int
    lease_worker: str | None
    lease_expires_at: dt.datetime | None
    unattended_attempts: int
    created_at: dt.datetime
    updated_at: dt.datetime
    deleted_at: dt.datetime | None


class StreamSummary(msgspec.Struct, frozen=True, kw_only=True):
    """A stream as a listing reads it (:meth:`EventLog.summaries`): enough to fold it to its head, show it and
    page on by ``(created_at, id)``, typed here for the same reason as :class:`StreamRow`."""

    id: str
    head_seq: int
    status: str
    attempt: int
    created_at: dt.datetime
    updated_at: dt.datetime


class CommandEvent(msgspec.Struct, frozen=True):
    """The first event a command id wrote on a stream (:meth:`EventLog.command_event`)."""

    seq: int
    type: str
    last_seq: int
    """The last seq the command wrote on the stream: what it did is the stream as of this seq."""


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
    epoch: int = 1
    """The span of the log written in one transaction-id space (see ``read_all``)."""

    @property
    def cursor(self) -> Cursor:
        """Position of this event in the global log: ``(epoch, tx, position)``."""
        return (self.epoch, self.tx, self.position)


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


PAGE_BYTES = 1024 * 1024
"""The byte budget of a page that a client's catch-up reads (:meth:`EventLog.read_stream`'s ``max_bytes``):
without it a page of 1,000 large events is held whole by every client reading it at once."""


def more_after(page: Sequence[RecordedEvent], limit: int, max_bytes: int | None = None) -> bool:
    """Whether a page read with ``limit`` and ``max_bytes`` may have events after it (a full page, by count or by
    bytes; a page that is neither was the end of the stream)."""
    return len(page) >= limit or (max_bytes is not None and sum(len(e.data) for e in page) >= max_bytes)


def reaches(page: Sequence[RecordedEvent], *, after: int, target: int, limit: int, max_bytes: int | None) -> bool:
    """Whether a page read after seq ``after`` gives its reader everything up to ``target`` it asked for: the page
    ends at ``target`` or later, or is full (the reader reads on from its end), or nothing up to ``target`` was
    asked for. A stream's seqs have no gaps, so such a page from a replica is what the primary would answer."""
    if after >= target or (page and page[-1].seq >= target):
        return True
    return more_after(page, limit, max_bytes)


async def _read_stream(db: Gateway, args: tuple[Any, ...]) -> list[RecordedEvent]:
    return [recorded(r) for r in await db.fetch(Q.read_stream, *args)]


def envelope(e: RecordedEvent) -> Envelope:
    return Envelope(e.stream_id, e.seq, e.type, e.v, e.data, e.attempt, e.command_id, e.recorded_at)


def recorded(r: Record) -> RecordedEvent:
    """A row with the columns of the log's event reads (``read_stream``, ``read_all`` …) as a RecordedEvent."""
    return RecordedEvent(
        r["stream_id"], r["seq"], r["type"], r["v"], msgspec.Raw(r["data"].encode()), r["attempt"],
        r["command_id"], r["recorded_at"], r["position"], int(r["tx"]), r["hash"], r["epoch"],
    )



CANCEL_REQUESTED = SessionCancelRequested.__struct_config__.tag
"""Its appends also hint :func:`~openmaic.events.wakeups.cancel_hint` (what actors' cancel watchers wait on)."""

S = TypeVar("S")

FOLD_PAGE = 1000
"""Events per read while folding a stream."""

START: Cursor = (0, 0, 0)
"""The global-log cursor before the first event."""


class Appender:
    """Appends inside a caller's transaction (see :meth:`EventLog.appending`)."""

    def __init__(self, log: EventLog, conn: Connection) -> None:
        self.log = log
        self.conn = conn
        self.done: list[tuple[AppendRequest, list[AppendResult]]] = []

    async def append(self, *batches: StreamAppend) -> list[AppendResult]:
        """:meth:`EventLog.append`, in this transaction: the same fences, errors and results."""
        if not batches:
            return []
        req = self.log._request(batches)
        rows = await self.conn.fetch(Q.append, *columns((req,)))
        results = [AppendResult(r[0], r[1], r[2], r[3]) for r in rows]
        self.done.append((req, results))
        return results


class EventLog:
    def __init__(self, db: Database, wakeups: Wakeups | None = None, types: Registry = registry, *,
                 replica: Replica | None = None) -> None:
        self.db = db
        self.wakeups = wakeups
        self.types = types
        self.replica = replica
        """Where reads given a ``floor`` may go (:mod:`openmaic.store.replica`); None: everything reads ``db``."""
        self._group = group_commit(db)

    async def append(self, *batches: StreamAppend) -> list[AppendResult]:
        """Append to one or more streams in one transaction (all or nothing).

        Raises StaleAttempt, WrongExpectedSeq, CommandConflict, StreamNotFound or StreamExists; then nothing
        was written. Concurrent calls share database calls (group commit, see the module's doc, which also
        says what a cancelled call guarantees); each keeps its own outcome.
        """
        if not batches:
            return []
        request = self._request(batches)
        with metrics.timed(metrics.APPEND_SECONDS) as observed:
            try:
                return await self._group.submit(request)
            except (errors.Conflict, errors.NotFound):
                observed["outcome"] = "refused"  # a fence or a conflict: the database answered "no"
                raise

    def append_args(self, batches: Sequence[StreamAppend]) -> tuple[list[Any], ...]:
        """The arguments of the ``append`` query (column arrays) for these batches: for tests that must write what
        the log would, but bypassing it (no count, no hint). Code in openmaic appends through the log only
        (:meth:`append`, :meth:`appending`)."""
        return columns((self._request(batches),))

    async def append_one(self, stream_id: str, events: Sequence[Event], **fences: Any) -> AppendResult:
        (result,) = await self.append(StreamAppend(stream_id=stream_id, events=events, **fences))
        return result

    def _request(self, batches: Sequence[StreamAppend]) -> AppendRequest:
        # Encoded here, in the caller: an event that cannot be encoded fails its own call, not a group.
        types: list[str] = []
        versions: list[int] = []
        datas: list[str] = []
        for b in batches:
            self.types.encode_into(b.events, types, versions, datas)
        for t, data in zip(types, datas):
            if "\\u0000" in data and json_has_nul(data):
                # The log's json keeps it, but no read model could copy it into text: refused here, the
                # last door, whoever the writer (the API's doors refuse it earlier, naming the field).
                raise errors.InvalidInput(unstorable_message(f"event {t}"), type=t)
        return AppendRequest(self.db, self._committed, batches, types, versions, datas)

    def _committed(self, req: AppendRequest, results: list[AppendResult]) -> None:
        if results and not results[0].replayed:
            metrics.APPENDS.inc(len(req.types))
            ids = [r.stream_id for r in results]
            if any(b.status == "queued" for b in req.batches):
                ids.append(RUNNABLE)
            if CANCEL_REQUESTED in req.types:
                ids += [cancel_hint(b.stream_id) for b in req.batches
                        if any(isinstance(e, SessionCancelRequested) for e in b.events)]  # fmt: skip
            self.hint(ids)

    @contextlib.asynccontextmanager
    async def appending(self, transaction: AbstractAsyncContextManager[Connection]) -> AsyncIterator[Appender]:
        """Append inside a transaction the caller opens (``transaction``, e.g. one holding an owner's lock, see
        :func:`openmaic.store.locks.owner_lock`), so that reads and appends decide and commit together.

        The block gets an :class:`Appender`: ``.conn`` for the caller's own statements, ``.append(...)`` for its
        appends, which keep every fence and the outcome of :meth:`append` (but do not share a group commit: they
        are the caller's transaction). Once the transaction has committed, and only then, the log does for them
        what it does for every append (counts them, tells the watchers of their streams, the runnable hint for
        a queued stream, the cancel hint); if the block raises, the transaction rolls back and nothing is told.
        """
        async with transaction as conn:
            appender = Appender(self, conn)
            yield appender
        for req, results in appender.done:
            self._committed(req, results)

    def hint(self, stream_ids: Sequence[str]) -> None:
        """Tell watchers here (at once) and in other processes (by NOTIFY) that these streams changed."""
        if self.wakeups is not None:
            self.wakeups.poke(stream_ids)
        for sid in stream_ids:
            self.db.notify_soon(CHANNEL, sid)

    async def read_stream(
        self, stream_id: str, after_seq: int = 0, limit: int = 1000, *, to_seq: int | None = None,
        max_bytes: int | None = None, floor: int | None = None,
    ) -> list[RecordedEvent]:
        """At most ``limit`` events after ``after_seq`` (up to ``to_seq``); with ``max_bytes``, a page that stops
        once its events' data reach that many characters (always one event at least: a page holds at most
        ``max_bytes`` plus one event). :func:`more_after` says whether to read on.

        ``floor`` makes it a catch-up read, which the replica may serve: the seq the reader must get at least (the
        stream's head as the caller read it from the primary, or the last seq its client has). The page is then
        the primary's, or the replica's when it :func:`reaches` as far (see :mod:`openmaic.store.replica`). A
        caller giving one must read on while :func:`more_after` says so: a page that is full is accepted as such.
        """
        args = (stream_id, after_seq, limit, to_seq, max_bytes)
        if floor is None or self.replica is None:
            return await _read_stream(self.db, args)
        if to_seq is not None and after_seq >= to_seq:
            return []  # nothing asked for (a fold already at its seq)
        target = floor if to_seq is None else min(floor, to_seq)
        # Past the floor already, the reader needs nothing it does not have: any answer will do.
        complete = None if after_seq >= target else functools.partial(reaches, after=after_seq, target=target,
                                                                        limit=limit, max_bytes=max_bytes)
        return await self.replica.read(self.db, functools.partial(_read_stream, args=args), complete)

    async def read_streams(
        self, cursors: Sequence[tuple[str, int]], limit: int = 1000, *, max_bytes: int | None = None,
    ) -> dict[str, list[RecordedEvent]]:
        """:meth:`read_stream` for several streams in one query: ``{stream_id: events}`` for each
        ``(stream_id, after_seq)`` cursor (at most ``limit`` events and, with ``max_bytes``, about that many
        characters of data per stream, as :meth:`read_stream` pages; streams with none are absent)."""
        if not cursors:
            return {}
        rows = await self.db.fetch(Q.read_streams, [c[0] for c in cursors], [c[1] for c in cursors], limit, max_bytes)
        out: dict[str, list[RecordedEvent]] = {}
        for r in rows:
            e = recorded(r)
            out.setdefault(e.stream_id, []).append(e)
        return out

    async def read_all(self, after: Cursor = START, limit: int = 1000) -> list[RecordedEvent]:
        """The next events of the global log after the cursor ``(epoch, tx, position)``, in an order that only
        grows at its end: no later call can return an event that sorts before one already returned. The order
        survives a logical restore into another cluster (see ``openmaic_epoch`` in migration 0009)."""
        rows = await self.db.fetch(Q.read_all, after[0], str(after[1]), after[2], limit)
        return [recorded(r) for r in rows]

    async def horizon(self) -> Horizon:
        """The tailing horizon and what holds it back. A transaction left open anywhere in the cluster (another
        database included) stalls every projector and feed that tails the log; this says which and for how long."""
        r = await self.db.fetchrow_as(HorizonRow, Q.horizon)
        assert r is not None
        return Horizon(int(r.xmin), int(r.behind), float(r.age_s) if r.age_s is not None else None, r.pid)

    async def stream_row(self, stream_id: str) -> StreamRow | None:
        """The stream's row, typed, or None when there is no such stream."""
        return await self.db.fetchrow_as(StreamRow, Q.stream, stream_id)

    async def command_event(self, stream_id: str, command_id: str) -> CommandEvent | None:
        """The first event ``command_id`` wrote on the stream, or None when it wrote none there."""
        return await self.db.fetchrow_as(CommandEvent, Q.command_previous, stream_id, command_id)

    async def summaries(self, statement: str, *args: Any) -> list[StreamSummary]:
        """The rows of a listing ``statement`` (one that selects the columns of :class:`StreamSummary` from
        ``streams``), typed."""
        return await self.db.fetch_as(StreamSummary, statement, *args)

    async def events(self, statement: str, *args: Any) -> list[RecordedEvent]:
        """The rows of an event read ``statement`` (one selecting the columns of the log's event reads, as
        ``read_stream`` does: the projector's predecessor and gap reads), as RecordedEvents."""
        return [recorded(r) for r in await self.db.fetch(statement, *args)]

    def decode(self, e: RecordedEvent) -> Event:
        return self.types.decode(e.type, e.v, e.data, stream_id=e.stream_id, seq=e.seq)

    async def fold(
        self,
        stream_id: str,
        state: S,
        evolve: Callable[[S, Event, int], S],
        *,
        after: int = 0,
        to_seq: int | None = None,
        floor: int | None = None,
    ) -> tuple[S, int]:
        """Fold the stream's events after ``after`` (up to ``to_seq``) into ``state``, a page at a time; with
        ``floor``, a catch-up read (see :meth:`read_stream`).

        Returns the state and the seq of the last event folded (``after`` when there was none).
        """
        seq = after
        while True:
            page = await self.read_stream(stream_id, seq, FOLD_PAGE, to_seq=to_seq, floor=floor)
            for e in page:
                state = evolve(state, self.decode(e), e.seq)
                seq = e.seq
            if len(page) < FOLD_PAGE:
                return state, seq
