"""The group commit: concurrent appends of one process share database calls.

Concurrent :meth:`~openmaic.events.log.EventLog.append` calls in one process share database calls. Requests queue
while calls are in flight; a free worker takes what is queued, in order, up to ``max_requests`` requests and
``max_events`` events, and sends it as ONE statement: one trio→asyncio crossing, one transaction, one WAL flush.
The usual group (each request one existing stream, no command id, no two requests to one stream) is the plain,
set-based ``append_many``; any other (creations, several streams in one request, command ids, one stream twice)
is an ``openmaic_append_group`` call (0005). A lone request goes out at once (nothing waits on a timer), as the
one-statement ``append_one`` when it names one existing stream, else as an ``openmaic_append`` call; and a
lone request (no call in flight, nothing queued) from its caller's own task, with no hop to a worker. Per call,
the client pays a crossing, the driver's encoding and a few task wake-ups, and the server a transaction and a
flush; for a one-event append these cost more than the append itself, and a group pays them once.

* Each request keeps its own outcome: it commits all of its streams or none, and a failed fence
  (StaleAttempt, WrongExpectedSeq), CommandConflict, StreamNotFound or StreamExists fails that request only
  (the SQL function reruns each request in its own subtransaction once any request of the group fails;
  ``append_many`` writes only the requests whose fences pass, and each it refused is then sent alone, which
  decides its error). A replayed command returns its original seqs, also when the original is earlier in the
  same group.
* Order: a stream's requests are applied in the order their ``append`` calls were made. Inside a group the
  function applies requests in queue order; and a request naming a stream that an in-flight call also names
  waits for a later call (as does every later request to that stream), so two calls in flight never share a
  stream, and never wait on each other's row locks.
* Up to ``max_calls`` calls are in flight at once. One backend runs each call, so with a single call in
  flight the server would work on one core however much is queued; ``max_events`` splits a burst of large
  batches over the calls in flight.
* Cost: a group holds the row locks of all its streams until it commits (taken up front, in id order, so
  that two processes' groups cannot deadlock), so a request waits for the slowest lock of its group: another
  process's append to a stream of the group, or a transaction holding such a row lock open (bounded by
  ``idle_in_transaction_session_timeout``), delays every request of that group.
* The workers belong to the database (:meth:`Database.start_soon`, open_database's nursery), not to an
  EventLog: any number of EventLogs over one database share one queue, and constructing ``EventLog(db)``
  anywhere starts nothing that outlives the database. Without them (the database is closing, or was not
  opened by ``open_database``) each append is sent alone from its caller's task, as before.

Cancellation of a caller blocked in ``append``:

* its request is still queued: it is withdrawn and Cancelled is raised. It was not sent and never will be.
* its request is in a call in flight: the call carries other callers' requests and is not cancelled for one
  of them, so the caller waits, shielded, for the call to end and returns its request's outcome (results, or
  the request's own error): the append happened or was refused, and the caller knows which. The pending
  cancellation is raised at its next checkpoint. Once every caller of a call has been cancelled, the call
  itself is cancelled, as a lone call's is: they all get Cancelled and the outcome is unknown (the call may
  have committed; a ``command_id`` makes a retry safe). That is the contract of any cancelled database call
  here (trio-asyncio cancels the asyncio task and waits for it to finish).
* the database closing (its nursery cancelled) cancels no call in flight: each finishes for its callers.
  Requests still queued go back to their callers, who send them alone from their own tasks, so an append made
  from a shielded cleanup still happens.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import trio

from openmaic import errors
from openmaic.events.readback import read_back
from openmaic.events.types import Event
from openmaic.store.database import Database, error_for_sqlstate
from openmaic.store.queries import Q

logger = logging.getLogger(__name__)

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


_QUEUED, _IN_FLIGHT, _DONE, _WITHDRAWN, _RETURNED = range(5)
"""A request's life: queued → in flight → done; or queued → withdrawn (its caller was cancelled first); or
queued → returned (no worker will send it: its caller sends it alone)."""


class AppendRequest:
    """One ``append`` call: its batches, their encoded events, what to do once it commits, and (once known) its
    outcome."""

    __slots__ = ("db", "committed", "batches", "streams", "types", "versions", "datas", "state", "done", "call",
                 "results", "error")

    def __init__(
        self, db: Database, committed: Callable[[AppendRequest, list[AppendResult]], None],
        batches: Sequence[StreamAppend], types: list[str], versions: list[int], datas: list[str],
    ) -> None:
        self.db = db
        self.committed = committed
        """Called with the request's results once it has committed (the log's metrics and hints)."""
        self.batches = batches
        self.streams = [b.stream_id for b in batches]
        self.types = types
        self.versions = versions
        self.datas = datas
        self.state = _QUEUED
        self.done = trio.Event()
        self.call: _Call | None = None
        self.results: list[AppendResult] | None = None
        self.error: BaseException | None = None


class _Call:
    """One database call in flight and the requests it carries."""

    __slots__ = ("requests", "waiting", "scope")

    def __init__(self, requests: list[AppendRequest]) -> None:
        self.requests = requests
        self.waiting = len(requests)
        # Shielded: the call carries several callers' requests, so no one caller's cancellation (nor the
        # database's nursery closing) may abort it under the others. It is cancelled, as a lone call would be,
        # only once every one of its callers has been cancelled (GroupCommit._wait).
        self.scope = trio.CancelScope(shield=True)


def columns(requests: Sequence[AppendRequest]) -> tuple[list[Any], ...]:
    """The column arrays of ``openmaic_append`` for these requests, concatenated in order."""
    if len(requests) == 1 and len(requests[0].batches) == 1:
        # The common case, one request to one stream: one-element columns, and the encoded events as they are.
        r = requests[0]
        b = r.batches[0]
        create = b.create
        unset = b.wake_at is _UNSET
        return ([b.stream_id], [None if create is None else create.kind],
                [None if create is None else create.owner_id], [b.attempt], [b.expected_seq], [b.command_id],
                [b.status], [not unset], [None if unset else b.wake_at], [b.release], [b.progress],
                [len(r.types)], r.types, r.versions, r.datas)
    ids: list[str] = []
    kinds: list[str | None] = []
    owners: list[str | None] = []
    attempts: list[int | None] = []
    expected: list[int | None] = []
    commands: list[str | None] = []
    statuses: list[str | None] = []
    set_wake: list[bool] = []
    wake_at: list[dt.datetime | None] = []
    release: list[bool] = []
    progress: list[bool] = []
    counts: list[int] = []
    types, versions, datas = events_of(requests)
    for r in requests:
        for b in r.batches:
            ids.append(b.stream_id)
            create = b.create
            if create is None:
                kinds.append(None)
                owners.append(None)
            else:
                kinds.append(create.kind)
                owners.append(create.owner_id)
            attempts.append(b.attempt)
            expected.append(b.expected_seq)
            commands.append(b.command_id)
            statuses.append(b.status)
            if b.wake_at is _UNSET:
                set_wake.append(False)
                wake_at.append(None)
            else:
                set_wake.append(True)
                wake_at.append(b.wake_at)
            release.append(b.release)
            progress.append(b.progress)
            counts.append(len(b.events))
    return (ids, kinds, owners, attempts, expected, commands, statuses, set_wake, wake_at, release, progress,
            counts, types, versions, datas)


def events_of(requests: Sequence[AppendRequest]) -> tuple[list[str], list[int], list[str]]:
    """The requests' encoded events (types, versions, JSON), request after request; a lone request's as they are."""
    if len(requests) == 1:
        r = requests[0]
        return r.types, r.versions, r.datas
    types: list[str] = []
    versions: list[int] = []
    datas: list[str] = []
    for r in requests:
        types += r.types
        versions += r.versions
        datas += r.datas
    return types, versions, datas


UNIQUE_VIOLATION = "23505"


async def send_alone(req: AppendRequest, *, plain: bool = True) -> list[AppendResult]:
    """One request as one statement: its error is raised, as PostgreSQL raised it.

    The common request (one existing stream, some events) goes as ``append_one``, one plain statement; when that
    writes nothing (a missing stream, a refused fence, a repeated command id), ``openmaic_append`` decides the
    outcome: the error to raise, or the replay's original seqs. Either statement commits alone, so the request is
    applied by exactly one of them. ``plain=False``: a plain statement just wrote nothing of it (``append_many``
    refused it), so it goes to ``openmaic_append`` at once.
    """
    db = req.db
    if plain and len(req.batches) == 1 and req.types and req.batches[0].create is None:
        b = req.batches[0]
        unset = b.wake_at is _UNSET
        try:
            row = await db.fetchrow(
                Q.append_one, b.stream_id, b.attempt, b.expected_seq, b.command_id, b.status, not unset,
                None if unset else b.wake_at, b.release, b.progress, req.types, req.versions, req.datas,
            )
        except errors.DatabaseError as exc:
            if exc.details.get("sqlstate") != UNIQUE_VIOLATION:
                raise
        else:
            if row is not None:
                return [AppendResult(b.stream_id, row[0], row[1], False)]
    rows = await db.fetch(Q.append, *columns((req,)))
    return [AppendResult(r[0], r[1], r[2], r[3]) for r in rows]


def _copy_error(exc: BaseException) -> BaseException:
    """A fresh instance of a call-level error for each caller of the call (one instance raised in several tasks
    would collect all their tracebacks)."""
    try:
        new = copy.copy(exc)
    except Exception:  # pragma: no cover - an exception type that cannot be copied: share it
        return exc
    new.__cause__ = exc
    return new


class GroupCommit:
    """The append queue of one database, shared by every :class:`EventLog` over it (see the module's doc)."""

    max_calls = 4
    """Calls in flight at once. One backend runs each call: with one, the server works on one core; and while one
    call waits for its commit's WAL flush the others are applied, so their commits share the next flush (the
    server groups concurrent flushes). Four, not two: with 100-event batches a call carries four, and two calls in
    flight left the server waiting on flushes (docs/benchmarks.md). Each call holds a pooled connection while it
    runs. 0 sends every append alone from its caller's task (no grouping)."""
    max_requests = 64
    """Requests per call."""
    max_events = 400
    """Events per call (a larger request goes alone): a few milliseconds of server work. Bounding it bounds
    the latency a call adds for its smallest request, and splits a burst of large batches over the calls in
    flight, so the server works on them in parallel instead of in one backend."""

    def __init__(self) -> None:
        self._queue: deque[AppendRequest] = deque()
        self._busy: set[str] = set()
        """streams named by the calls in flight"""
        self._in_flight = 0
        self._idle = trio.lowlevel.ParkingLot()
        self._workers = 0
        self._running = False
        self._closed = False
        self._warned = False
        self.calls = 0
        """database calls made by the workers (statistics)"""
        self.requests = 0
        """requests those calls carried"""

    # -- callers ------------------------------------------------------------------------------------------------

    def statistics(self) -> dict[str, int]:
        """Calls made, requests they carried, requests queued now and calls in flight now."""
        queued = sum(1 for r in self._queue if r.state == _QUEUED)
        return {"calls": self.calls, "requests": self.requests, "queued": queued, "in_flight": self._in_flight}

    async def submit(self, req: AppendRequest) -> list[AppendResult]:
        if self.max_calls <= 0 or (not self._running and not self._start(req.db)):
            return await self._send_direct(req)
        queue = self._queue
        if self._in_flight == 0 and not queue:
            # Possibly a lone request: no call in flight, nothing queued ahead of it. It waits in the queue for one
            # scheduling round (the pending cancellation, if any, comes at its next checkpoint), so that appends
            # made in the same round (writers woken together by the previous call) still share one call; if none
            # came, it is sent from this task, as the call a woken worker would make for it alone, without the
            # hop to the worker and back. It was first in the queue, so no earlier request to its streams is
            # pending. (The round cannot be skipped when no other task looks runnable: trio takes a round's tasks
            # off its run queue before running them, so the rest of this round's writers are not counted there.)
            queue.append(req)
            await trio.lowlevel.cancel_shielded_checkpoint()
            if req.state == _QUEUED and len(queue) == 1 and self._in_flight == 0:
                queue.popleft()
                return await self._send_own(req)
        else:
            queue.append(req)
        if self._in_flight < self.max_calls and self._idle:
            self._idle.unpark()
        return await self._wait(req)

    async def _wait(self, req: AppendRequest) -> list[AppendResult]:
        try:
            await req.done.wait()
        except trio.Cancelled:
            if req.state == _QUEUED or req.state == _RETURNED:
                # Not sent, and now never will be: a worker skips a withdrawn request.
                req.state = _WITHDRAWN
                raise
            if req.state == _IN_FLIGHT:
                call = req.call
                assert call is not None
                call.waiting -= 1
                if call.waiting == 0:
                    # Nobody is left to receive this call's outcome: cancel it as a lone call is cancelled.
                    call.scope.cancel()
                # Shielded: the call cannot be recalled for one request, and waiting for its end lets the caller
                # learn whether its append happened instead of leaving it unsure. (The wait is no longer than the
                # call: it is cancelled as soon as none of its callers is waiting.)
                with trio.CancelScope(shield=True):
                    await req.done.wait()
            if req.results is None and req.error is None:
                raise  # the call itself was cancelled: the outcome is unknown, as for any cancelled call
        if req.state == _RETURNED:
            return await self._send_direct(req)
        if req.error is not None:
            raise req.error
        assert req.results is not None
        return req.results

    async def _send_own(self, req: AppendRequest) -> list[AppendResult]:
        """A call of one request made from its caller's task. Requests queued meanwhile go to the workers. It is
        cancelled with its caller, as a call all of whose callers have been cancelled is."""
        await self._execute([req], own=True)
        if req.error is not None:
            raise req.error
        assert req.results is not None
        return req.results

    async def _send_direct(self, req: AppendRequest) -> list[AppendResult]:
        """Send a request alone from its caller's task (no workers): cancellation as for any database call."""
        results = await send_alone(req)
        req.committed(req, results)
        return results

    # -- workers ------------------------------------------------------------------------------------------------

    def _start(self, db: Database) -> bool:
        if self._closed:
            return False
        start = getattr(db, "start_soon", None)
        if start is None:
            return False
        for i in range(max(1, self.max_calls)):
            if not start(self._worker, db, name=f"openmaic group commit {i}"):
                break
            self._workers += 1
        self._running = self._workers > 0
        return self._running

    async def _worker(self, db: Database) -> None:
        try:
            while True:
                # A closing database stops its workers here, after a call in flight has finished for its callers
                # and before another is taken.
                await trio.lowlevel.checkpoint_if_cancelled()
                group = self._take()
                if group is None:
                    await self._idle.park()
                else:
                    await self._execute(group)
        finally:
            self._workers -= 1
            self._running = False
            self._closed = True
            if self._workers == 0:
                # Nobody will send what is still queued: each caller sends its request alone, from its own task
                # (a caller inside a shielded cleanup still gets its append made).
                while self._queue:
                    req = self._queue.popleft()
                    if req.state == _QUEUED:
                        req.state = _RETURNED
                        req.done.set()

    def _take(self) -> list[AppendRequest] | None:
        """The next call's requests: what is queued, in queue order, up to the bounds."""
        queue = self._queue
        # at least one call: requests queued before grouping was switched off are still sent
        if self._in_flight >= max(1, self.max_calls) or not queue:
            return None
        busy = self._busy
        blocked: set[str] | None = None
        skipped: list[AppendRequest] = []
        group: list[AppendRequest] = []
        events = 0
        while queue and len(group) < self.max_requests:
            req = queue.popleft()
            if req.state != _QUEUED:
                continue  # withdrawn: its caller was cancelled before it was sent
            streams = req.streams
            if (busy or blocked) and any(sid in busy or (blocked is not None and sid in blocked) for sid in streams):
                # A call in flight names one of its streams: it waits for a later call, and so does every later
                # request to its streams, so each stream's requests are applied in the order they were made.
                if blocked is None:
                    blocked = set()
                blocked.update(streams)
                skipped.append(req)
                continue
            n = len(req.types)
            if group and events + n > self.max_events:
                queue.appendleft(req)
                break
            group.append(req)
            events += n
        if skipped:
            queue.extendleft(reversed(skipped))
        if group and queue and self._idle and self._in_flight + 1 < self.max_calls:
            # more is queued than this call takes: another worker sends the rest now
            self._idle.unpark()
        return group or None

    async def _execute(self, group: list[AppendRequest], own: bool = False) -> None:
        call = _Call(group)
        for req in group:
            req.state = _IN_FLIGHT
            req.call = call
            self._busy.update(req.streams)
        self._in_flight += 1
        self.calls += 1
        self.requests += len(group)
        try:
            if own:
                # Its only caller runs it, unshielded: cancelling the caller cancels the call, and no other
                # caller waits on its scope.
                await self._send_one(group[0])
            else:
                with call.scope:
                    if len(group) == 1:
                        await self._send_one(group[0])
                    else:
                        await self._send_group(group)
        finally:
            self._in_flight -= 1
            for req in group:
                self._busy.difference_update(req.streams)
                if req.state == _IN_FLIGHT:
                    # The call was cancelled (every caller had left): no outcome, and none will come.
                    req.state = _DONE
                req.done.set()
            if own and self._queue and self._idle:
                # Requests queued behind this call (to its streams, or while it was the only one) wait for a worker:
                # a worker's own call would have looked at the queue again at its end, this one's caller does not.
                self._idle.unpark()

    @staticmethod
    def _settle(req: AppendRequest, results: list[AppendResult] | None, error: BaseException | None) -> None:
        req.results = results
        req.error = error
        req.state = _DONE
        if error is None:
            assert results is not None
            req.committed(req, results)
        req.done.set()

    async def _send_one(self, req: AppendRequest, *, plain: bool = True) -> None:
        try:
            results = await send_alone(req, plain=plain)
        except errors.DatabaseUnavailable as exc:
            await self._resolve_lost([req], exc)
        except Exception as exc:  # the request's own outcome: a fence, a conflict, …
            self._settle(req, None, exc)
        else:
            self._settle(req, results, None)

    async def _resolve_lost(self, group: list[AppendRequest], exc: errors.DatabaseUnavailable) -> None:
        """The call's connection was lost: it committed all of its requests or none. Never sent again; answered
        from the log when found committed there, else each with the error (:mod:`openmaic.events.readback`)."""
        found = await read_back(group)
        for req, seqs in zip(group, found or [None] * len(group)):
            results = None if seqs is None else [AppendResult(sid, first, last, False) for sid, first, last in seqs]
            self._settle(req, results, _copy_error(exc) if results is None else None)

    async def _send_group(self, group: list[AppendRequest]) -> None:
        if plain_set(group):
            await self._send_set(group)
            return
        db = group[0].db
        try:
            rows = await db.fetch(
                Q.append_group, [len(r.streams) for r in group], [len(r.types) for r in group], *columns(group)
            )
        except Exception as exc:
            await self._failed_as_a_whole(group, exc)
            return
        results: list[list[AppendResult]] = [[] for _ in group]
        failures: list[BaseException | None] = [None] * len(group)
        for row in rows:
            i = row[0] - 1
            status = row[1]
            if status == "ok":
                results[i].append(AppendResult(row[2], row[3], row[4], False))
            elif status == "replayed":
                results[i].append(AppendResult(row[2], row[3], row[4], True))
            else:
                failures[i] = error_for_sqlstate(status, row[5], row[6] or None)
        for req, res, failure in zip(group, results, failures):
            self._settle(req, None if failure is not None else res, failure)

    async def _failed_as_a_whole(self, group: list[AppendRequest], exc: Exception) -> None:
        if isinstance(exc, errors.DatabaseUnavailable):
            # The connection was lost: the group may have committed, so no request may be sent again.
            await self._resolve_lost(group, exc)
            return
        # The statement failed as a whole (refused by the driver, or by the server outside every request), so
        # nothing of it was committed: send each request alone, so that each gets its own outcome and a bad
        # request cannot fail the others.
        if not self._warned:
            self._warned = True
            logger.warning("a group of %d appends failed as a whole; sending them one by one", len(group),
                           exc_info=exc)
        for req in group:
            await self._send_one(req)

    async def _send_set(self, group: list[AppendRequest]) -> None:
        """A group of plain requests (see :func:`plain_set`) as one ``append_many`` statement; a request it did not
        write (a missing stream, a refused fence) is sent alone afterwards, which decides its exact outcome."""
        db = group[0].db
        batches = [r.batches[0] for r in group]
        unset = [b.wake_at is _UNSET for b in batches]
        try:
            rows = await db.fetch(
                Q.append_many, [b.stream_id for b in batches], [b.attempt for b in batches],
                [b.expected_seq for b in batches], [b.status for b in batches], [not u for u in unset],
                [None if u else b.wake_at for b, u in zip(batches, unset)], [b.release for b in batches],
                [b.progress for b in batches], [len(r.types) for r in group], *events_of(group),
            )
        except Exception as exc:
            await self._failed_as_a_whole(group, exc)
            return
        written = {row[0]: row for row in rows}
        refused = []
        for i, req in enumerate(group, start=1):
            row = written.get(i)
            if row is None:
                refused.append(req)
            else:
                self._settle(req, [AppendResult(req.streams[0], row[1], row[2], False)], None)
        for req in refused:
            # Nothing of it was written, and no other request of the group named its stream: alone now, it
            # is applied or refused as if it had come after the group (by openmaic_append: append_one would
            # only refuse it again).
            await self._send_one(req, plain=False)


def plain_set(group: Sequence[AppendRequest]) -> bool:
    """Whether ``append_many`` can carry the group: each request one existing stream (no creation), at least
    one event and no command id (a replay is openmaic_append's to decide), no two requests to one stream."""
    seen: set[str] = set()
    for r in group:
        if len(r.batches) != 1 or not r.types:
            return False
        b = r.batches[0]
        if b.create is not None or b.command_id is not None or b.stream_id in seen:
            return False
        seen.add(b.stream_id)
    return True


_group_commits: weakref.WeakKeyDictionary[Any, GroupCommit] = weakref.WeakKeyDictionary()


def group_commit(db: Database) -> GroupCommit:
    """The append queue shared by every EventLog over ``db`` (created on first use; it holds no reference to
    the database, so it goes when the database goes)."""
    try:
        gc = _group_commits.get(db)
        if gc is None:
            gc = _group_commits[db] = GroupCommit()
    except TypeError:  # an object that cannot be weakly referenced (a test double): a queue of its own
        gc = GroupCommit()
    return gc
