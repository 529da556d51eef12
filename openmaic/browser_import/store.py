"""What the browser persistence services share: one owner lock for their writes, folds on the held connection,
and appends made in that transaction.

Every write of OpenMAIC's persistence routes (documents, runtime sessions, folders) is a read-decide-append:
read the stream (and an id index), decide whether the request changes anything, append what it changes together
with the index rows, all in ONE transaction under the owner's persistence lock (:func:`openmaic.store.locks
.owner_lock`). The lock makes the decision and the write atomic for one owner, whichever process serves the
request, so a repeated request (the importer retrying, two tabs at once) finds the first one's effect and writes
nothing. Reads for the decision go through the held connection: under the lock they see every write committed
before it, and they take no second connection from the pool while this one is held.

Appends keep the log's own fences: each names the head it read (``expected_seq``), so a writer outside these
routes (a classroom deleted meanwhile) makes the append fail rather than be overwritten.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TypeVar

import trio

from openmaic import errors
from openmaic.events.fold_cache import FoldCache
from openmaic.events.hashchain import event_hash
from openmaic.events.log import FOLD_PAGE, EventLog, StreamAppend, recorded
from openmaic.events.types import Event
from openmaic.store.database import Connection
from openmaic.store.locks import owner_lock
from openmaic.store.queries import Q

__all__ = ["PERSISTENCE_LOCK", "Writer", "fold_cached", "fold_on", "owner_turn", "writing"]

PERSISTENCE_LOCK = 0x6F6D7073
"""The owner-lock namespace of the persistence routes' writes."""

S = TypeVar("S")


async def fold_on(conn: Connection | None, log: EventLog, stream_id: str, state: S,
                  evolve: Callable[[S, Event, int], S]) -> tuple[S, int]:
    """Fold the whole stream into ``state`` (on ``conn`` when given, else through the log's pool); returns the
    state and the seq of its last event (0: no event)."""
    if conn is None:
        return await log.fold(stream_id, state, evolve)
    seq = 0
    while True:
        page = [recorded(r) for r in await conn.fetch(Q.read_stream, stream_id, seq, FOLD_PAGE, None, None)]
        for e in page:
            state = evolve(state, log.decode(e), e.seq)
            seq = e.seq
        if len(page) < FOLD_PAGE:
            return state, seq


async def fold_cached(conn: Connection | None, log: EventLog, cache: FoldCache[S], stream_id: str, initial: S,
                      evolve: Callable[[S, Event, int], S]) -> tuple[S, int]:
    """:func:`fold_on` from ``initial``, starting from the state ``cache`` keeps for the stream: only the events
    after it are read. The kept state is used only where the stream still continues it (the log's hash chain):
    a database restored to an earlier point, or a standby promoted without the last commits, and written on since,
    has other events at those seqs, and the stream is folded again from its first event."""
    source = conn if conn is not None else log.db
    row = await source.fetchrow(Q.stream, stream_id)
    if row is None:
        cache.drop(stream_id)
        return initial, 0
    head, head_hash = int(row["head_seq"]), bytes(row["head_hash"] or b"")
    kept = cache.get(stream_id)
    if kept is not None and kept[1] == head and kept[2] == head_hash:
        return kept[0], head
    state, seq, last = (kept if kept is not None and kept[1] < head else (initial, 0, b""))
    while True:
        page = [recorded(r) for r in await source.fetch(Q.read_stream, stream_id, seq, FOLD_PAGE, None, None)]
        if seq and page and event_hash(last, page[0].seq, page[0].type, bytes(page[0].data)) != page[0].hash:
            state, seq, last = initial, 0, b""  # the stream does not continue what was kept: from the start
            continue
        for e in page:
            state, seq, last = evolve(state, log.decode(e), e.seq), e.seq, e.hash
        if len(page) < FOLD_PAGE:
            break
    if seq:
        cache.put(stream_id, state, seq, last)
    return state, seq


class Writer:
    """The held transaction of one write: fold, then :meth:`append` what changed (committed when the block ends)."""

    def __init__(self, log: EventLog, tx: Appender) -> None:
        self.log = log
        self.conn = tx.conn
        self._tx = tx

    async def fold(self, stream_id: str, state: S, evolve: Callable[[S, Event, int], S]) -> tuple[S, int]:
        return await fold_on(self.conn, self.log, stream_id, state, evolve)

    async def append(self, *batches: StreamAppend) -> None:
        try:
            await self._tx.append(*batches)
        except errors.WrongExpectedSeq:
            # Another writer (outside these routes) appended since the fold: nothing of ours is written.
            raise errors.Conflict("this was changed by another request meanwhile; read it again and retry") from None


@asynccontextmanager
async def writing(log: EventLog, owner: str) -> AsyncIterator[Writer]:
    """One write of ``owner``'s under the persistence lock; watchers are told once it committed (by the log)."""
    async with log.appending(owner_lock(log.db, owner, PERSISTENCE_LOCK)) as tx:
        yield Writer(log, tx)


_turns: dict[str, tuple[trio.Lock, int]] = {}


@asynccontextmanager
async def owner_turn(owner: str) -> AsyncIterator[None]:
    """One write of ``owner``'s at a time in this process, from its validation on.

    The owner's writes serialize on the persistence lock in the database anyway; taking a turn before the CPU work
    of a write (decoding, validating, encoding a document) keeps one owner's burst of writes to one request's worth
    of this process's time, so another owner's reads are not queued behind it. The lock is fair (FIFO) and is
    dropped from the table once no request holds or waits for it, so the table holds only owners writing now.
    """
    lock, users = _turns.get(owner, (None, 0))
    if lock is None:
        lock = trio.Lock()
    _turns[owner] = (lock, users + 1)
    try:
        async with lock:
            yield
    finally:
        # No await between here and the bookkeeping: a cancelled waiter still leaves the table consistent.
        lock, users = _turns[owner]
        if users <= 1:
            del _turns[owner]
        else:
            _turns[owner] = (lock, users - 1)
