"""Contract of the event log against a real PostgreSQL: ordering, fences, idempotency, atomicity, hashing."""

from __future__ import annotations

import random

import pytest
import trio

from openmaic import errors
from openmaic.events.core import SessionCreated, SessionEnded, SessionMessagePosted
from openmaic.events.hashchain import ChainBreak, verify_chain
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.store.database import open_database
from openmaic.store.queries import Q


async def create(log: EventLog, sid: str, owner: str = "o") -> None:
    await log.append(
        StreamAppend(stream_id=sid, events=[SessionCreated(kind="test", owner_id=owner)], create=NewStream("test", owner))
    )


async def chain_of(log: EventLog, sid: str) -> list[tuple[int, str, bytes, bytes]]:
    return [(e.seq, e.type, bytes(e.data), e.hash) for e in await log.read_stream(sid, limit=100_000)]


async def test_sixteen_concurrent_appenders_get_gap_free_seqs(db):
    log = EventLog(db)
    await create(log, "s")
    results = []

    async def appender(i: int) -> None:
        for j in range(10):
            n = random.randint(1, 3)
            r = await log.append_one("s", [SessionMessagePosted(text=f"{i}/{j}/{k}") for k in range(n)])
            results.append(r)

    async with trio.open_nursery() as nursery:
        for i in range(16):
            nursery.start_soon(appender, i)

    events = await log.read_stream("s", limit=10_000)
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(seqs) == 1 + sum(r.last_seq - r.first_seq + 1 for r in results)
    # each append got a contiguous, disjoint range
    ranges = sorted((r.first_seq, r.last_seq) for r in results)
    for (a, b), (c, _) in zip(ranges, ranges[1:]):
        assert c == b + 1
    row = await log.stream_row("s")
    assert row.head_seq == seqs[-1]
    assert verify_chain(await chain_of(log, "s")) == row.head_hash


async def test_two_processes_appending_to_one_stream_keep_seqs_gap_free_and_the_chain_whole(db, db_url):
    # Two pools, as two processes: each one's lone appends go as one statement (append_one) that waits on the
    # other's row lock, so it must take the seq and the previous hash from the row version it locked.
    log = EventLog(db)
    await create(log, "s")
    await db.execute("UPDATE streams SET attempt = 7 WHERE id = 's'")
    results = []

    async def appender(other_db, i: int) -> None:
        other = EventLog(other_db)
        for j in range(25):
            n = random.randint(1, 4)
            results.append(await other.append_one(
                "s", [SessionMessagePosted(text=f"{i}/{j}/{k}") for k in range(n)], attempt=7,
                command_id=f"{i}-{j}",
            ))

    async with open_database(db_url, min_size=1, max_size=2) as db2:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(appender, db, 1)
            nursery.start_soon(appender, db2, 2)
    events = await log.read_stream("s", limit=10_000)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    # each append got a contiguous range of its own, and its command's extent is that range
    ranges = sorted((r.first_seq, r.last_seq) for r in results)
    assert [a for a, _ in ranges] == [2] + [b + 1 for _, b in ranges[:-1]] and ranges[-1][1] == events[-1].seq
    extents = await db.fetch("SELECT seq, command_last_seq FROM events WHERE stream_id = 's' AND command_id IS NOT NULL"
                             " ORDER BY seq")
    assert [tuple(r) for r in extents] == ranges
    assert not any(r.replayed for r in results)
    assert all(e.attempt == 7 for e in events[1:])
    row = await log.stream_row("s")
    assert row.head_seq == events[-1].seq
    assert verify_chain(await chain_of(log, "s")) == row.head_hash


async def test_a_lone_append_writes_what_openmaic_append_writes(db):
    # The one-statement path and openmaic_append must store the same rows: same seqs, hashes, attempt, command
    # extent, epoch and scheduling columns.
    log = EventLog(db)
    for sid in ("fast", "function"):
        await create(log, sid)
        await db.execute("UPDATE streams SET attempt = 4, lease_worker = 'w', unattended_attempts = 3 WHERE id = $1",
                         sid)
    events = [SessionMessagePosted(text="a"), SessionMessagePosted(text="b"), SessionEnded(status="completed")]
    fences = dict(attempt=4, expected_seq=1, command_id="cmd", status="terminal", release=True, progress=True)
    fast = await log.append_one("fast", events, **fences)
    (function,) = [r for r in await db.fetch(Q.append, *log.append_args([StreamAppend(stream_id="function",
                                                                                       events=events, **fences)]))]
    assert (fast.first_seq, fast.last_seq, fast.replayed) == (function["first_seq"], function["last_seq"], False)
    columns = ("seq, type, v, data::text, attempt, command_id, command_last_seq, hash, epoch")
    assert (await db.fetch(f"SELECT {columns} FROM events WHERE stream_id = 'fast' ORDER BY seq")) == (
        await db.fetch(f"SELECT {columns} FROM events WHERE stream_id = 'function' ORDER BY seq"))
    heads = ("head_seq, head_hash, status, wake_at, attempt, lease_worker, lease_expires_at, unattended_attempts")
    assert (await db.fetchrow(f"SELECT {heads} FROM streams WHERE id = 'fast'")) == (
        await db.fetchrow(f"SELECT {heads} FROM streams WHERE id = 'function'"))
    # and a replay of the command, though the one statement cannot see it, gets the original seqs
    again = await log.append_one("fast", events, **fences)
    assert (again.first_seq, again.last_seq, again.replayed) == (fast.first_seq, fast.last_seq, True)
    with pytest.raises(errors.StreamNotFound):
        await log.append_one("missing", events)


