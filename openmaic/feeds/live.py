"""Live feeds: one reader per followed stream in an API process, however many clients follow it.

A client of a stream's WebSocket or SSE feed first reads the stream's history itself, at its own pace. Once
caught up it joins the stream's *feed*: one task per stream that wakes on the stream's hints (polling as a
backstop), reads the new events once, and offers each to every subscriber's bounded queue without waiting. An
append to a stream with N subscribers costs one query, one encoding per wire format (:meth:`LiveEvent.encoded`)
and N queue puts, not N wake-ups, N queries and N encodings. A feed ends when its last subscriber leaves.

A subscriber whose queue is full (by frames or by bytes, :mod:`openmaic.feeds.queues`) cannot keep up with the stream: the feed drops it and marks it
:attr:`~Subscriber.too_slow`, and its connection ends (WebSocket close 1013, end of the SSE response). The client
resumes from the last seq it has, so nothing is lost, and the server holds at most a queue's worth per client.

A subscriber that brings a :class:`Framer` (the stream WebSocket's) is offered *frames*, not events: the feed
groups such subscribers by their framer's ``key`` and position, and each group's one framer turns each event
into the frame every member sends (a client view is a pure fold of the stream, so two views of the same key at
the same seq give the same frames: the view is folded and the frame encoded once per group, not per client). A
joining subscriber's framer is at its ``after``; it joins a group of its key at that seq, or starts one, and
groups that meet at the same seq merge. A subscriber may also bring a *sink*: a callable the feed gives each
frame first, which writes it to the client at once when the connection is idle (no task hop per client and
event) and answers False when it cannot, and the frame goes to the queue as before.

Joining is a step with no await between the check and the insertion (trio switches tasks only at awaits), so no
event can fall between what a subscriber read itself and what the feed offers it:

* a feed's ``cursor`` is the last seq it has offered;
* a subscriber at or past the cursor joins at once; it is offered only events after its own ``after``;
* a subscriber behind the cursor reads the gap itself (:meth:`LiveFeeds.join` returns it), then tries again.

The feed registers its wake-up watch before its first read, so an append that lands between a read and the
wait still wakes it (see :mod:`openmaic.events.wakeups`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Protocol, TypeVar

import trio

from openmaic import metrics
from openmaic.errors import DatabaseUnavailable, OpenMaicError, ServiceUnavailable
from openmaic.events.log import PAGE_BYTES, EventLog, RecordedEvent, more_after
from openmaic.events.wakeups import Wakeups
from openmaic.feeds.queues import QueueSend
from openmaic.feeds.tasks import TaskHost

__all__ = ["Framer", "LiveEvent", "LiveFeeds", "Sink", "Subscriber"]

log = logging.getLogger("openmaic.feeds")

T = TypeVar("T")

PAGE = 1000
"""Events per read, for the feed and for a joiner's gap."""


class LiveEvent:
    """One recorded event on its way to many subscribers: each wire encoding is computed once, on first use.
    ``backlog``: read by the subscriber itself while catching up (not offered by a live feed)."""

    __slots__ = ("_encodings", "backlog", "event")

    def __init__(self, event: RecordedEvent, *, backlog: bool = False) -> None:
        self.event = event
        self.backlog = backlog
        self._encodings: dict[Callable[[RecordedEvent], Any], Any] = {}

    @property
    def seq(self) -> int:
        return self.event.seq

    def encoded(self, codec: Callable[[RecordedEvent], T]) -> T:
        """``codec(event)``, computed by the first subscriber that asks and shared with the rest."""
        try:
            return self._encodings[codec]  # type: ignore[no-any-return]
        except KeyError:
            value = self._encodings[codec] = codec(self.event)
            return value


class Framer(Protocol):
    """Turns a stream's events, in seq order, into one client's frames (advancing its view of the stream)."""

    key: Hashable
    """Framers of one stream with equal keys give the same frames from the same seq on (see the module doc)."""

    def frame(self, event: LiveEvent) -> bytes | None:
        """The frame of the event after the framer's position (None: this event has none); advances it."""
        ...


Sink = Callable[[bytes], bool]
"""Writes a frame to the client at once, without waiting, or answers False (the frame is then queued)."""


class Subscriber:
    """A client following one stream: its queue (the send side), and how its subscription ended."""

    def __init__(self, stream_id: str, after: int, send: trio.MemorySendChannel[Any] | QueueSend, *,
                 framer: Framer | None = None, sink: Sink | None = None) -> None:
        self.stream_id = stream_id
        self.after = after
        """The last seq this subscriber has; the feed offers only later ones. Advance it while reading a gap
        (and its framer with it: the framer must be at ``after`` when the subscriber joins)."""
        self.send = send
        self.framer = framer
        self.sink = sink
        self.ended = trio.Event()
        """Set when the feed dropped this subscriber (too slow, or the feed failed or stopped)."""
        self.too_slow = False
        self.error: OpenMaicError | None = None
        self._feed: _Feed | None = None

    def _end(self, *, too_slow: bool = False, error: OpenMaicError | None = None) -> None:
        self._leave()
        self.too_slow = too_slow
        self.error = error
        # Closing our clone of the queue: a consumer that owns the only clone sees the end once it has drained
        # what is queued (those events are valid; it resumes after the last one).
        self.send.close()
        self.ended.set()

    def _leave(self) -> None:
        feed, self._feed = self._feed, None
        if feed is not None:
            feed.subscribers.discard(self)
            feed.plain.discard(self)
            group = feed.group_of.pop(self, None)
            if group is not None:
                group.members.discard(self)
                if not group.members:
                    feed.groups.remove(group)


