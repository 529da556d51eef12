"""Projections against a real PostgreSQL: exactly-once under crashes and racing commits, per-stream order,
rebuild equal to live, one live projector per projection, the read models' content, and the CLI."""

from __future__ import annotations

import functools
import importlib
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
import trio

from benchmarks.workload import generation, scenarios, workbench
from openmaic.courses.events import CourseCreated, CourseDocument, CourseRetitled, CourseUnlocked, evolve_course
from openmaic.events.core import SessionCreated, SessionMessagePosted
from openmaic.events.log import START, EventLog, NewStream, StreamAppend
from openmaic.events.wakeups import Wakeups
from openmaic.runs.events import RunStopRequested
from openmaic.projections import (
    Applier,
    CourseDocuments,
    HistoryMessage,
    LibraryCards,
    ModelHistory,
    Projector,
    SessionList,
    default_projections,
    projection_status,
    rebuild,
    run_projectors,
)
from openmaic.projections.base import CheckpointMoved, Tables, live_tables, lock_key
from openmaic.projections.shared_reads import SharedReads
from openmaic.store.queries import Q
from tests.integration.projection_helpers import (
    Counting,
    events_in_log,
    play,
    play_all,
    snapshot,
    wait_caught_up,
)
from tests.runtime import wait_for

ROOT = Path(__file__).resolve().parents[2]
#: The module (the package's ``rebuild`` is its function).
rebuild_module = importlib.import_module("openmaic.projections.rebuild")
DEFAULT_NAMES = [p.name for p in default_projections()]

#: Events whose stream's next seq sorts before them in (epoch, tx, position) order.
INVERSIONS = """
SELECT count(*) FROM events a JOIN events b ON b.stream_id = a.stream_id AND b.seq = a.seq + 1
 WHERE (b.epoch, b.tx, b.position) < (a.epoch, a.tx, a.position)"""


def applier(db, log, projection, batch_size=500) -> Applier:
    return Applier(db, log, projection, checkpoint=projection.name, tables=live_tables(projection),
                   pause_key=lock_key("apply", projection.name), batch_size=batch_size)


async def counting_is_exact(db) -> None:
    """Every event of the log was applied exactly once, each stream in seq order."""
    rows = await db.fetch("SELECT stream_id, seq, applied, in_order FROM test_counting")
    assert len(rows) == await events_in_log(db)
    assert [tuple(r) for r in rows if r["applied"] != 1] == [], "an event was applied twice"
    assert [tuple(r) for r in rows if not r["in_order"]] == [], "a stream's events arrived out of seq order"
    missing = await db.fetchval(
        "SELECT count(*) FROM events e WHERE NOT EXISTS "
        "(SELECT 1 FROM test_counting c WHERE c.stream_id = e.stream_id AND c.seq = e.seq)")
    assert missing == 0, "an event was skipped"


async def documents_match_replay(db, log) -> None:
    """course_documents holds, for every course stream, the fold of its events with evolve_course."""
    rows = {r["course_id"]: r for r in await db.fetch("SELECT course_id, document::text AS d, seq FROM course_documents")}
    courses = [r["id"] for r in await db.fetch("SELECT id FROM streams WHERE kind = 'course'")]
    assert sorted(rows) == sorted(courses)
    for cid in courses:
        doc = CourseDocument()
        for e in await log.read_stream(cid, limit=100_000):
            doc = evolve_course(doc, log.decode(e), e.seq)
        assert msgspec.json.decode(rows[cid]["d"], type=CourseDocument) == doc
        assert rows[cid]["seq"] == doc.seq


async def test_migrated_tables_are_the_templates(db):
    """The live tables from the migration have exactly the columns and indexes a rebuild creates."""

    async def shape(table: str) -> tuple[list[tuple], list[str]]:
        cols = await db.fetch(
            "SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns "
            "WHERE table_name = $1 ORDER BY ordinal_position", table)
        idx = await db.fetch("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = $1 ORDER BY 1", table)
        return [tuple(c) for c in cols], sorted(r["indexdef"].replace(table, "T") for r in idx)

    for p in default_projections():
        scratch = Tables({t: f"{t}__shape" for t in p.tables})
        await db.transaction([(s, ()) for s in p.ddl(scratch)])
        for t in p.tables:
            assert await shape(t) == await shape(scratch[t]), t