async def test_stale_attempt_is_refused_and_writes_nothing(db):
    log = EventLog(db)
    await create(log, "s")
    await db.execute("UPDATE streams SET attempt = 3 WHERE id = 's'")
    with pytest.raises(errors.StaleAttempt):
        await log.append_one("s", [SessionMessagePosted(text="late")], attempt=2)
    assert [e.seq for e in await log.read_stream("s")] == [1]
    r = await log.append_one("s", [SessionMessagePosted(text="current")], attempt=3)
    assert r.first_seq == 2
    assert (await log.read_stream("s"))[-1].attempt == 3


async def test_wrong_expected_seq_is_refused_and_writes_nothing(db):
    log = EventLog(db)
    await create(log, "s")
    with pytest.raises(errors.WrongExpectedSeq):
        await log.append_one("s", [SessionMessagePosted(text="x")], expected_seq=0)
    assert (await log.stream_row("s")).head_seq == 1
    r = await log.append_one("s", [SessionMessagePosted(text="x")], expected_seq=1)
    assert r.first_seq == 2


async def test_command_replay_returns_original_seqs_and_writes_nothing(db):
    log = EventLog(db)
    await create(log, "s")
    first = await log.append_one("s", [SessionMessagePosted(text="a"), SessionMessagePosted(text="b")], command_id="c1")
    await log.append_one("s", [SessionMessagePosted(text="other")])
    again = await log.append_one("s", [SessionMessagePosted(text="a"), SessionMessagePosted(text="b")], command_id="c1")
    assert (again.first_seq, again.last_seq, again.replayed) == (first.first_seq, first.last_seq, True)
    assert (await log.stream_row("s")).head_seq == 4
    # a replay wins over a fence that would now fail: the client gets its original answer
    again = await log.append_one("s", [SessionMessagePosted(text="a")], command_id="c1", expected_seq=1)
    assert again.replayed and again.first_seq == 2
    with pytest.raises(errors.CommandConflict):
        await log.append_one("s", [SessionEnded(status="cancelled")], command_id="c1")
    assert (await log.stream_row("s")).head_seq == 4


async def test_concurrent_replays_of_one_command_write_once(db):
    log = EventLog(db)
    await create(log, "s")
    results = []

    async def send() -> None:
        results.append(await log.append_one("s", [SessionMessagePosted(text="once")], command_id="dup"))

    async with trio.open_nursery() as nursery:
        for _ in range(8):
            nursery.start_soon(send)
    assert {(r.first_seq, r.last_seq) for r in results} == {(2, 2)}
    assert sum(not r.replayed for r in results) == 1
    assert (await log.stream_row("s")).head_seq == 2


async def test_multi_stream_append_is_all_or_nothing(db):
    log = EventLog(db)
    await create(log, "run")
    await create(log, "course")
    await db.execute("UPDATE streams SET attempt = 1 WHERE id = 'run'")
    with pytest.raises(errors.StaleAttempt):
        await log.append(
            StreamAppend(stream_id="course", events=[SessionMessagePosted(text="c")]),
            StreamAppend(stream_id="run", events=[SessionMessagePosted(text="r")], attempt=7),
        )
    assert (await log.stream_row("run")).head_seq == 1
    assert (await log.stream_row("course")).head_seq == 1
    res = await log.append(
        StreamAppend(stream_id="run", events=[SessionMessagePosted(text="r")], attempt=1),
        StreamAppend(stream_id="course", events=[SessionMessagePosted(text="c")] * 2),
    )
    assert {r.stream_id: (r.first_seq, r.last_seq) for r in res} == {"run": (2, 2), "course": (2, 3)}
    # both streams' events were written by one transaction
    txs = {e.tx for sid in ("run", "course") for e in (await log.read_stream(sid))[1:]}
    assert len(txs) == 1


async def test_create_unknown_and_existing_streams(db):
    log = EventLog(db)
    with pytest.raises(errors.StreamNotFound) as exc:
        await log.append_one("nope", [SessionMessagePosted(text="x")])
    assert "nope" in str(exc.value)
    await create(log, "s")
    with pytest.raises(errors.StreamExists):
        await create(log, "s")
    assert (await log.stream_row("s")).head_seq == 1


