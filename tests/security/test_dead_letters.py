"""A projection fed an event it cannot apply records it as a dead letter and goes on, live and in a rebuild.

Before, one such event (PostgreSQL refusing the row, or the projection's own code raising on it) failed its batch
on every retry: the read model stopped for every owner and ``projections rebuild`` failed the same way."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import msgspec
import trio

from openmaic import metrics
from openmaic.courses.events import CourseCreated
from openmaic.events.core import SessionCreated, SessionMessagePosted
from openmaic.events.log import EventLog, NewStream, RecordedEvent, StreamAppend
from openmaic.events.wakeups import Wakeups
from openmaic.projections import Applier, Context, Projection, rebuild, run_projectors
from openmaic.projections.base import live_tables, lock_key
from openmaic.store.database import Op
from openmaic.store.queries import Q
from tests.runtime import wait_for


class _Title(msgspec.Struct):
    title: str = ""


class Picky(Projection):
    """Course titles, in a table that refuses the title ``poison`` (a CHECK: PostgreSQL's 23514), from code that
    raises on the title ``crash``."""

    name = "test_picky"
    tables = {
        "test_picky": (
            """CREATE TABLE {test_picky} (
    stream_id text PRIMARY KEY,
    title     text NOT NULL CHECK (title <> 'poison'),
    applied   integer NOT NULL
)""",
        ),
    }
    types = frozenset({"course.created"})

    async def apply(self, ctx: Context, events: Sequence[RecordedEvent]) -> list[Op]:
        titles = [msgspec.json.decode(e.data, type=_Title).title for e in events]
        if "crash" in titles:
            raise ValueError("this projection cannot fold a course called crash")
        return [ctx.op(
            "INSERT INTO {test_picky} AS p (stream_id, title, applied) "
            "SELECT s, t, 1 FROM unnest($1::text[], $2::text[]) AS u(s, t) "
            "ON CONFLICT (stream_id) DO UPDATE SET applied = p.applied + 1",
            [e.stream_id for e in events], titles,
        )]


BAD = {"course-07": "poison", "course-22": "crash"}


async def seed(log: EventLog, n: int = 30) -> None:
    for i in range(n):
        sid = f"course-{i:02d}"
        await log.append(StreamAppend(stream_id=sid, events=[CourseCreated(title=BAD.get(sid, f"Course {i}"))],
                                      create=NewStream("course", "alice")))


async def picky_rows(db) -> dict[str, int]:
    return {r["stream_id"]: r["applied"] for r in await db.fetch("SELECT stream_id, applied FROM test_picky")}


async def dead_letters(db) -> dict[str, tuple]:
    rows = await db.fetch("SELECT stream_id, seq, type, sqlstate, error, failures FROM projection_dead_letters "
                          "WHERE projection = 'test_picky'")
    return {r["stream_id"]: (r["seq"], r["type"], r["sqlstate"], r["error"], r["failures"]) for r in rows}


def dead(projection: str = "test_picky") -> float:
    return metrics.sample("openmaic_projection_dead_letters_total", projection=projection)


async def test_a_batch_with_bad_events_is_bisected_and_they_are_dead_letters(db, caplog):
    log = EventLog(db)
    await seed(log)
    picky = Picky()
    applier = Applier(db, log, picky, checkpoint=picky.name, tables=live_tables(picky),
                      pause_key=lock_key("apply", picky.name), batch_size=8)
    await db.transaction([(stmt, ()) for stmt in picky.ddl(live_tables(picky))])
    before = dead()
    with caplog.at_level(logging.ERROR, logger="openmaic.projections.projector"):
        assert await applier.catch_up() == 30
    # Every good event applied once, the two bad ones recorded (once each) and skipped.
    good = {f"course-{i:02d}" for i in range(30)} - set(BAD)
    assert await picky_rows(db) == dict.fromkeys(good, 1)
    letters = await dead_letters(db)
    assert set(letters) == set(BAD)
    assert letters["course-07"][:3] == (1, "course.created", "23514")
    assert letters["course-22"][2] is None and "cannot fold a course called crash" in letters["course-22"][3]
    assert all(v[4] == 1 for v in letters.values())
    assert dead() - before == 2
    logged = [r.getMessage() for r in caplog.records if "projection_dead_letters" in r.getMessage()]
    assert len(logged) == 2 and any("course-07#1" in m for m in logged), logged
    assert await db.fetchval("SELECT events_applied FROM projection_checkpoints WHERE name = 'test_picky'") == 30

    # A rebuild gets past them too (and counts each failure again).
    result = await rebuild(db, log, picky, batch_size=8)
    assert result.events == 30
    assert await picky_rows(db) == dict.fromkeys(good, 1)
    assert {k: v[4] for k, v in (await dead_letters(db)).items()} == dict.fromkeys(BAD, 2)
    assert dead() - before == 4


async def test_the_live_projector_moves_past_a_bad_event_and_keeps_applying(db):
    wakeups = Wakeups()
    log = EventLog(db, wakeups)
    picky = Picky()
    await db.transaction([(stmt, ()) for stmt in picky.ddl(live_tables(picky))])
    await seed(log)
    async with trio.open_nursery() as nursery:
        await nursery.start(wakeups.run, db)
        await nursery.start(lambda task_status: run_projectors(
            db, log, wakeups, [picky], lock_retry_s=0.05, poll_s=0.05, task_status=task_status))

        async def caught_up() -> bool:
            return len(await picky_rows(db)) == 28

        await wait_for(caught_up)
        await log.append(StreamAppend(stream_id="course-late", events=[CourseCreated(title="Late")],
                                      create=NewStream("course", "alice")))

        async def late() -> bool:
            return "course-late" in await picky_rows(db)

        await wait_for(late)
        nursery.cancel_scope.cancel()
    assert set(await dead_letters(db)) == set(BAD)


class Messages(Projection):
    """Every session.created and session.message_posted, one row each, in a table that refuses the text ``poison``."""

    name = "test_messages"
    tables = {
        "test_messages": (
            """CREATE TABLE {test_messages} (
    stream_id text NOT NULL,
    seq       bigint NOT NULL,
    text      text NOT NULL CHECK (text <> 'poison'),
    PRIMARY KEY (stream_id, seq)
)""",
        ),
    }
    types = frozenset({"session.created", "session.message_posted"})

    async def apply(self, ctx: Context, events: Sequence[RecordedEvent]) -> list[Op]:
        texts = [msgspec.json.decode(e.data, type=_Text).text or "created" for e in events]
        return [ctx.op(
            "INSERT INTO {test_messages} (stream_id, seq, text) SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[])",
            [e.stream_id for e in events], [e.seq for e in events], texts,
        )]


class _Text(msgspec.Struct):
    text: str = ""


async def _older_transaction_writes_the_last_seq(db, log: EventLog, sid: str, older: str, *younger: str) -> None:
    """The stream's last seq (``older``) written by a transaction older than those that wrote the seqs before it
    (``younger``, one transaction each): the log's (epoch, tx, position) order then has the last one first."""
    async with db.connection() as conn, conn.transaction():
        await conn.fetchval("SELECT pg_current_xact_id()")  # its transaction id is taken now, before the younger ones'
        for text in younger:
            await log.append(StreamAppend(stream_id=sid, events=[SessionMessagePosted(text=text)]))
        await conn.fetch(Q.append, *log.append_args([StreamAppend(stream_id=sid,
                                                                  events=[SessionMessagePosted(text=older)])]))


async def _project_messages(db, log: EventLog, batch_sizes: Sequence[int], events: int,
                            rows: list[tuple[int, str]], letters: list[int]) -> None:
    messages = Messages()
    await db.transaction([(stmt, ()) for stmt in messages.ddl(live_tables(messages))])
    for batch_size in batch_sizes:
        for table in ("test_messages", "projection_dead_letters"):
            await db.execute(f"DELETE FROM {table}")
        await db.execute("DELETE FROM projection_checkpoints WHERE name = 'test_messages'")
        await db.execute("DELETE FROM projection_early WHERE name = 'test_messages'")
        applier = Applier(db, log, messages, checkpoint=messages.name, tables=live_tables(messages),
                          pause_key=lock_key("apply", messages.name), batch_size=batch_size)
        assert await applier.catch_up() == events
        found = await db.fetch("SELECT seq, text FROM test_messages ORDER BY seq")
        assert [(r["seq"], r["text"]) for r in found] == rows, batch_size
        dead_rows = await db.fetch("SELECT stream_id, seq, sqlstate FROM projection_dead_letters ORDER BY seq")
        assert [tuple(r) for r in dead_rows] == [("s", seq, "23514") for seq in letters], batch_size
    # And a rebuild gives the same read model.
    await rebuild(db, log, messages, batch_size=2)
    found = await db.fetch("SELECT seq, text FROM test_messages ORDER BY seq")
    assert [(r["seq"], r["text"]) for r in found] == rows


async def test_a_dead_letter_goes_alone_and_its_pulled_forward_predecessors_are_applied(db):
    log = EventLog(db)
    await log.append(StreamAppend(stream_id="s", events=[SessionCreated(kind="t", owner_id="o")],
                                  create=NewStream("t", "o")))
    await _older_transaction_writes_the_last_seq(db, log, "s", "poison", "good")
    assert [e.seq for e in await log.read_all()] == [1, 3, 2]
    await _project_messages(db, log, (500, 2, 1), 3, rows=[(1, "created"), (2, "good")], letters=[3])


async def test_a_predecessor_that_fails_too_is_a_dead_letter_of_its_own(db):
    log = EventLog(db)
    await log.append(StreamAppend(stream_id="s", events=[SessionCreated(kind="t", owner_id="o")],
                                  create=NewStream("t", "o")))
    await _older_transaction_writes_the_last_seq(db, log, "s", "poison", "poison", "good")
    assert [e.seq for e in await log.read_all()] == [1, 4, 2, 3]
    await _project_messages(db, log, (500, 3, 1), 4, rows=[(1, "created"), (3, "good")], letters=[2, 4])