async def test_read_models_content(db):
    log = EventLog(db)
    rng = random.Random(7)
    await play(log, generation(rng, "run-ok", "course-ok", "alice", scenes=3))
    await play(log, generation(rng, "run-paused", "course-paused", "alice", scenes=3, fail_at=1))
    await play(log, generation(rng, "run-deleted", "course-deleted", "bob", scenes=3, delete_at=1))
    # a run stopped half way through its scenes: 2 of 5 ready
    steps = list(generation(rng, "run-mid", "course-mid", "bob", scenes=5))
    await play(log, iter(steps[: 9 + 2 * 3]))
    await play(log, iter(list(generation(rng, "run-wait", "course-wait", "bob", scenes=4))[:7]))
    await play(log, workbench(rng, "wb-1", "wbc-1", "alice", turns=2, interrupt_at=1))
    await play(log, workbench(rng, "wb-2", "wbc-2", "bob", turns=1, end="cancelled"))
    for p in default_projections():
        await applier(db, log, p, batch_size=7).catch_up()

    cards = {r["course_id"]: r for r in await db.fetch("SELECT * FROM library_cards")}
    assert "course-deleted" not in cards
    assert (cards["course-ok"]["label"], cards["course-ok"]["scenes_completed"], cards["course-ok"]["scenes_total"]) \
        == ("ready", 3, 3)
    assert cards["course-paused"]["label"] == "paused after a failure"
    assert cards["course-mid"]["label"] == "generating 2/5"
    assert cards["course-wait"]["label"] == "waiting for confirmation"
    assert cards["course-ok"]["owner_id"] == "alice" and cards["course-ok"]["run_id"] == "run-ok"
    assert cards["wbc-1"]["label"] == "ready" and cards["wbc-1"]["run_id"] is None

    await documents_match_replay(db, log)

    history = [(r["role"], msgspec.json.decode(r["message"], type=HistoryMessage)) for r in await db.fetch(
        "SELECT role, message::text AS message FROM model_history WHERE session_id = 'wb-1' ORDER BY idx")]
    roles = [r for r, _ in history]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"]
    assert history[0][1].message_seq == 2 and history[0][1].text.startswith("Make a course about")
    assert history[1][1].tool_calls and history[1][1].tool_calls[0]["id"] == "call-0"
    assert history[2][1].ok and not history[2][1].interrupted
    assert history[6][1].interrupted and history[6][1].call_id == "call-1"
    assert await db.fetchval("SELECT count(*) FROM model_history_pending") == 0

    sessions = {r["session_id"]: r for r in await db.fetch("SELECT * FROM session_list")}
    assert (sessions["wb-1"]["kind"], sessions["wb-1"]["status"], sessions["wb-1"]["course_id"]) \
        == ("workbench", "idle", "wbc-1")
    assert sessions["wb-1"]["title"].startswith("Make a course about")
    assert sessions["wb-2"]["status"] == "cancelled"
    assert (sessions["run-ok"]["kind"], sessions["run-ok"]["status"]) == ("generation", "completed")
    assert sessions["run-deleted"]["status"] == "ended"
    assert {r["session_id"] for r in await db.fetch("SELECT session_id FROM session_list WHERE owner_id = 'bob'")} \
        == {"run-deleted", "run-mid", "run-wait", "wb-2"}