async def test_scheduling_columns_change_with_the_events(db):
    log = EventLog(db)
    await create(log, "s")
    await db.execute("UPDATE streams SET lease_worker = 'w', attempt = 1, unattended_attempts = 2 WHERE id = 's'")
    await log.append_one("s", [SessionEnded(status="completed")], attempt=1, status="terminal", release=True,
                         progress=True)
    row = await log.stream_row("s")
    assert (row.status, row.lease_worker, row.unattended_attempts) == ("terminal", None, 0)


@pytest.mark.parametrize(
    "statement",
    ["UPDATE events SET type = 'x'", "DELETE FROM events", "TRUNCATE events CASCADE"],
)
async def test_events_are_append_only(db, statement):
    log = EventLog(db)
    await create(log, "s")
    with pytest.raises(errors.DatabaseError, match="append-only"):
        await db.execute(statement)
    assert len(await log.read_stream("s")) == 1


async def test_hash_chain_detects_an_altered_byte(db):
    log = EventLog(db)
    await create(log, "s")
    for i in range(5):
        await log.append_one("s", [SessionMessagePosted(text=f"message {i}")])
    row = await log.stream_row("s")
    assert verify_chain(await chain_of(log, "s")) == row.head_hash
    # as superuser, bypassing the trigger: change one byte of one stored event
    await db.transaction([
        ("ALTER TABLE events DISABLE TRIGGER events_append_only_rows", ()),
        ("UPDATE events SET data = '{\"text\":\"message X\",\"delivery\":\"queued\"}' WHERE stream_id = 's' AND seq = 4", ()),
        ("ALTER TABLE events ENABLE TRIGGER events_append_only_rows", ()),
    ])
    with pytest.raises(ChainBreak) as exc:
        verify_chain(await chain_of(log, "s"))
    assert exc.value.seq == 4


async def test_stored_data_bytes_are_exactly_what_was_hashed(db):
    log = EventLog(db)
    await create(log, "s")
    text = "ünïcødé ✓ \"quoted\" \\ back\nslash"
    await log.append_one("s", [SessionMessagePosted(text=text)])
    (e,) = await log.read_stream("s", after_seq=1)
    assert bytes(e.data) == log.types.encode(SessionMessagePosted(text=text))[2]
    verify_chain(await chain_of(log, "s"))


async def test_read_stream_paging_and_to_seq(db):
    log = EventLog(db)
    await create(log, "s")
    await log.append_one("s", [SessionMessagePosted(text=str(i)) for i in range(20)])
    page = await log.read_stream("s", after_seq=5, limit=4)
    assert [e.seq for e in page] == [6, 7, 8, 9]
    assert [e.seq for e in await log.read_stream("s", to_seq=3)] == [1, 2, 3]


async def test_read_streams_reads_each_cursor_like_read_stream_in_one_query(db):
    log = EventLog(db)
    for sid, n in (("a", 10), ("b", 3), ("c", 0)):
        await create(log, sid)
        if n:
            await log.append_one(sid, [SessionMessagePosted(text=f"{sid}{i}") for i in range(n)])
    cursors = [("b", 1), ("a", 2), ("c", 1), ("missing", 0)]
    found = await log.read_streams(cursors, limit=5)
    assert set(found) == {"a", "b"}, "streams with nothing after their cursor are absent"
    for sid, after in cursors[:2]:
        expected = await log.read_stream(sid, after, 5)
        assert [(e.seq, bytes(e.data), e.hash) for e in found[sid]] == [(e.seq, bytes(e.data), e.hash) for e in expected]
    assert [e.seq for e in found["a"]] == [3, 4, 5, 6, 7]
    assert await log.read_streams([]) == {}


async def test_read_streams_pages_each_stream_by_bytes_as_read_stream_does(db):
    log = EventLog(db)
    for sid in ("big", "small"):
        await create(log, sid)
    await log.append_one("big", [SessionMessagePosted(text=str(i) * 10_000) for i in range(6)])
    await log.append_one("small", [SessionMessagePosted(text=str(i)) for i in range(6)])
    budget = 25_000  # each big event's data is a little over 10,000 characters: three fit while under the budget
    found = await log.read_streams([("big", 1), ("small", 1)], 1000, max_bytes=budget)
    for sid in ("big", "small"):
        expected = await log.read_stream(sid, 1, 1000, max_bytes=budget)
        assert [e.seq for e in found[sid]] == [e.seq for e in expected]
    assert [e.seq for e in found["big"]] == [2, 3, 4], "a big stream's page stops at the budget"
    assert [e.seq for e in found["small"]] == [2, 3, 4, 5, 6, 7], "another stream's page is its own"
    one = await log.read_streams([("big", 1)], 1000, max_bytes=1)
    assert [e.seq for e in one["big"]] == [2], "one event at least"


