"""Live feeds on a real database: one reader per stream, joining without gaps, dropping slow subscribers."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import trio
import trio.testing

from openmaic.errors import ServiceUnavailable
from openmaic.events.core import SessionCreated, SessionMessagePosted
from openmaic.events.log import PAGE_BYTES, EventLog, NewStream, StreamAppend
from openmaic.events.wakeups import Wakeups
from openmaic.feeds.live import LiveEvent, LiveFeeds
from tests.runtime import wait_for

NO_POLL = 3600.0  # feeds wake only on hints in these tests, so every read is one we caused


@contextlib.asynccontextmanager
async def running_feeds(db: Any, *, poke: bool = True) -> AsyncIterator[tuple[LiveFeeds, EventLog, Wakeups]]:
    """Feeds over ``db``; with ``poke=False`` appends do not wake them (a test wakes them by hand)."""
    wakeups = Wakeups()
    log = EventLog(db, wakeups if poke else None)
    feeds = LiveFeeds(log, wakeups, NO_POLL)
    async with trio.open_nursery() as nursery:
        await nursery.start(feeds.run)
        yield feeds, log, wakeups
        nursery.cancel_scope.cancel()


async def create(log: EventLog, sid: str) -> None:
    await log.append(StreamAppend(stream_id=sid, events=[SessionCreated(kind="test", owner_id="o")],
                                  create=NewStream("test", "o")))  # fmt: skip


async def post(log: EventLog, sid: str, n: int) -> None:
    await log.append_one(sid, [SessionMessagePosted(text=f"m{i}") for i in range(n)])


def drain(receive: trio.MemoryReceiveChannel[Any]) -> list[Any]:
    out = []
    while True:
        try:
            out.append(receive.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            return out


async def test_subscribers_of_a_stream_share_one_read_and_one_encoding_per_append(db):
    async with running_feeds(db) as (feeds, log, _):
        await create(log, "s")
        channels = [trio.open_memory_channel[Any](100) for _ in range(50)]
        with contextlib.ExitStack() as stack:
            for send, _ in channels:
                sub = stack.enter_context(feeds.subscriber("s", 1, send))
                assert await feeds.join(sub) == []
            assert feeds.active == 1
            await wait_for(lambda: _true(feeds.queries >= 1))  # the new feed's first read
            before = feeds.queries
            await post(log, "s", 3)
            got: list[list[LiveEvent]] = [[] for _ in channels]

            async def all_have_three() -> bool:
                for mine, (_, receive) in zip(got, channels, strict=True):
                    mine += drain(receive)
                return all(len(mine) == 3 for mine in got)

            await wait_for(all_have_three, timeout=10)
            assert feeds.queries == before + 1, "one query for the append, however many subscribers"
            assert [e.seq for e in got[0]] == [2, 3, 4]
            for mine in got[1:]:
                # The very same objects: each encoding is computed once for every subscriber.
                assert all(a is b for a, b in zip(mine, got[0], strict=True))
            calls: list[int] = []

            def codec(event: Any) -> bytes:
                calls.append(event.seq)
                return b"%d" % event.seq

            assert {mine[0].encoded(codec) for mine in got} == {b"2"} and calls == [2]


async def test_feeds_of_many_streams_woken_together_share_one_query(db):
    async with running_feeds(db, poke=False) as (feeds, log, wakeups):
        sids = [f"s{i}" for i in range(20)]
        for sid in sids:
            await create(log, sid)
        receives = {}
        with contextlib.ExitStack() as stack:
            for sid in sids:
                send, receives[sid] = trio.open_memory_channel[Any](10)
                assert await feeds.join(stack.enter_context(feeds.subscriber(sid, 1, send))) == []
            await wait_for(lambda: _true(feeds.queries >= 1))
            await trio.testing.wait_all_tasks_blocked()
            before = feeds.queries
            for sid in sids:
                await post(log, sid, 1)
            wakeups.poke(sids)  # one NOTIFY batch naming every stream
            got: dict[str, list[int]] = {sid: [] for sid in sids}

            async def everyone_has_it() -> bool:
                for sid in sids:
                    got[sid] += [e.seq for e in drain(receives[sid])]
                return all(v == [2] for v in got.values())

            await wait_for(everyone_has_it, timeout=10)
            assert feeds.queries == before + 1


async def test_a_joiner_behind_the_feed_reads_the_gap_and_one_past_it_skips_what_it_has(db):
    async with running_feeds(db, poke=False) as (feeds, log, wakeups):
        await create(log, "s")
        a_send, a_recv = trio.open_memory_channel[Any](100)
        b_send, b_recv = trio.open_memory_channel[Any](100)
        c_send, c_recv = trio.open_memory_channel[Any](100)
        with feeds.subscriber("s", 1, a_send) as a, feeds.subscriber("s", 3, b_send) as b:
            assert await feeds.join(a) == []
            await post(log, "s", 4)  # seqs 2..5, not hinted yet: the feed still stands at 1
            wakeups.poke(["s"])
            await wait_for(lambda: _true(a_recv.statistics().current_buffer_used == 4))
            # b has read up to 3 itself; the feed is at 5: b must deliver 4 and 5 itself, then join.
            gap = await feeds.join(b)
            assert [e.seq for e in gap] == [4, 5]
            b.after = gap[-1].seq
            assert await feeds.join(b) == []
            await post(log, "s", 2)  # seqs 6, 7 -- also not hinted
            # c has read everything (to 7) itself while the feed lags at 5: it joins at once and skips 6 and 7.
            with feeds.subscriber("s", 7, c_send) as c:
                assert await feeds.join(c) == []
                await post(log, "s", 1)  # seq 8
                wakeups.poke(["s"])
                await wait_for(lambda: _true(c_recv.statistics().current_buffer_used == 1))
                await wait_for(lambda: _true(a_recv.statistics().current_buffer_used == 7))
                assert [e.seq for e in drain(a_recv)] == [2, 3, 4, 5, 6, 7, 8]
                assert [e.seq for e in drain(b_recv)] == [6, 7, 8]
                assert [e.seq for e in drain(c_recv)] == [8]


async def test_a_full_queue_drops_only_that_subscriber_as_too_slow(db):
    async with running_feeds(db) as (feeds, log, _):
        await create(log, "s")
        slow_send, slow_recv = trio.open_memory_channel[Any](2)
        fast_send, fast_recv = trio.open_memory_channel[Any](100)
        with feeds.subscriber("s", 1, slow_send) as slow, feeds.subscriber("s", 1, fast_send) as fast:
            assert await feeds.join(slow) == [] and await feeds.join(fast) == []
            await post(log, "s", 5)
            with trio.fail_after(10):
                await slow.ended.wait()
            assert slow.too_slow and slow.error is None
            # What fitted is still there (valid events: the client resumes after the last one), then the end.
            assert [e.seq for e in drain(slow_recv)] == [2, 3]
            await post(log, "s", 1)
            await wait_for(lambda: _true(fast_recv.statistics().current_buffer_used == 6))
            assert [e.seq for e in drain(fast_recv)] == [2, 3, 4, 5, 6, 7]
            assert not fast.ended.is_set()


async def test_a_feed_ends_with_its_last_subscriber_and_a_new_one_starts_where_its_joiner_is(db):
    async with running_feeds(db) as (feeds, log, wakeups):
        await create(log, "s")
        send, _ = trio.open_memory_channel[Any](10)
        with feeds.subscriber("s", 1, send) as sub:
            assert await feeds.join(sub) == []
        assert feeds.active == 1
        wakeups.poke(["s"])  # the feed notices at its next wake-up
        await wait_for(lambda: _true(feeds.active == 0), timeout=10)
        await post(log, "s", 2)
        send2, recv2 = trio.open_memory_channel[Any](10)
        with feeds.subscriber("s", 3, send2) as sub2:
            assert await feeds.join(sub2) == []
            await post(log, "s", 1)
            await wait_for(lambda: _true(recv2.statistics().current_buffer_used == 1))
            assert [e.seq for e in drain(recv2)] == [4]


async def test_stopping_the_feeds_ends_subscribers_with_a_retryable_error(db):
    wakeups = Wakeups()
    log = EventLog(db, wakeups)
    feeds = LiveFeeds(log, wakeups, NO_POLL)
    await create(log, "s")
    send, _ = trio.open_memory_channel[Any](10)
    outcome: list[Any] = []

    async def follow(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with feeds.subscriber("s", 1, send) as sub:
            assert await feeds.join(sub) == []
            task_status.started()
            await sub.ended.wait()
            outcome.append(sub)

    with trio.fail_after(10):
        async with trio.open_nursery() as outer:
            async with trio.open_nursery() as serving:
                await serving.start(feeds.run)
                await outer.start(follow)
                serving.cancel_scope.cancel()  # the server stops
    (sub,) = outcome
    assert not sub.too_slow
    assert isinstance(sub.error, ServiceUnavailable)
    assert feeds.active == 0


async def test_a_failing_read_ends_the_feed_and_its_subscribers_and_a_later_join_starts_afresh(db, caplog):
    async with running_feeds(db) as (feeds, log, wakeups):
        await create(log, "s")
        send, _ = trio.open_memory_channel[Any](10)
        with feeds.subscriber("s", 1, send) as sub:
            assert await feeds.join(sub) == []
            await wait_for(lambda: _true(feeds.queries >= 1))
            await db.execute("ALTER TABLE events RENAME TO events_away")  # every read of the log now fails
            wakeups.poke(["s"])
            with trio.fail_after(10):
                await sub.ended.wait()
            assert isinstance(sub.error, ServiceUnavailable) and "reconnect" in str(sub.error)
            assert not sub.too_slow
        assert "live feed of stream 's' failed" in caplog.text
        assert feeds.active == 0
        await db.execute("ALTER TABLE events_away RENAME TO events")
        send2, recv2 = trio.open_memory_channel[Any](10)
        with feeds.subscriber("s", 1, send2) as sub2:
            assert await feeds.join(sub2) == []
            await post(log, "s", 1)
            await wait_for(lambda: _true(recv2.statistics().current_buffer_used == 1))


async def _true(value: bool) -> bool:
    return value


async def test_a_burst_larger_than_a_page_of_bytes_reaches_a_subscriber_whole_and_in_order(db):
    async with running_feeds(db) as (feeds, log, _):
        await create(log, "s")
        send, receive = trio.open_memory_channel[Any](1000)
        with feeds.subscriber("s", 1, send) as sub:
            assert await feeds.join(sub) == []
            # Each event is 100 kB: the burst is several of the feed's byte-bounded pages.
            burst = 3 * PAGE_BYTES // 100_000
            await log.append_one("s", [SessionMessagePosted(text="x" * 100_000) for _ in range(burst)])
            got: list[LiveEvent] = []

            async def all_arrived() -> bool:
                got.extend(drain(receive))
                return len(got) >= burst

            await wait_for(all_arrived, timeout=20)
            assert [e.seq for e in got] == list(range(2, burst + 2))


class _CountingFramer:
    """A framer whose frames name its own position: a framer advanced twice, or skipped, frames wrongly."""

    def __init__(self, at: int, framed: list[int], key: str = "view") -> None:
        self.key = key
        self.at = at
        self.framed = framed

    def frame(self, event: LiveEvent) -> bytes | None:
        assert event.seq == self.at + 1, (event.seq, self.at)  # events pass in seq order, each once
        self.at = event.seq
        self.framed.append(event.seq)
        return None if event.seq % 5 == 0 else b"frame %d" % event.seq  # some events have no frame


async def test_framed_subscribers_share_one_framer_per_position_and_groups_meet(db):
    async with running_feeds(db, poke=False) as (feeds, log, wakeups):
        await create(log, "s")
        framed: list[int] = []
        written: list[tuple[str, bytes]] = []
        queues = {name: trio.open_memory_channel[Any](100) for name in ("a", "b", "c", "d", "idle")}

        def sink(name: str) -> Any:
            # "idle" takes every frame at once (the connection's idle writer); the others' writers are busy.
            return lambda frame: name == "idle" and not written.append((name, frame))

        def subscriber(name: str, after: int, key: str = "view") -> Any:
            return feeds.subscriber("s", after, queues[name][0], framer=_CountingFramer(after, framed, key),
                                    sink=sink(name))  # fmt: skip

        got: dict[str, list[Any]] = {name: [] for name in queues}

        def received(name: str) -> list[Any]:
            got[name] += drain(queues[name][1])
            return got[name]

        with contextlib.ExitStack() as stack:
            a, b, idle = (stack.enter_context(subscriber(n, 1)) for n in ("a", "b", "idle"))
            for sub in (a, b, idle):
                assert await feeds.join(sub) == []
            await post(log, "s", 2)  # seqs 2, 3; the feed is still at 1
            # c read to 3 itself: it joins past the feed's cursor with a framer of its own at 3.
            c = stack.enter_context(subscriber("c", 3))
            assert await feeds.join(c) == []
            d = stack.enter_context(subscriber("d", 1, key="another view"))
            assert await feeds.join(d) == []
            wakeups.poke(["s"])
            await wait_for(lambda: _true(len(received("a")) >= 2))
            await post(log, "s", 3)  # seqs 4, 5, 6
            wakeups.poke(["s"])
            await wait_for(lambda: _true(len(received("a")) >= 4))
            # One framer for a, b and idle (and c once it met them at 3), one for d's other key.
            assert sorted(framed) == sorted([2, 3, 4, 5, 6] + [2, 3, 4, 5, 6]), framed
            frames = {name: received(name) for name in queues}
            assert frames["a"] == frames["b"] == [b"frame 2", b"frame 3", b"frame 4", b"frame 6"]
            assert all(x is y for x, y in zip(frames["a"], frames["b"], strict=True))  # the very same bytes
            assert frames["c"] == [b"frame 4", b"frame 6"] and frames["d"] == frames["a"]
            assert frames["idle"] == [] and [f for _, f in written] == frames["a"]  # written, not queued