async def test_commits_out_of_seq_order_within_a_stream_are_delivered_in_seq_order(db):
    """An older transaction appends seq 3 after a younger one committed seq 2: (tx, position) order puts 3 first.

    Every batch size and a projector restarted after every batch (nothing in memory: the probe path) deliver
    2 before 3, each once, and the course document ends with the later title.
    """
    log = EventLog(db)
    await log.append(StreamAppend(stream_id="c", events=[CourseCreated(title="first")], create=NewStream("course", "o")))
    await log.append(StreamAppend(stream_id="a", events=[SessionCreated(kind="t", owner_id="o")],
                                  create=NewStream("t", "o")))
    for round_ in range(3):
        async with db.connection() as conn, conn.transaction():
            # the older transaction takes its id here ...
            await conn.fetch(Q.append, *log.append_args([StreamAppend(stream_id="a", events=[
                SessionMessagePosted(text=str(round_))])]))
            # ... a younger one appends to c and commits ...
            await log.append_one("c", [CourseRetitled(title=f"younger {round_}")])
            # ... and the older one appends the next seq of c.
            await conn.fetch(Q.append, *log.append_args([StreamAppend(stream_id="c", events=[
                CourseRetitled(title=f"older {round_}")])]))
    order = [(e.stream_id, e.seq) for e in await log.read_all() if e.stream_id == "c"]
    assert order != sorted(order), "the scenario must invert the order"

    for batch_size in (1, 2, 3, 5, 500):
        for restart_each_batch in (False, True):
            await db.execute("DELETE FROM projection_checkpoints WHERE name IN ('test_counting', 'course_documents')")
            await db.execute("DELETE FROM projection_early")
            await db.execute("DROP TABLE IF EXISTS test_counting")
            await db.execute("DELETE FROM course_documents")
            counting, docs = Counting(), CourseDocuments()
            await db.transaction([(s, ()) for s in counting.ddl(live_tables(counting))])
            appliers = [applier(db, log, counting, batch_size), applier(db, log, docs, batch_size)]
            for a in appliers:
                while await a.step():
                    if restart_each_batch:
                        a.cursor = None  # as a fresh process would: reload checkpoint and early set
                        a.order.reset(set())
            await counting_is_exact(db)
            await documents_match_replay(db, log)
            assert await db.fetchval("SELECT count(*) FROM projection_early") == 0
    doc = msgspec.json.decode(await db.fetchval("SELECT document::text FROM course_documents"), type=CourseDocument)
    assert doc.title == "older 2"


async def _workload_with_contention(db, log, *, runs: int, sessions: int, hold_s: float, seed: int,
                                    prefix: str = "") -> None:
    """Scenarios played 8 at a time with transactions held open up to ``hold_s``, and two writers whose
    transactions append to a stream of their own (taking a transaction id), wait, then append to a run or a
    course the scenarios are writing: their seq there commits after younger transactions' seqs, out of
    (tx, position) order."""
    done = trio.Event()

    async def contender(i: int) -> None:
        rng = random.Random(seed * 10 + i)
        own = f"{prefix}noise-{i}"
        await log.append(StreamAppend(stream_id=own, events=[SessionCreated(kind="noise", owner_id="x")],
                                      create=NewStream("noise", "x")))
        n = 0
        while not done.is_set():
            targets = [r["id"] for r in await db.fetch(
                "SELECT id FROM streams WHERE kind IN ('generation', 'course') AND status <> 'terminal' "
                "AND id LIKE $1", prefix + "%")]
            if not targets:
                await trio.sleep(0.01)
                continue
            n += 1
            sid = rng.choice(targets)
            event = RunStopRequested(reason="noise") if "run-" in sid else CourseRetitled(title=f"retitled {i}/{n}")
            async with db.connection() as conn, conn.transaction():
                await conn.fetch(Q.append, *log.append_args([StreamAppend(stream_id=own, events=[
                    SessionMessagePosted(text=str(n))])]))
                await trio.sleep(rng.uniform(0, hold_s))
                await conn.fetch(Q.append, *log.append_args([StreamAppend(stream_id=sid, events=[event])]))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(contender, 0)
        nursery.start_soon(contender, 1)
        await play_all(log, scenarios(seed, runs, sessions, prefix=prefix), concurrency=8, hold_s=hold_s, seed=seed,
                       db=db)
        done.set()


async def test_projector_racing_appenders_misses_nothing(db):
    """Live projectors tail while appenders hold transactions open 0–200 ms and commit out of order."""
    wakeups = Wakeups()
    log = EventLog(db, wakeups)
    async with trio.open_nursery() as nursery:
        await nursery.start(wakeups.run, db)
        found: dict[str, Projector] = {}
        await nursery.start(lambda task_status: run_projectors(
            db, log, wakeups, [Counting(), *default_projections()], lock_retry_s=0.1, poll_s=0.1,
            projectors=found, task_status=task_status))
        await _workload_with_contention(db, log, runs=10, sessions=10, hold_s=0.2, seed=3)
        await wait_caught_up(db, ["test_counting", *DEFAULT_NAMES])
        nursery.cancel_scope.cancel()
    await counting_is_exact(db)
    await documents_match_replay(db, log)
    assert await db.fetchval(INVERSIONS) > 0, "the workload should commit some seqs out of (tx, position) order"
    assert all(p.failures == 0 for p in found.values())