async def test_read_all_sees_every_committed_event_once_under_racing_transactions(db):
    """8 appenders hold their transactions open 0–200 ms, some roll back; a tailing reader misses nothing."""
    log = EventLog(db)
    for i in range(8):
        await create(log, f"r{i}")
    committed: set[tuple[str, int]] = set()
    rolled_back_texts: set[str] = set()
    seen: list[tuple[str, int]] = []
    done = trio.Event()

    class Rollback(Exception):
        pass

    async def appender(i: int) -> None:
        sid = f"r{i}"
        for j in range(25):
            texts = [f"{sid}-{j}-{k}" for k in range(random.randint(1, 3))]
            batch = StreamAppend(stream_id=sid, events=[SessionMessagePosted(text=t) for t in texts])
            roll = random.random() < 0.2
            try:
                async with db.connection() as conn:
                    async with conn.transaction():
                        rows = await conn.fetch(Q.append, *log.append_args([batch]))
                        await trio.sleep(random.uniform(0, 0.2))
                        if roll:
                            raise Rollback
            except Rollback:
                rolled_back_texts.update(texts)
                continue
            first, last = rows[0]["first_seq"], rows[0]["last_seq"]
            committed.update((sid, s) for s in range(first, last + 1))

    async def reader() -> None:
        cursor = (0, 0, 0)
        while True:
            finished = done.is_set()
            page = await log.read_all(cursor, limit=50)
            for e in page:
                assert e.cursor > cursor
                cursor = e.cursor
                seen.append((e.stream_id, e.seq))
                assert log.decode(e).text not in rolled_back_texts if e.type == "session.message_posted" else True
            if not page:
                if finished:
                    return
                await trio.sleep(0.005)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        async with trio.open_nursery() as appenders:
            for i in range(8):
                appenders.start_soon(appender, i)
        done.set()

    creations = {(f"r{i}", 1) for i in range(8)}
    assert len(seen) == len(set(seen)), "an event was delivered twice"
    assert set(seen) == committed | creations
    assert rolled_back_texts, "the workload should have rolled something back"


async def test_read_all_does_not_pass_an_open_transaction(db):
    """The classic bug: a later-numbered commit becomes visible while an earlier number is still in flight."""
    log = EventLog(db)
    await create(log, "a")
    await create(log, "b")
    cursor = (await log.read_all())[-1].cursor
    holding = trio.Event()
    release = trio.Event()

    slow_pid: list[int] = []

    async def slow() -> None:
        async with db.connection() as conn, conn.transaction():
            await conn.fetch(Q.append, *log.append_args([StreamAppend(stream_id="a", events=[SessionMessagePosted(text="slow")])]))
            slow_pid.append(conn.backend_pid)
            holding.set()
            await release.wait()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(slow)
        await holding.wait()
        opened = trio.current_time()
        await log.append_one("b", [SessionMessagePosted(text="fast")])
        # The fast event is committed, but the slow transaction began first: nothing may be read past it yet.
        assert await log.read_all(cursor) == []
        await trio.sleep(0.3)
        # ... and the horizon says who holds it back, and since when.
        h = await log.horizon()
        assert h.pid == slow_pid[0] and h.behind >= 2
        assert h.oldest_s is not None and h.oldest_s >= trio.current_time() - opened - 0.05
        release.set()
    with trio.fail_after(5):
        while len(page := await log.read_all(cursor)) < 2:
            await trio.sleep(0.01)
    assert [log.decode(e).text for e in page] == ["slow", "fast"]


async def test_an_append_wakes_watchers_here_and_in_other_processes(db, db_url):
    from openmaic.events.wakeups import Wakeups
    from openmaic.store.database import open_database

    here = Wakeups()
    log = EventLog(db, here)
    await create(log, "s")
    async with open_database(db_url, listen=["openmaic_events"]) as other_db:
        there = Wakeups()
        async with trio.open_nursery() as nursery:
            await nursery.start(there.run, other_db)
            with here.watch("s") as w_here, there.watch("s") as w_there, there.watch() as w_any, \
                    there.watch("elsewhere") as w_other:
                await log.append_one("s", [SessionMessagePosted(text="wake up")])
                assert await w_here.wait(5)
                assert await w_there.wait(5)
                assert await w_any.wait(5)
                # a watcher of another stream is not woken: it polls, and finds nothing new
                assert not await w_other.wait(0.2)
            nursery.cancel_scope.cancel()


# -- group commit ---------------------------------------------------------------------------------------------------
#
# Concurrent appends share database calls. To put requests in one call deterministically, these tests allow one call
# in flight and hold it back with a row lock taken by an explicit transaction: whatever is appended meanwhile queues,
# in call order, and goes out together once the lock is released.


class Held:
    """Row locks on streams, held by explicit transactions until released."""

    def __init__(self, db, nursery: trio.Nursery) -> None:
        self.db = db
        self.nursery = nursery
        self.releases: dict[str, trio.Event] = {}

    async def hold(self, sid: str) -> None:
        locked = trio.Event()
        self.releases[sid] = release = trio.Event()

        async def holder() -> None:
            async with self.db.connection() as conn, conn.transaction():
                await conn.execute("SELECT 1 FROM streams WHERE id = $1 FOR UPDATE", sid)
                locked.set()
                await release.wait()

        self.nursery.start_soon(holder)
        await locked.wait()

    def release(self, sid: str) -> None:
        self.releases.pop(sid).set()