class _Group:
    """Subscribers whose framers agree (same key, same position): one framer frames each event for them all."""

    __slots__ = ("at", "framer", "key", "members")

    def __init__(self, framer: Framer, at: int) -> None:
        self.framer = framer
        self.key = framer.key
        self.at = at
        """The last seq the framer has framed (or its members had when they joined)."""
        self.members: set[Subscriber] = set()


class _Feed:
    def __init__(self, stream_id: str, cursor: int) -> None:
        self.stream_id = stream_id
        self.cursor = cursor
        self.subscribers: set[Subscriber] = set()
        """Every subscriber: the ``plain`` ones (offered events) and the groups' members (offered frames)."""
        self.plain: set[Subscriber] = set()
        self.groups: list[_Group] = []
        self.group_of: dict[Subscriber, _Group] = {}

    def add(self, sub: Subscriber) -> None:
        self.subscribers.add(sub)
        sub._feed = self
        framer = sub.framer
        if framer is None:
            self.plain.add(sub)
            return
        key, at = framer.key, sub.after
        group = next((g for g in self.groups if g.at == at and g.key == key), None)
        if group is None:
            group = _Group(framer, at)
            self.groups.append(group)
        group.members.add(sub)
        self.group_of[sub] = group

    def merge_groups(self) -> None:
        """Groups of one key at the same seq become one (their framers are in the same state)."""
        if len(self.groups) < 2:
            return
        first: dict[tuple[Hashable, int], _Group] = {}
        for group in tuple(self.groups):
            into = first.setdefault((group.key, group.at), group)
            if into is not group:
                for sub in group.members:
                    self.group_of[sub] = into
                into.members |= group.members
                self.groups.remove(group)


class _Read:
    def __init__(self, stream_id: str, after: int) -> None:
        self.stream_id = stream_id
        self.after = after
        self.done = trio.Event()
        self.events: list[RecordedEvent] = []
        self.failed: BaseException | None = None


class _Reader:
    """The feeds' reads, batched: feeds woken by the same hints (one append touching many streams, or many
    appends at once) share one query instead of one each. A read asked for while a query runs joins the next."""

    def __init__(self, log: EventLog) -> None:
        self._log = log
        self._queue: list[_Read] = []
        self._wake = trio.Event()
        self.queries = 0

    async def read(self, stream_id: str, after: int) -> list[RecordedEvent]:
        request = _Read(stream_id, after)
        self._queue.append(request)
        self._wake.set()
        await request.done.wait()
        if request.failed is not None:
            raise OpenMaicError(f"reading stream {stream_id!r} failed: {request.failed}") from request.failed
        return request.events

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            # One scheduling round: every feed woken by the same hints queues its read before we take the batch.
            await trio.lowlevel.checkpoint()
            batch, self._queue = self._queue, []
            if not batch:
                continue  # another reader (a second app served on the same services) took it
            self.queries += 1
            try:
                found = await self._log.read_streams([(r.stream_id, r.after) for r in batch], PAGE,
                                                     max_bytes=PAGE_BYTES)
            except BaseException as exc:
                # Every request of the batch gets an answer, even when this reader is cancelled: a feed of
                # another run (a second app on the same services) must not wait for it forever.
                for r in batch:
                    r.failed = exc
                    r.done.set()
                if not isinstance(exc, Exception):
                    raise
                continue
            for r in batch:
                r.events = found.get(r.stream_id, [])
                r.done.set()