async def test_rebuild_during_appends_equals_live_row_for_row(db):
    """Rebuild every projection while appenders and the live projector run; after the dust settles the live read
    models equal a from-scratch rebuild, row for row. Readers keep the old copy until the swap."""
    wakeups = Wakeups()
    log = EventLog(db, wakeups)
    seen_during_rebuild: list[int] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(wakeups.run, db)
        found: dict[str, Projector] = {}
        await nursery.start(lambda task_status: run_projectors(
            db, log, wakeups, default_projections(), lock_retry_s=0.1, poll_s=0.1, projectors=found,
            task_status=task_status))
        await play_all(log, scenarios(11, 6, 6), concurrency=4)

        async def rebuild_all() -> None:
            for p in default_projections():
                async def check_old_copy(p=p) -> None:
                    # the old copy still serves, beside the new one being built
                    t = next(iter(p.tables))
                    seen_during_rebuild.append(await db.fetchval(f"SELECT count(*) FROM {t}"))
                    assert await db.fetchval("SELECT count(*) FROM pg_tables WHERE tablename LIKE $1",
                                             t.replace("_", r"\_") + r"\_\_rb%") == 1
                await rebuild(db, log, p, batch_size=50, before_swap=check_old_copy)

        async with trio.open_nursery() as inner:
            inner.start_soon(functools.partial(_workload_with_contention, db, log, runs=8, sessions=8, hold_s=0.05, seed=12,
                                               prefix="b-"))
            inner.start_soon(rebuild_all)
        await wait_caught_up(db, DEFAULT_NAMES)
        live = {p.name: await snapshot(db, p) for p in default_projections()}
        nursery.cancel_scope.cancel()

    assert len(seen_during_rebuild) == 4 and all(n > 0 for n in seen_during_rebuild)
    for p in default_projections():
        result = await rebuild(db, log, p)
        assert result.events == await events_in_log(db)
        assert await snapshot(db, p) == live[p.name], p.name
        # indexes follow their tables' names through the swap
        names = {r["indexname"] for r in await db.fetch(
            "SELECT indexname FROM pg_indexes WHERE tablename = ANY($1::text[])", list(p.tables))}
        assert names and all("__rb" not in n for n in names)
    assert await db.fetchval("SELECT count(*) FROM pg_tables WHERE tablename LIKE '%\\_\\_rb%'") == 0
    await documents_match_replay(db, log)


async def test_rebuild_pauses_the_live_projector_and_it_resumes_after_the_swap(db):
    wakeups = Wakeups()
    log = EventLog(db, wakeups)
    await play_all(log, scenarios(5, 3, 3), concurrency=3)
    async with trio.open_nursery() as nursery:
        await nursery.start(wakeups.run, db)
        found: dict[str, Projector] = {}
        await nursery.start(lambda task_status: run_projectors(
            db, log, wakeups, [LibraryCards()], lock_retry_s=0.1, poll_s=0.1, projectors=found,
            task_status=task_status))
        await wait_caught_up(db, ["library_cards"])

        async def append_while_paused() -> None:
            await play(log, generation(random.Random(1), "run-late", "course-late", "carol", scenes=2))

        async with db.connection() as conn:
            # hold the apply lock as a rebuild does while it swaps: the live projector must not write
            assert await conn.fetchval(Q.projection_try_lock, lock_key("apply", "library_cards"))
            before = await db.fetchval("SELECT events_applied FROM projection_checkpoints WHERE name = 'library_cards'")
            await append_while_paused()
            await trio.sleep(0.5)
            assert await db.fetchval(
                "SELECT events_applied FROM projection_checkpoints WHERE name = 'library_cards'") == before
            assert found["library_cards"].pauses > 0
            await conn.fetchval(Q.projection_unlock, lock_key("apply", "library_cards"))
        await wait_caught_up(db, ["library_cards"])
        await rebuild(db, log, LibraryCards(), batch_size=20)
        await play(log, generation(random.Random(2), "run-after", "course-after", "carol", scenes=2))
        await wait_caught_up(db, ["library_cards"])
        assert await db.fetchval("SELECT label FROM library_cards WHERE course_id = 'course-after'") == "ready"
        nursery.cancel_scope.cancel()
    assert found["library_cards"].failures == 0