async def until(predicate, timeout: float = 10.0) -> None:
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.002)


def one_call_at_a_time(db):
    from openmaic.events.group_commit import group_commit

    gc = group_commit(db)
    gc.max_calls = 1
    return gc


def sender(log: EventLog, outcomes: dict[str, object]):
    """``send(key, sid, n=None, **fences)``: a task that appends to ``sid`` and records the result, or the error,
    under ``key``; one event with text ``key``, or ``n`` events with texts ``key.0`` … ``key.{n-1}``."""

    def send(key: str, sid: str, n: int | None = None, **fences):
        texts = [key] if n is None else [f"{key}.{i}" for i in range(n)]

        async def run() -> None:
            try:
                outcomes[key] = await log.append_one(sid, [SessionMessagePosted(text=t) for t in texts], **fences)
            except errors.OpenMaicError as exc:
                outcomes[key] = exc

        return run

    return send


async def queue_in_order(gc, nursery: trio.Nursery, sends) -> None:
    """Start each send once the previous one is queued, so queue order is the order given."""
    for send in sends:
        before = gc.statistics()["queued"]
        nursery.start_soon(send)
        await until(lambda: gc.statistics()["queued"] == before + 1)


async def test_appenders_started_together_with_nothing_in_flight_share_a_call(db):
    # Nothing is in flight or queued when the first of them runs, but the others are runnable: it waits the one
    # scheduling round, and they join its call (a first append that skipped the round would go alone, and the
    # others in a second call).
    from openmaic.events.group_commit import group_commit

    log = EventLog(db)
    gc = group_commit(db)
    sids = [f"t{i}" for i in range(8)]
    for sid in sids:
        await create(log, sid)
    await until(lambda: gc.statistics()["in_flight"] == 0 and gc.statistics()["queued"] == 0)
    calls = gc.statistics()["calls"]
    async with trio.open_nursery() as nursery:
        for sid in sids:
            nursery.start_soon(log.append_one, sid, [SessionMessagePosted(text=sid)])
    assert gc.statistics()["calls"] - calls == 1, "eight appenders started in one round did not share one call"
    assert [(await log.stream_row(s)).head_seq for s in sids] == [2] * 8


async def test_group_commit_a_failed_request_fails_alone(db):
    log = EventLog(db)
    gc = one_call_at_a_time(db)
    for sid in ("blocker", "a", "b", "c"):
        await create(log, sid)
    await db.execute("UPDATE streams SET attempt = 2 WHERE id = 'b'")
    outcomes: dict[str, object] = {}
    send = sender(log, outcomes)

    async with trio.open_nursery() as nursery:
        held = Held(db, nursery)
        await held.hold("blocker")
        nursery.start_soon(send("first", "blocker"))
        await until(lambda: gc.statistics()["in_flight"] == 1)
        await queue_in_order(gc, nursery, [
            send("a1", "a"),
            send("b-stale", "b", attempt=1),
            send("c-wrong-seq", "c", expected_seq=5),
            send("a2", "a", expected_seq=2),  # sees a1: requests of one group are applied in order
            send("missing", "nope"),
        ])
        calls = gc.statistics()["calls"]
        held.release("blocker")
    assert gc.statistics()["calls"] == calls + 1, "the five queued requests should have shared one call"
    assert (outcomes["a1"].first_seq, outcomes["a2"].first_seq) == (2, 3)
    assert isinstance(outcomes["b-stale"], errors.StaleAttempt)
    assert isinstance(outcomes["c-wrong-seq"], errors.WrongExpectedSeq)
    assert isinstance(outcomes["missing"], errors.StreamNotFound)
    assert "nope" in str(outcomes["missing"])
    assert [(await log.stream_row(s)).head_seq for s in ("a", "b", "c")] == [3, 1, 1]
    a_events = await log.read_stream("a")
    assert [log.decode(e).text for e in a_events[1:]] == ["a1", "a2"]
    assert a_events[1].tx == a_events[2].tx, "one group, one transaction"
    assert verify_chain(await chain_of(log, "a")) == (await log.stream_row("a")).head_hash


