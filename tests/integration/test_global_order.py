"""read_all orders by transaction id as a number, also where its decimal text would sort differently."""

from __future__ import annotations

from openmaic.events.core import SessionCreated, SessionMessagePosted
from openmaic.events.log import EventLog, NewStream, StreamAppend
from openmaic.store.database import open_database
from openmaic.store.migrations import migrate
from openmaic.store.postgres import ThrowawayCluster

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
    cursor = (0, 0)
    while page := await log.read_all(cursor, limit=3):
        seen += page
        cursor = page[-1].cursor
    assert [e.seq for e in seen] == list(range(1, 12))
    assert len({len(str(e.tx)) for e in seen}) == 2, "the workload should straddle a digit boundary"