class HeldAfterReading(Counting):
    """Counting whose batch, once armed with :meth:`hold_next`, waits after reading its tables (before its
    transaction) until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.read = trio.Event()
        self.release = trio.Event()

    def hold_next(self) -> None:
        self.armed = True

    async def apply(self, ctx, events):
        ops = await super().apply(ctx, events)
        if self.armed:
            self.armed = False
            self.read.set()
            await self.release.wait()
        return ops


async def test_a_live_batch_that_read_the_old_tables_before_a_swap_is_refused_by_the_new_checkpoint(db, monkeypatch):
    """A live batch reads the log and the old tables, the rebuild swaps (its checkpoint equal to the batch's
    starting one), then the batch commits: it must not write rows derived from the old tables into the new ones."""
    log = EventLog(db)
    await log.append(StreamAppend(stream_id="s", events=[SessionCreated(kind="t", owner_id="o")],
                                  create=NewStream("t", "o")))
    for i in range(3):
        await log.append_one("s", [SessionMessagePosted(text=str(i))])
    live = HeldAfterReading()
    await db.transaction([(s, ()) for s in live.ddl(live_tables(live))])
    live_applier = applier(db, log, live)
    await live_applier.catch_up()
    # The live read model is damaged, which is why it is rebuilt: a stale batch computes from the damage.
    await db.execute("DELETE FROM test_counting")
    outcomes: list[BaseException | None] = []

    async def live_step() -> None:
        try:
            await live_applier.step()
        except CheckpointMoved as exc:
            outcomes.append(exc)
        else:
            outcomes.append(None)

    real_swap = rebuild_module._swap

    async def swap_after_a_live_read(*args) -> None:
        # The rebuild has caught up under its apply lock; an event lands, and the live projector reads it and the
        # old tables before the swap, but its transaction comes only after the rebuild lets go of the lock.
        await log.append_one("s", [SessionMessagePosted(text="late")])
        live.hold_next()
        nursery.start_soon(live_step)
        await live.read.wait()
        await real_swap(*args)

    monkeypatch.setattr(rebuild_module, "_swap", swap_after_a_live_read)
    async with trio.open_nursery() as nursery:
        await rebuild(db, log, Counting())
        live.release.set()
    assert len(outcomes) == 1 and isinstance(outcomes[0], CheckpointMoved), "the stale batch was applied"
    await live_applier.catch_up()  # from the rebuilt checkpoint, reading the rebuilt tables
    await counting_is_exact(db)


async def test_two_projectors_one_applies_and_the_other_takes_over(db):
    log = EventLog(db)
    await play_all(log, scenarios(21, 4, 4), concurrency=4)
    a_found: dict[str, Projector] = {}
    b_found: dict[str, Projector] = {}
    wakeups = Wakeups()
    async with trio.open_nursery() as nursery:
        a_scope = trio.CancelScope()

        async def run_a(task_status=trio.TASK_STATUS_IGNORED) -> None:
            with a_scope:
                await run_projectors(db, log, wakeups, [Counting()], lock_retry_s=0.1, poll_s=0.1,
                                     projectors=a_found, task_status=task_status)

        await nursery.start(run_a)
        with trio.fail_after(10):
            while not a_found["test_counting"].holding:
                await trio.sleep(0.02)
        await nursery.start(lambda task_status: run_projectors(
            db, log, wakeups, [Counting()], lock_retry_s=0.1, poll_s=0.1, projectors=b_found,
            task_status=task_status))
        await wait_caught_up(db, ["test_counting"])
        await play_all(log, scenarios(22, 2, 2, prefix="x"), concurrency=2)
        await wait_caught_up(db, ["test_counting"])
        status = {s.name: s for s in await projection_status(db, [Counting()])}
        assert status["test_counting"].holder_pid is not None and status["test_counting"].lag_events == 0
        assert not b_found["test_counting"].holding
        assert b_found["test_counting"].applier.events_applied == 0
        a_applied = a_found["test_counting"].applier.events_applied
        assert a_applied == await events_in_log(db)

        a_scope.cancel()  # the first projector goes away; its lock goes with it
        with trio.fail_after(10):
            while not b_found["test_counting"].holding:
                await trio.sleep(0.02)
        await play_all(log, scenarios(23, 2, 2, prefix="y"), concurrency=2)
        await wait_caught_up(db, ["test_counting"])
        assert b_found["test_counting"].applier.events_applied == await events_in_log(db) - a_applied
        nursery.cancel_scope.cancel()
    await counting_is_exact(db)


async def test_killed_projector_applies_no_event_twice_and_skips_none(db, db_url):
    """A projector process is SIGKILLed in the middle of a batch transaction, twice, while appends go on;
    a fresh one finishes the job. Every event is applied exactly once, and the read models equal a rebuild."""
    wakeups = Wakeups()
    log = EventLog(db, wakeups)
    await play_all(log, scenarios(31, 10, 10), concurrency=4)

    def start() -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.integration.projection_helpers", db_url, "25", "0.02"],
            cwd=ROOT, stdout=subprocess.PIPE, text=True)

    async def kill_mid_batch(proc: subprocess.Popen) -> None:
        with trio.fail_after(30):
            while not await db.fetchval(
                    "SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'projector_child' "
                    "AND state = 'active' AND query LIKE '%pg_sleep%'"):
                await trio.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
        await trio.to_thread.run_sync(proc.wait)

    procs = []
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(play_all, log, scenarios(32, 6, 6, prefix="late-"), concurrency=2))
            for i in range(2):
                proc = start()
                procs.append(proc)
                assert (await trio.to_thread.run_sync(proc.stdout.readline)).strip() == "started"
                await trio.sleep(random.uniform(0.2, 0.6))
                if i == 1:
                    # Killed once it has committed a batch or more (however slowly it started), mid-batch again.
                    await wait_for(lambda: _applied_some(db), timeout=30)
                await kill_mid_batch(proc)
        partial = await db.fetchval("SELECT events_applied FROM projection_checkpoints WHERE name = 'test_counting'")
        assert 0 < partial < await events_in_log(db)
        proc = start()
        procs.append(proc)
        await wait_caught_up(db, ["test_counting", *DEFAULT_NAMES], timeout=120)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
    await counting_is_exact(db)
    live = {p.name: await snapshot(db, p) for p in default_projections()}
    for p in default_projections():
        await rebuild(db, log, p)
        assert await snapshot(db, p) == live[p.name], p.name


async def _applied_some(db) -> bool:
    return bool(await db.fetchval("SELECT events_applied FROM projection_checkpoints WHERE name = 'test_counting'"))


class CountingCourses(Counting):
    """Counts course events only: a run's events are not its business."""

    def wants(self, type_: str) -> bool:
        return type_.startswith("course.")