async def test_a_group_of_plain_requests_is_one_statement_and_a_refused_one_gets_its_own_error(db):
    # Each request one existing stream, no command id, no two to one stream: the group goes as append_many, and
    # the requests it refuses (a fence, a missing stream) are decided alone after it, with their own errors.
    log = EventLog(db)
    gc = one_call_at_a_time(db)
    for sid in ("blocker", "a", "b", "c", "d"):
        await create(log, sid)
    await db.execute("UPDATE streams SET attempt = 2 WHERE id = 'b'")
    await log.append_one("d", [SessionMessagePosted(text="d0")])
    statements: list[str] = []
    fetch, fetchrow = db.fetch, db.fetchrow

    async def spy_fetch(sql, *args):
        statements.append(sql)
        return await fetch(sql, *args)

    async def spy_fetchrow(sql, *args):
        statements.append(sql)
        return await fetchrow(sql, *args)

    db.fetch, db.fetchrow = spy_fetch, spy_fetchrow
    outcomes: dict[str, object] = {}
    send = sender(log, outcomes)

    try:
        async with trio.open_nursery() as nursery:
            held = Held(db, nursery)
            await held.hold("blocker")
            nursery.start_soon(send("first", "blocker"))
            await until(lambda: gc.statistics()["in_flight"] == 1)
            await queue_in_order(gc, nursery, [
                send("a", "a", n=3),
                send("b-stale", "b", attempt=1),
                send("c-wrong-seq", "c", expected_seq=5),
                send("missing", "nope"),
                send("d", "d", n=2, expected_seq=2),
            ])
            held.release("blocker")
    finally:
        del db.fetch, db.fetchrow
    assert Q.append_many in statements, "the plain group did not go as one append_many statement"
    # The blocker's lone append_one, the group, and one openmaic_append for each refused request (append_one
    # would only refuse it again).
    assert (statements.count(Q.append_one), statements.count(Q.append)) == (1, 3), statements
    assert (outcomes["a"].first_seq, outcomes["a"].last_seq) == (2, 4)
    assert (outcomes["d"].first_seq, outcomes["d"].last_seq) == (3, 4)
    assert isinstance(outcomes["b-stale"], errors.StaleAttempt)
    assert isinstance(outcomes["c-wrong-seq"], errors.WrongExpectedSeq)
    assert isinstance(outcomes["missing"], errors.StreamNotFound)
    assert [(await log.stream_row(s)).head_seq for s in ("a", "b", "c", "d")] == [4, 1, 1, 4]
    a_events, d_events = await log.read_stream("a"), await log.read_stream("d")
    assert [log.decode(e).text for e in a_events[1:]] == ["a.0", "a.1", "a.2"]
    assert [log.decode(e).text for e in d_events[2:]] == ["d.0", "d.1"]
    assert len({e.tx for e in a_events[1:] + d_events[2:]}) == 1, "one group, one transaction"
    assert [e.position for e in a_events[1:] + d_events[2:]] == sorted(e.position for e in a_events[1:] + d_events[2:])
    for sid in ("a", "d"):
        assert verify_chain(await chain_of(log, sid)) == (await log.stream_row(sid)).head_hash
    assert {e.attempt for e in a_events[1:]} == {None}


async def test_many_streams_appended_concurrently_keep_gap_free_seqs_and_whole_chains(db):
    # Thirty-two writers, each its own stream, batches of one to three events: their appends share group calls
    # (append_many); every stream's seqs are gap-free, each append got its own contiguous range, every chain holds.
    log = EventLog(db)
    sids = [f"m{i}" for i in range(32)]
    for sid in sids:
        await create(log, sid)
    results: dict[str, list] = {sid: [] for sid in sids}

    async def appender(sid: str) -> None:
        for j in range(8):
            n = random.randint(1, 3)
            results[sid].append(await log.append_one(
                sid, [SessionMessagePosted(text=f"{sid}/{j}/{k}") for k in range(n)], attempt=0 if j % 2 else None))

    from openmaic.events.group_commit import group_commit

    gc = group_commit(db)
    calls, requests = gc.calls, gc.requests
    async with trio.open_nursery() as nursery:
        for sid in sids:
            nursery.start_soon(appender, sid)
    assert (gc.requests - requests) / (gc.calls - calls) > 2, "the writers' appends did not share calls"
    for sid in sids:
        events = await log.read_stream(sid, limit=10_000)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        ranges = [(r.first_seq, r.last_seq) for r in results[sid]]
        assert ranges[0][0] == 2 and all(c == b + 1 for (_, b), (c, _) in zip(ranges, ranges[1:]))
        assert ranges[-1][1] == len(events)
        assert [log.decode(e).text for e in events[1:]] == [
            f"{sid}/{j}/{k}" for j, r in enumerate(results[sid]) for k in range(r.last_seq - r.first_seq + 1)]
        assert verify_chain(await chain_of(log, sid)) == (await log.stream_row(sid)).head_hash


