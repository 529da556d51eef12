"""The epoch lookup's lock (openmaic_epoch) never outlives a cancelled lookup, and a pooled connection cancelled
mid-call is never handed out again: either would leave a session advisory lock held, and every other session's
first append, claim or read then waits on it until its statement timeout."""

from __future__ import annotations

import random

import trio

from openmaic import errors
from openmaic.events.core import SessionCreated
from openmaic.events.log import START, EventLog, NewStream, StreamAppend
from openmaic.store.database import open_database
from openmaic.store.queries import Q

ADVISORY_HELD = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = " \
                "(SELECT oid FROM pg_database WHERE datname = current_database())"

# The looker's loop: one first lookup after another (the session setting cleared before each), every cancel that
# lands in a lookup caught, so each lookup is cut off at whatever point the cancel meets it.
LOOKS = """
DO $$
DECLARE
    deadline timestamptz := clock_timestamp() + interval '1.5 seconds';
BEGIN
    WHILE clock_timestamp() < deadline LOOP
        BEGIN
            PERFORM set_config('openmaic.epoch', '', false);
            PERFORM openmaic_epoch();
        EXCEPTION WHEN query_canceled THEN
            NULL;
        END;
    END LOOP;
END;
$$
"""

# The canceller: cancels the looker's statement at random intervals of up to half a millisecond.
CANCELS = """
DO $$
DECLARE
    deadline timestamptz := clock_timestamp() + interval '1.5 seconds';
BEGIN
    WHILE clock_timestamp() < deadline LOOP
        PERFORM pg_cancel_backend($PID$);
        PERFORM pg_sleep(random() * 0.0005);
    END LOOP;
END;
$$
"""


async def _fresh_claim_append_and_read(db_url: str, stream_id: str) -> None:
    """A new process's first append (its first epoch lookup), claim and global read, which wait on no one."""
    async with open_database(db_url, min_size=1, max_size=2) as fresh:
        log = EventLog(fresh)
        with trio.fail_after(5):
            await log.append(StreamAppend(stream_id=stream_id, events=[SessionCreated(kind="t", owner_id="o")],
                                          create=NewStream("t", "o"), status="queued"))
        async with open_database(db_url, min_size=1, max_size=1) as other:
            with trio.fail_after(5):
                claimed = await other.fetch(Q.claim, "w", ["t"], [1], 10_000)
                assert [r["stream_id"] for r in claimed] == [stream_id]
                assert [e.stream_id for e in await EventLog(other).read_all(START, 100)] == [stream_id] * 2


async def test_random_cancels_of_first_epoch_lookups_leave_no_lock(db_url):
    async with open_database(db_url, min_size=2, max_size=3) as db:
        async with db.connection() as looker:
            pid = looker.backend_pid
            for _ in range(3):

                async def looks() -> None:
                    try:
                        await looker.execute(LOOKS)
                    except errors.OpenMaicError:
                        pass  # a cancel that landed between two lookups ends the loop: the next round goes on

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(looks)
                    await db.execute(CANCELS.replace("$PID$", str(pid)))
            # Its next lookup, not cut short, leaves nothing held (a cancel meeting a lookup's error handler can
            # escape it: then this lookup gives back what that one left).
            await looker.fetchval("SELECT openmaic_epoch() FROM set_config('openmaic.epoch', '', false)")
            held = await looker.fetchval(ADVISORY_HELD + " AND pid = $1", pid)
            assert held == 0, f"the looker's session still holds {held} advisory lock(s) after its lookups"
    await _fresh_claim_append_and_read(db_url, "after-cancels")


async def test_a_unit_of_work_cancelled_mid_statement_is_not_reused(db_url):
    """Whatever session state the cancelled statement left (here a session advisory lock it took before the cancel
    met it) dies with its connection: the pool runs no reset for units of work."""
    async with open_database(db_url, min_size=1, max_size=1) as db:
        before = await db.fetchval("SELECT pg_backend_pid()")
        with trio.move_on_after(0.3) as scope:
            await db.fetchval("SELECT pg_advisory_lock(42), pg_sleep(5)")
        assert scope.cancelled_caught
        with trio.fail_after(5):
            assert await db.fetchval("SELECT pg_backend_pid()") != before, "the cancelled unit's connection came back"
            # (the server ends the terminated session's backend, and its lock, a moment after the socket closes)
            while await db.fetchval(ADVISORY_HELD):
                await trio.sleep(0.01)


async def test_a_unit_whose_statement_the_server_cancelled_is_not_reused(db_url):
    """The same for a statement the server cancelled (here its statement timeout, set for this one session)."""
    async with open_database(db_url, min_size=1, max_size=1) as db:
        before = await db.fetchval("SELECT pg_backend_pid() FROM set_config('statement_timeout', '200', false)")
        try:
            await db.fetchval("SELECT pg_advisory_lock(42), pg_sleep(5)")
        except errors.DatabaseError as exc:
            assert "57014" in str(exc)
        else:
            raise AssertionError("the statement timeout did not end the statement")
        with trio.fail_after(5):
            assert await db.fetchval("SELECT pg_backend_pid()") != before, "the cancelled unit's connection came back"
            while await db.fetchval(ADVISORY_HELD):
                await trio.sleep(0.01)


async def test_a_hold_an_escaped_lookup_left_is_given_back_by_the_next_one(db):
    """A second interrupt meeting a lookup's error handler escapes it and leaves holds of the lock (twice here);
    the session's next lookup gives them all back before it looks."""
    async with db.connection() as conn:
        await conn.execute("SELECT pg_advisory_lock(7526676516455678021), pg_advisory_lock(7526676516455678021)")
        assert await conn.fetchval(ADVISORY_HELD + " AND pid = pg_backend_pid()") == 1
        await conn.fetchval("SELECT openmaic_epoch() FROM set_config('openmaic.epoch', '', false)")
        assert await conn.fetchval(ADVISORY_HELD + " AND pid = pg_backend_pid()") == 0