class LiveFeeds:
    """The feeds of one API process. :meth:`run` must be running (it owns the feeds' tasks)."""

    def __init__(self, log: EventLog, wakeups: Wakeups, poll_s: float) -> None:
        self._log = log
        self._wakeups = wakeups
        self._poll_s = poll_s
        self._feeds: dict[str, _Feed] = {}
        self._reader = _Reader(log)
        self._tasks = TaskHost()

    @property
    def queries(self) -> int:
        """Queries the feeds have made (one per batch of woken feeds): for tests and diagnostics."""
        return self._reader.queries

    @property
    def active(self) -> int:
        """Streams with a running feed."""
        return len(self._feeds)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the feeds until cancelled; their subscribers are then ended with a "reconnect" error. Each app
        served on these services runs this once; new feeds start under the latest run."""
        await self._tasks.run(self._reader.run, task_status=task_status)

    @contextlib.contextmanager
    def subscriber(self, stream_id: str, after: int, send: trio.MemorySendChannel[Any] | QueueSend, *,
                   framer: Framer | None = None, sink: Sink | None = None) -> Iterator[Subscriber]:
        """A subscriber for the block's duration; it leaves its feed (if it joined one) when the block ends.
        With a ``framer`` it is offered frames (bytes) instead of events, through ``sink`` first if given."""
        sub = Subscriber(stream_id, after, send, framer=framer, sink=sink)
        try:
            yield sub
        finally:
            sub._leave()

    async def join(self, sub: Subscriber) -> list[RecordedEvent]:
        """Join the stream's feed and return ``[]``; or, when ``sub`` is behind the feed, return the next events
        it must deliver itself first. Call again after delivering them and advancing ``sub.after``."""
        feed = self._feeds.get(sub.stream_id)
        if feed is None:
            # A new feed starts where its first subscriber is: everything before is that subscriber's own read.
            new = _Feed(sub.stream_id, sub.after)
            self._tasks.start_soon(self._run_feed, new)  # first: it refuses when no app runs the feeds
            feed = self._feeds[sub.stream_id] = new
            metrics.LIVE_FEEDS.inc()
        if sub.after >= feed.cursor:
            feed.add(sub)
            return []
        gap = await self._log.read_stream(sub.stream_id, sub.after, PAGE, to_seq=feed.cursor, max_bytes=PAGE_BYTES)
        if not gap:
            # The feed offered events up to its cursor, so they exist; an empty read means the log lost them.
            raise OpenMaicError(f"stream {sub.stream_id!r}: events {sub.after + 1}..{feed.cursor} are missing")
        return gap

    async def _run_feed(self, feed: _Feed) -> None:
        ending: OpenMaicError | None = ServiceUnavailable("the server is stopping; reconnect")
        try:
            # Watch before the first read: an append landing between a read and the wait still wakes us.
            with self._wakeups.watch(feed.stream_id) as watch:
                while True:
                    await self._offer_new_events(feed)
                    if not feed.subscribers:
                        ending = None
                        return
                    await watch.wait(self._poll_s)  # a hint, or the poll backstop: read either way
        except Exception as exc:  # a failed feed ends its subscribers (they reconnect), never the server
            if isinstance(exc.__cause__, DatabaseUnavailable):
                log.warning("live feed of stream %r stopped: %s", feed.stream_id, exc)  # expected while it restarts
            else:
                log.exception("live feed of stream %r failed", feed.stream_id)
            ending = ServiceUnavailable(f"reading stream {feed.stream_id!r} failed; reconnect")
            ending.__cause__ = exc
        finally:
            # No await from the emptiness check to here: a subscriber either joined before (and is ended
            # below) or finds no feed and starts a new one.
            if self._feeds.get(feed.stream_id) is feed:
                del self._feeds[feed.stream_id]
                metrics.LIVE_FEEDS.dec()
            for sub in tuple(feed.subscribers):
                sub._end(error=ending)

    async def _offer_new_events(self, feed: _Feed) -> None:
        while True:
            batch = await self._reader.read(feed.stream_id, feed.cursor)
            now = time.time()
            for event in batch:
                # Two clocks (the database's, this host's): a skew shows here, never in what is delivered.
                metrics.LIVE_DELIVERY_SECONDS.observe(max(now - event.recorded_at.timestamp(), 0.0))
                live = LiveEvent(event)
                seq = event.seq
                for group in tuple(feed.groups):
                    if seq <= group.at:
                        continue  # its members joined past the cursor: they have this one already
                    group.at = seq
                    try:
                        frame = group.framer.frame(live)
                    except Exception as exc:  # a view that cannot frame this event ends its clients, not the feed
                        log.exception("framing event %d of stream %r failed", seq, feed.stream_id)
                        error = OpenMaicError(f"framing event {seq} of stream {feed.stream_id!r} failed")
                        error.__cause__ = exc
                        for sub in tuple(group.members):
                            sub._end(error=error)
                        continue
                    if frame is not None:
                        for sub in tuple(group.members):
                            self._offer(sub, frame)
                for sub in tuple(feed.plain):
                    if seq > sub.after:  # else it joined past the cursor: it has this one already
                        self._offer(sub, live)
                feed.cursor = seq
            feed.merge_groups()
            if not more_after(batch, PAGE, PAGE_BYTES):
                return

    @staticmethod
    def _offer(sub: Subscriber, item: Any) -> None:
        sink = sub.sink
        if sink is not None and sink(item):
            return  # written to the client already
        try:
            sub.send.send_nowait(item)  # never wait: one slow client must not hold up the others
        except trio.WouldBlock:
            sub._end(too_slow=True)
            metrics.SLOW_CONSUMERS.inc()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            sub._leave()  # its consumer is gone; it leaves on its own
