"""The global order: by transaction id as a number (not its text), and across a logical restore into another cluster."""

from __future__ import annotations

import pytest
import trio

from benchmarks.workload import scenarios
from openmaic.events.core import SessionCreated, SessionMessagePosted
from openmaic.events.log import START, EventLog, NewStream, StreamAppend
from openmaic.projections import Applier, default_projections, rebuild
from openmaic.projections.base import live_tables
from openmaic.store.database import open_database
from openmaic.store.migrations import migrate
from openmaic.store.postgres import ThrowawayCluster
from tests.integration.projection_helpers import events_in_log, play_all, snapshot

BURN = """
DO $$
BEGIN
    FOR i IN 1..$n LOOP
        BEGIN
            INSERT INTO burn VALUES (i);  -- a subtransaction that writes takes its own xid
        EXCEPTION WHEN OTHERS THEN NULL;
        END;
    END LOOP;
END $$;
"""


async def burn_until_digit_boundary(db) -> None:
    """Consume transaction ids until the next one has one more decimal digit."""
    current = int(await db.fetchval("SELECT pg_current_xact_id()::text"))
    boundary = 10 ** len(str(current))
    await db.execute("CREATE TABLE IF NOT EXISTS burn (n int)")
    await db.execute(BURN.replace("$n", str(boundary - current + 2)))


async def test_read_all_order_survives_an_xid_digit_boundary():
    # A fresh cluster: its transaction ids are still small, so the next digit boundary is cheap to reach.
    cluster = ThrowawayCluster().start()
    try:
        async with open_database(cluster.url()) as db:
            await migrate(db)
            await _check(db)
    finally:
        cluster.stop()


async def _check(db) -> None:
    log = EventLog(db)
    await log.append(StreamAppend(stream_id="s", events=[SessionCreated(kind="t", owner_id="o")],
                                  create=NewStream("t", "o")))
    for i in range(5):
        await log.append_one("s", [SessionMessagePosted(text=f"before {i}")])
    await burn_until_digit_boundary(db)
    for i in range(5):
        await log.append_one("s", [SessionMessagePosted(text=f"after {i}")])
    seen = []
    cursor = (0, 0, 0)
    while page := await log.read_all(cursor, limit=3):
        seen += page
        cursor = page[-1].cursor
    assert [e.seq for e in seen] == list(range(1, 12))
    assert len({len(str(e.tx)) for e in seen}) == 2, "the workload should straddle a digit boundary"


# -- the order across clusters: a logical restore ---------------------------------------------------------------
#
# pg_dump / pg_restore copy transaction ids verbatim into another cluster, whose counter may be behind them (a fresh
# cluster) or ahead (a busy one). Either way the restored log and everything written after it must be read in full,
# once each, old before new, and the restored checkpoints must go on from where they were.


async def _write_and_project(log: EventLog, prefix: str, seed: int) -> None:
    await play_all(log, scenarios(seed, 3, 2, prefix=prefix), concurrency=3)
    for p in default_projections():
        await applier(log, p).catch_up()


def applier(log: EventLog, p) -> Applier:
    return Applier(log.db, log, p, checkpoint=p.name, tables=live_tables(p), pause_key=None)


async def _read_everything(log: EventLog) -> list:
    seen, cursor = [], START
    while page := await log.read_all(cursor, limit=7):
        seen += page
        cursor = page[-1].cursor
    return seen


@pytest.mark.parametrize("target_epochs", [0, 5], ids=["target-behind", "target-ahead"])
async def test_a_restore_into_another_cluster_keeps_the_global_order(tmp_path, target_epochs):
    source, target = ThrowawayCluster(), ThrowawayCluster()
    try:
        source.start().advance_xid_epoch(3)  # years of traffic: ids beyond 3 × 2³²
        target.start()
        if target_epochs:
            target.advance_xid_epoch(target_epochs)
        async with open_database(source.url()) as db:
            await migrate(db)
            log = EventLog(db)
            await _write_and_project(log, "old-", 1)
            old = [(e.stream_id, e.seq) for e in await _read_everything(log)]
            live_before = {p.name: await snapshot(db, p) for p in default_projections()}
        dump = tmp_path / "openmaic.dump"
        await trio.to_thread.run_sync(source.dump, "postgres", dump)
        await trio.to_thread.run_sync(target.restore, dump, "restored")

        async with open_database(target.url("restored")) as db:
            await migrate(db)  # nothing to do: the schema came with the dump
            log = EventLog(db)
            restored = await _read_everything(log)
            assert [(e.stream_id, e.seq) for e in restored] == old, "the restored log reads in full, in its order"
            assert {p.name: await snapshot(db, p) for p in default_projections()} == live_before
            await _write_and_project(log, "new-", 2)
            everything = await _read_everything(log)
            keys = [(e.stream_id, e.seq) for e in everything]
            assert keys[: len(old)] == old and len(keys) == len(set(keys)) == await events_in_log(db)
            assert {k[0] for k in keys[len(old):]} == {s for s in await _stream_ids(db) if s.startswith("new-")}
            epochs = {e.epoch for e in everything[len(old):]}
            # Ids from a cluster that was ahead cannot be compared with this one's: a new epoch. From one that was
            # behind, they can: the same epoch goes on.
            assert epochs == ({2} if target_epochs == 0 else {1})
            # The live read models went on from the restored checkpoints; a rebuild from the log agrees with them.
            for p in default_projections():
                live = await snapshot(db, p)
                assert any(row for rows in live.values() for row in rows if "new-" in row), p.name
                await rebuild(db, log, p)
                assert await snapshot(db, p) == live, p.name
    finally:
        source.stop()
        target.stop()


async def test_every_session_of_a_cluster_writes_into_the_same_epoch(tmp_path):
    """After a restore from a cluster that was ahead, many sessions' first appends race to decide the epoch; all
    take the same one. A restore that leaves the position counter behind (logical replication copies rows, not
    sequences) does not collide either."""
    source, target = ThrowawayCluster(), ThrowawayCluster()
    try:
        source.start().advance_xid_epoch(2)
        target.start()
        async with open_database(source.url()) as db:
            await migrate(db)
            await _write_and_project(EventLog(db), "old-", 3)
        dump = tmp_path / "openmaic.dump"
        await trio.to_thread.run_sync(source.dump, "postgres", dump)
        await trio.to_thread.run_sync(target.restore, dump, "restored")
        async with open_database(target.url("restored"), min_size=16, max_size=16) as db:
            await db.execute("SELECT setval(pg_get_serial_sequence('events', 'position'), 1, false)")
            log = EventLog(db)

            async def one(i: int) -> None:
                await log.append(StreamAppend(stream_id=f"race-{i}", events=[SessionCreated(kind="t", owner_id="o")],
                                              create=NewStream("t", "o")))

            async with trio.open_nursery() as nursery:
                for i in range(32):
                    nursery.start_soon(one, i)
            rows = await db.fetch("SELECT DISTINCT epoch FROM events WHERE stream_id LIKE 'race-%'")
            assert [r["epoch"] for r in rows] == [2]
            assert len(await _read_everything(log)) == await events_in_log(db)
    finally:
        source.stop()
        target.stop()


async def _stream_ids(db) -> list[str]:
    return [r["id"] for r in await db.fetch("SELECT id FROM streams")]