async def _checkpoint(db, name: str) -> tuple[int, int]:
    row = await db.fetchrow("SELECT position, events_applied FROM projection_checkpoints WHERE name = $1", name)
    return row["position"], row["events_applied"]


async def test_a_batch_of_unwanted_events_puts_its_checkpoint_write_off_and_the_next_write_carries_it(db):
    """With ``defer_s`` (the live projector's), a batch of only unwanted events moves the cursor in memory; the
    next batch that writes moves the checkpoint over both through one fence, and a restart from the older
    checkpoint re-reads the unwanted events without writing anything twice."""
    log = EventLog(db)
    p = CountingCourses()
    await db.transaction([(s, ()) for s in p.ddl(live_tables(p))])
    await log.append(StreamAppend(stream_id="s", events=[SessionCreated(kind="chat", owner_id="o")],
                                  create=NewStream("session", "o")))
    a = Applier(db, log, p, checkpoint=p.name, tables=live_tables(p), pause_key=lock_key("apply", p.name),
                defer_s=60.0)
    assert await a.step() == 1
    assert await _checkpoint(db, p.name) == (0, 0) and a.unwritten == 1, "no write for an unwanted event"
    assert await a.step() == 0 and a.unwritten == 1, "nothing new to read, and not yet due"

    # A fresh applier (a restart) starts from the older checkpoint: re-reading the session event writes nothing.
    fresh = Applier(db, log, p, checkpoint=p.name, tables=live_tables(p), pause_key=lock_key("apply", p.name),
                    defer_s=60.0)
    assert await fresh.step() == 1 and fresh.unwritten == 1

    await log.append(StreamAppend(stream_id="c", events=[CourseCreated(title="t")],
                                  create=NewStream("course", "o")))
    await log.append_one("s", [SessionMessagePosted(text="unwanted")])
    assert await a.step() == 2  # the course event and the message: one write, both moves counted
    total = await events_in_log(db)
    position = await db.fetchval("SELECT max(position) FROM events")
    assert await _checkpoint(db, p.name) == (position, total) and a.unwritten == 0
    assert [tuple(r) for r in await db.fetch("SELECT stream_id, seq, applied FROM test_counting")] == [("c", 1, 1)]
    with pytest.raises(CheckpointMoved):
        await fresh.step()  # its fence is the checkpoint it read: the write above moved it

    # Due: the next empty read writes what was put off.
    await log.append_one("s", [SessionMessagePosted(text="unwanted too")])
    a.defer_s = 0.0
    assert await a.step() == 1 and a.unwritten == 1  # the first unwanted batch after a write is always put off
    assert await a.step() == 0 and a.unwritten == 0
    assert await _checkpoint(db, p.name) == (await db.fetchval("SELECT max(position) FROM events"), total + 1)