async def test_two_processes_grouping_the_same_streams_never_deadlock(db, db_url, caplog):
    # Two pools, as two processes, each with a group of appends to the same sixteen streams, queued in opposite
    # orders. A held lock on a middle stream stops both groups half-way through taking their row locks; released,
    # the groups must not each hold what the other waits for. They do not, because append_many locks in id order
    # whatever the request order (in request order this is a deadlock: one group is its victim, fails as a whole
    # and is sent one by one).
    sids = [f"x{i:02d}" for i in range(16)]
    for sid in ("pa", "pb", *sids):
        await create(EventLog(db), sid)

    async def lock_waits() -> int:
        # Only the two groups wait on a lock here (the holders wait on their client).
        return await db.fetchval("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")

    with caplog.at_level("WARNING", logger="openmaic.events.group_commit"):
        async with open_database(db_url, min_size=1, max_size=8) as db2, trio.open_nursery() as nursery:
            held = Held(db, nursery)
            for sid in ("x08", "pa", "pb"):
                await held.hold(sid)
            for that_db, first, order in ((db, "pa", sids), (db2, "pb", sids[::-1])):
                # One call at a time, in flight on a held stream: the sixteen queue behind it in this order.
                gc = one_call_at_a_time(that_db)
                send = sender(EventLog(that_db), {})
                nursery.start_soon(send(first, first))
                await until(lambda: gc.statistics()["in_flight"] == 1)
                await queue_in_order(gc, nursery, [send(f"{sid}@{first}", sid) for sid in order])
            held.release("pa")
            held.release("pb")
            with trio.fail_after(10):
                while await lock_waits() < 2:  # both groups wait, each holding the rows it locked before x08
                    await trio.sleep(0.01)
            held.release("x08")
    assert not [r for r in caplog.records if "failed as a whole" in r.getMessage()], "a group failed as a whole"
    log = EventLog(db)
    for sid in sids:
        events = await log.read_stream(sid)
        assert [e.seq for e in events] == [1, 2, 3]
        assert verify_chain(await chain_of(log, sid)) == (await log.stream_row(sid)).head_hash


async def test_group_commit_applies_one_stream_s_requests_in_call_order(db):
    log = EventLog(db)
    gc = one_call_at_a_time(db)
    await create(log, "blocker")
    await create(log, "s")
    got: dict[int, int] = {}

    def send(i: int):
        async def run() -> None:
            got[i] = (await log.append_one("s", [SessionMessagePosted(text=f"m{i}")] * (1 + i % 3))).first_seq

        return run

    async with trio.open_nursery() as nursery:
        held = Held(db, nursery)
        await held.hold("blocker")
        nursery.start_soon(log.append_one, "blocker", [SessionMessagePosted(text="first")])
        await until(lambda: gc.statistics()["in_flight"] == 1)
        await queue_in_order(gc, nursery, [send(i) for i in range(12)])
        calls = gc.statistics()["calls"]
        held.release("blocker")
    assert gc.statistics()["calls"] == calls + 1
    assert [got[i] for i in range(12)] == sorted(got.values()), "seqs follow the order of the calls"
    texts = [log.decode(e).text for e in (await log.read_stream("s"))[1:]]
    assert texts == [f"m{i}" for i in range(12) for _ in range(1 + i % 3)]
    assert verify_chain(await chain_of(log, "s")) == (await log.stream_row("s")).head_hash


async def test_group_commit_replays_commands_inside_a_group(db):
    log = EventLog(db)
    gc = one_call_at_a_time(db)
    await create(log, "blocker")
    await create(log, "s")
    original = await log.append_one("s", [SessionMessagePosted(text="c1"), SessionMessagePosted(text="c1+")],
                                    command_id="c1")
    outcomes: dict[str, object] = {}

    def send(key: str, events, **kw):
        async def run() -> None:
            try:
                outcomes[key] = await log.append_one("s", events, **kw)
            except errors.OpenMaicError as exc:
                outcomes[key] = exc

        return run

    async with trio.open_nursery() as nursery:
        held = Held(db, nursery)
        await held.hold("blocker")
        nursery.start_soon(log.append_one, "blocker", [SessionMessagePosted(text="first")])
        await until(lambda: gc.statistics()["in_flight"] == 1)
        await queue_in_order(gc, nursery, [
            send("replay-c1", [SessionMessagePosted(text="c1")], command_id="c1"),
            send("c2", [SessionMessagePosted(text="c2")], command_id="c2"),
            send("replay-c2", [SessionMessagePosted(text="c2")], command_id="c2"),  # written earlier in this group
            send("conflict-c1", [SessionEnded(status="cancelled")], command_id="c1"),
            send("plain", [SessionMessagePosted(text="plain")]),
        ])
        calls = gc.statistics()["calls"]
        held.release("blocker")
    assert gc.statistics()["calls"] == calls + 1
    r = outcomes["replay-c1"]
    assert (r.first_seq, r.last_seq, r.replayed) == (original.first_seq, original.last_seq, True)
    assert (outcomes["c2"].first_seq, outcomes["c2"].replayed) == (4, False)
    assert (outcomes["replay-c2"].first_seq, outcomes["replay-c2"].last_seq, outcomes["replay-c2"].replayed) == (4, 4, True)
    assert isinstance(outcomes["conflict-c1"], errors.CommandConflict)
    assert (outcomes["plain"].first_seq, outcomes["plain"].replayed) == (5, False)
    assert [log.decode(e).text for e in (await log.read_stream("s"))[1:]] == ["c1", "c1+", "c2", "plain"]
    # Replayed after the group committed: c2's own seqs, not those of "plain", which shared its transaction.
    again = await log.append_one("s", [SessionMessagePosted(text="c2")], command_id="c2")
    assert (again.first_seq, again.last_seq, again.replayed) == (4, 4, True)