async def test_projections_woken_together_share_one_read_and_a_later_asker_reads_afresh(db):
    """Projections asking for the same page in the same scheduling round share one read; one that asks after the
    read was sent reads for itself and sees what was appended meanwhile."""
    log = EventLog(db)
    await play(log, generation(random.Random(5), "r", "c", "o", scenes=1))
    reads = SharedReads(log)
    pages: dict[str, list] = {}

    async def ask(name: str) -> None:
        pages[name] = await reads.read_all(START, 500)

    async with trio.open_nursery() as nursery:
        for name in ("documents", "library", "history"):
            nursery.start_soon(ask, name)
    assert reads.statistics() == {"reads": 1, "shared": 2}
    assert pages["documents"] == pages["library"] == pages["history"] == await log.read_all(START, 500)

    await log.append_one("c", [CourseRetitled(title="later")])
    await ask("later")
    assert reads.statistics() == {"reads": 2, "shared": 2}
    assert pages["later"] == await log.read_all(START, 500) and len(pages["later"]) == len(pages["history"]) + 1


async def test_documents_kept_in_memory_are_forgotten_when_another_writer_moved_the_checkpoint(db):
    """The documents projection keeps the documents it committed instead of reading them back; when another
    applier (a process that took the lock over) wrote meanwhile, the fence refuses the stale batch and the reload
    forgets what was kept, so the next batch folds onto the other writer's document."""
    log = EventLog(db)
    docs = CourseDocuments()
    a, b = applier(db, log, docs), applier(db, log, docs)
    await log.append(StreamAppend(stream_id="c", events=[CourseCreated(title="one")], create=NewStream("course", "o")))
    assert await a.step() == 1
    await log.append_one("c", [CourseRetitled(title="two")])
    assert await b.step() == 1  # b starts from the checkpoint a wrote
    await log.append_one("c", [CourseUnlocked(run_id="r")])
    with pytest.raises(CheckpointMoved):
        await a.step()  # folded onto what a kept; refused by the fence, and a reloads
    assert await a.step() == 1
    await documents_match_replay(db, log)
    assert msgspec.json.decode(await db.fetchval("SELECT document::text FROM course_documents"),
                               type=CourseDocument).title == "two"


async def test_documents_kept_in_memory_are_what_was_committed(db):
    """A kept document is folded on from memory: a row changed behind the projector's back is not read again
    until the applier reloads (then it is)."""
    log = EventLog(db)
    docs = CourseDocuments()
    a = applier(db, log, docs)
    await log.append(StreamAppend(stream_id="c", events=[CourseCreated(title="one")], create=NewStream("course", "o")))
    assert await a.step() == 1
    await db.execute("UPDATE course_documents SET document = json_build_object('title', 'changed', 'seq', 1, "
                     "'requirement', 'changed')")
    await log.append_one("c", [CourseRetitled(title="two")])
    assert await a.step() == 1
    await documents_match_replay(db, log)  # folded onto the kept document, not onto the changed row
    await db.execute("UPDATE course_documents SET document = json_build_object('title', 'changed', 'seq', 2, "
                     "'requirement', 'changed')")
    await log.append_one("c", [CourseRetitled(title="three"), CourseRetitled(title="four")])
    a.cursor = None  # as after any failure or a lock handover: the checkpoint and the tables are read again
    assert await a.step() == 2
    stored = msgspec.json.decode(await db.fetchval("SELECT document::text FROM course_documents"),
                                 type=CourseDocument)
    assert (stored.title, stored.seq, stored.requirement) == ("four", 4, "changed")


async def test_status_reports_checkpoint_lag_and_holder(db):
    log = EventLog(db)
    await play(log, generation(random.Random(4), "r", "c", "o", scenes=2))
    total = await events_in_log(db)
    status = {s.name: s for s in await projection_status(db, default_projections())}
    assert status["library_cards"].lag_events == total and status["library_cards"].lag_s is not None
    assert status["library_cards"].holder_pid is None and status["library_cards"].events_applied == 0
    await applier(db, log, SessionList()).catch_up()
    async with db.connection() as conn:
        assert await conn.fetchval(Q.projection_try_lock, lock_key("own", "session_list"))
        status = {s.name: s for s in await projection_status(db, default_projections())}
        assert status["session_list"].holder_pid == conn.backend_pid
        await conn.fetchval(Q.projection_unlock, lock_key("own", "session_list"))
    assert (status["session_list"].lag_events, status["session_list"].lag_s) == (0, None)
    assert status["session_list"].events_applied == total


async def test_ensure_tables_creates_a_new_projections_tables(db):
    projector = Projector(db, EventLog(db), Counting())
    await projector.ensure_tables()
    await projector.ensure_tables()
    assert await db.fetchval("SELECT to_regclass('test_counting') IS NOT NULL")


# -- the command line ---------------------------------------------------------------------------------------------


def _env(db_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENMAIC_")}
    return env | {"DATABASE_URL": db_url}


async def cli(db_url: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(60):
        return await trio.run_process([sys.executable, "-m", "openmaic", *args], env=_env(db_url), cwd=ROOT,
                                      capture_stdout=True, capture_stderr=True, check=False)


async def test_cli_projections_status_and_rebuild(db, db_url):
    log = EventLog(db)
    await play(log, generation(random.Random(9), "r", "c", "o", scenes=2))
    total = await events_in_log(db)
    r = await cli(db_url, "projections", "status")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    for name in DEFAULT_NAMES:
        assert name in out
    assert f"{total}" in out and "no" in out

    r = await cli(db_url, "projections", "rebuild", "library_cards")
    assert r.returncode == 0, r.stderr
    assert "library_cards" in r.stdout.decode()
    assert await db.fetchval("SELECT label FROM library_cards WHERE course_id = 'c'") == "ready"
    assert r.stderr == b""  # no progress bar when stderr is not a terminal

    r = await cli(db_url, "projections", "rebuild", "--all")
    assert r.returncode == 0, r.stderr
    rows = await db.fetch("SELECT name, events_applied FROM projection_checkpoints")
    assert {x["name"]: x["events_applied"] for x in rows} == {n: total for n in DEFAULT_NAMES}


async def test_cli_rebuild_of_an_unknown_projection_exits_2(db_url):
    r = await cli(db_url, "projections", "rebuild", "nope")
    assert r.returncode == 2
    err = r.stderr.decode()
    assert err.count("\n") == 1 and "unknown projection 'nope'" in err and "library_cards" in err
    r = await cli(db_url, "projections", "rebuild")
    assert r.returncode == 2


@pytest.mark.parametrize("projection", [LibraryCards(), CourseDocuments(), ModelHistory(), SessionList()],
                         ids=lambda p: p.name)
async def test_rebuild_of_an_empty_log(db, projection):
    result = await rebuild(db, EventLog(db), projection)
    assert result.events == 0
    assert all(rows == [] for rows in (await snapshot(db, projection)).values())