async def test_group_commit_a_cancelled_queued_request_is_never_sent(db):
    log = EventLog(db)
    gc = one_call_at_a_time(db)
    await create(log, "blocker")
    await create(log, "s")
    scope = trio.CancelScope()
    returned: list[object] = []

    async def doomed() -> None:
        with scope:
            returned.append(await log.append_one("s", [SessionMessagePosted(text="cancelled")]))

    async def kept() -> None:
        returned.append(await log.append_one("s", [SessionMessagePosted(text="kept")]))

    async with trio.open_nursery() as nursery:
        held = Held(db, nursery)
        await held.hold("blocker")
        nursery.start_soon(log.append_one, "blocker", [SessionMessagePosted(text="first")])
        await until(lambda: gc.statistics()["in_flight"] == 1)
        await queue_in_order(gc, nursery, [doomed, kept])
        scope.cancel()
        await until(lambda: gc.statistics()["queued"] == 1)
        assert scope.cancelled_caught and not returned, "a queued request's caller is released at once"
        held.release("blocker")
    assert [r.first_seq for r in returned] == [2]
    assert [log.decode(e).text for e in (await log.read_stream("s"))[1:]] == ["kept"]


async def test_group_commit_a_cancelled_caller_in_flight_gets_the_outcome(db):
    """Its request shares a call with another caller's: the call goes on and the cancelled caller learns how it
    ended. Once every caller of a call is cancelled, the call itself is cancelled (and here, blocked on a lock,
    writes nothing)."""
    log = EventLog(db)
    gc = one_call_at_a_time(db)
    for sid in ("blocker1", "blocker2", "blocker3", "s", "t"):
        await create(log, sid)
    scopes = {k: trio.CancelScope() for k in ("a", "b", "c", "d")}
    returned: dict[str, object] = {}

    def send(key: str, sid: str):
        async def run() -> None:
            with scopes[key]:
                returned[key] = await log.append_one(sid, [SessionMessagePosted(text=key)])

        return run

    async with trio.open_nursery() as nursery:
        held = Held(db, nursery)
        for sid in ("blocker1", "blocker2", "blocker3"):
            await held.hold(sid)
        # a call in flight, stuck on blocker1; behind it, a and b queue, then c and d
        nursery.start_soon(log.append_one, "blocker1", [SessionMessagePosted(text="first")])
        await until(lambda: gc.statistics()["in_flight"] == 1)
        await queue_in_order(gc, nursery, [send("a", "blocker2"), send("b", "s")])
        held.release("blocker1")
        # a and b now share a call, stuck on blocker2's lock
        await until(lambda: gc.statistics()["in_flight"] == 1 and gc.statistics()["queued"] == 0)
        await queue_in_order(gc, nursery, [send("c", "blocker3"), send("d", "t")])
        scopes["a"].cancel()
        await trio.sleep(0.2)
        assert "a" not in returned, "a cancelled caller waits for the call its request is in"
        held.release("blocker2")
        await until(lambda: "a" in returned and "b" in returned)
        assert not scopes["a"].cancelled_caught, "the outcome was known: the append returned it"
        # c and d share the next call, stuck on blocker3; cancelling both cancels the call
        await until(lambda: gc.statistics()["in_flight"] == 1 and gc.statistics()["queued"] == 0)
        scopes["c"].cancel()
        scopes["d"].cancel()
        with trio.fail_after(5):
            while not (scopes["c"].cancelled_caught and scopes["d"].cancelled_caught):
                await trio.sleep(0.01)
        held.release("blocker3")
    assert returned.keys() == {"a", "b"}
    assert [log.decode(e).text for e in (await log.read_stream("blocker2"))[1:]] == ["a"]
    assert [log.decode(e).text for e in (await log.read_stream("s"))[1:]] == ["b"]
    assert len(await log.read_stream("blocker3")) == 1
    assert len(await log.read_stream("t")) == 1
    assert db.statistics()["size"] - db.statistics()["idle"] == 0, "no pooled connection leaked"


async def test_group_commit_an_append_from_a_shielded_cleanup_survives_the_database_closing(db_url):
    """Everything is being cancelled, the database's own tasks (the group commit's workers) too; an append made
    from a shielded cleanup still happens: queued requests go back to their callers, who send them alone."""
    from openmaic.store.database import open_database

    with trio.CancelScope() as everything:
        async with open_database(db_url) as db:
            log = EventLog(db)
            await create(log, "s")  # the workers are running from here on
            everything.cancel()
            with trio.CancelScope(shield=True):
                result = await log.append_one("s", [SessionMessagePosted(text="cleanup")])
            assert result.first_seq == 2
    assert everything.cancelled_caught
    async with open_database(db_url) as db:
        assert [e.seq for e in await EventLog(db).read_stream("s")] == [1, 2]
