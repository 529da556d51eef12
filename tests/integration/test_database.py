"""The asyncpg-under-trio host: cancellation safety, LISTEN reconnect, NOTIFY coalescing, error translation."""

from __future__ import annotations

import random

import msgspec
import pytest
import trio

from openmaic import errors
from openmaic.events.wakeups import CHANNEL, Wakeups
from openmaic.store.database import _detached, open_database


async def idle_in_transaction(db) -> int:
    return await db.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'"
    )


async def wait_until(predicate, timeout: float = 10.0, interval: float = 0.02) -> None:
    with trio.fail_after(timeout):
        while not await predicate():
            await trio.sleep(interval)


async def test_cancelling_a_unit_of_work_mid_transaction_leaks_nothing(db):
    await db.execute("CREATE TABLE scratch (n int)")
    cancelled = 0
    for i in range(100):
        with trio.move_on_after(random.uniform(0.0, 0.02)) as scope:
            await db.transaction([("INSERT INTO scratch VALUES ($1)", (i,)), ("SELECT pg_sleep(0.05)", ())])
        cancelled += scope.cancelled_caught
    assert cancelled > 50
    # every cancelled transaction was rolled back, and every pooled connection came back
    assert await db.fetchval("SELECT count(*) FROM scratch") == 100 - cancelled
    assert await idle_in_transaction(db) == 0
    stats = db.statistics()
    assert stats["idle"] == stats["size"]
    # and the pool still hands out every connection
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            for _ in range(stats["max"]):
                nursery.start_soon(db.fetchval, "SELECT pg_sleep(0.05)")


async def test_cancelling_inside_a_held_connection_transaction_rolls_back(db):
    await db.execute("CREATE TABLE scratch (n int)")
    for i in range(100):
        with trio.move_on_after(random.uniform(0.0, 0.01)):
            async with db.connection() as conn, conn.transaction():
                await conn.execute("INSERT INTO scratch VALUES ($1)", i)
                await conn.execute("SELECT pg_sleep(0.02)")
    assert await db.fetchval("SELECT count(*) FROM scratch") == 0 or await idle_in_transaction(db) == 0
    assert await idle_in_transaction(db) == 0
    stats = db.statistics()
    assert stats["idle"] == stats["size"]
    assert await db.fetchval("SELECT count(*) FROM scratch") <= 100


async def test_listener_reconnects_after_its_backend_is_terminated(db):
    wakeups = Wakeups()
    async with trio.open_nursery() as nursery:
        await nursery.start(wakeups.run, db)
        with wakeups.watch("s1") as w:
            await db.execute("SELECT pg_notify($1, 's1')", CHANNEL)
            assert await w.wait(5)
            pid = db.listener_backend_pid()
            assert await db.fetchval("SELECT pg_terminate_backend($1)", pid)
            # the reconnect tells every watcher to re-read (notifications may have been missed)
            assert await w.wait(10)
            await wait_until(lambda: _async(db.listener_connected and db.listener_backend_pid() not in (None, pid)))
            assert db.listener_reconnects == 1 and wakeups.resyncs == 1
            await db.execute("SELECT pg_notify($1, 's1')", CHANNEL)
            assert await w.wait(5)
        nursery.cancel_scope.cancel()


async def _async(value):
    return value


async def test_notify_soon_coalesces_hints(db):
    wakeups = Wakeups()
    sub = db.subscribe()
    async with trio.open_nursery() as nursery:
        await nursery.start(wakeups.run, db)
        for _ in range(50):
            db.notify_soon(CHANNEL, "a")
        db.notify_soon(CHANNEL, "b")
        got: set = set()
        with trio.fail_after(5):
            while {p for _, p in got} != {"a", "b"}:
                pending, _ = await sub.wait()
                got |= pending
        nursery.cancel_scope.cancel()


async def test_unreachable_database_is_a_clear_error():
    with pytest.raises(errors.DatabaseUnavailable, match="cannot reach PostgreSQL|connection"):
        async with open_database("postgresql://postgres@127.0.0.1:1/postgres", connect_timeout=2):
            pass


async def test_missing_database_is_a_clear_error(pg):
    with pytest.raises(errors.DatabaseUnavailable, match="does not exist"):
        async with open_database(pg.url("no_such_database")):
            pass


async def test_sql_errors_are_translated(db):
    with pytest.raises(errors.DatabaseError) as exc:
        await db.execute("SELECT * FROM no_such_table")
    assert exc.value.details["sqlstate"] == "42P01"
    assert exc.value.__cause__ is not None


async def test_pooled_connections_terminated_by_the_server_fail_only_as_unavailable(db_url):
    """A terminated backend sends an unsolicited FATAL before it closes; until the driver sees the close, the
    pooled connection looks idle but cannot run a statement. Whatever a unit of work hits in that window, it must
    surface as DatabaseUnavailable (which callers retry), never as a driver-internal error."""
    async with open_database(db_url, min_size=4, max_size=4) as db, open_database(db_url, min_size=1) as admin:
        seen: set[str] = set()
        for _ in range(30):
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            )
            with trio.fail_after(30):
                while True:
                    try:
                        assert await db.fetchval("SELECT 1") == 1
                        break
                    except errors.DatabaseUnavailable as exc:
                        seen.add(type(exc.__cause__).__name__)
        assert seen, "the terminations were noticed"


class _Pair(msgspec.Struct, frozen=True):
    n: int
    word: str


async def test_rows_come_back_typed_from_the_pool_and_a_held_connection(db):
    sql = "SELECT n, 'w' || n AS word FROM generate_series(1, $1) AS n"
    assert await db.fetch_as(_Pair, sql, 2) == [_Pair(1, "w1"), _Pair(2, "w2")]
    assert await db.fetchrow_as(_Pair, sql, 1) == _Pair(1, "w1")
    assert await db.fetchrow_as(_Pair, sql, 0) is None
    async with db.connection() as conn:
        assert await conn.fetch_as(_Pair, sql, 1) == [_Pair(1, "w1")]
    # A column the struct does not name (or one it lacks) fails where the row is built, naming it.
    with pytest.raises(TypeError, match="extra"):
        await db.fetch_as(_Pair, "SELECT 1 AS n, 'a' AS word, 2 AS extra")
    with pytest.raises(TypeError, match="word"):
        await db.fetchrow_as(_Pair, "SELECT 1 AS n")


async def test_a_call_reuses_a_given_back_connection_and_never_one_the_server_closed(db_url):
    """A unit of work runs on the connection the last one gave back (no pool release and acquire between them),
    so a burst's connections stay the pool's: at rest every one is idle, none is opened beyond what a burst needed,
    and a spare whose backend the server ended is dropped, not handed to the next call."""
    async with open_database(db_url, min_size=1, max_size=6) as db, open_database(db_url, min_size=1) as admin:
        pids: set[int] = set()

        async def call() -> None:
            pids.add(await db.fetchval("SELECT pg_backend_pid() FROM pg_sleep(0.05)"))

        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(call)
        burst = db.statistics()
        assert burst["idle"] == burst["size"] == len(pids) == 4, burst
        # One after another, calls run on the connection the previous call gave back: no new one is opened.
        one_by_one = {await db.fetchval("SELECT pg_backend_pid()") for _ in range(20)}
        assert len(one_by_one) == 1 and one_by_one <= pids
        assert db.statistics()["size"] == 4
        # The server ends every one of them; once the driver has seen the close, no call is given a dead one.
        await admin.execute("SELECT pg_terminate_backend(p) FROM unnest($1::int[]) AS p", sorted(pids))

        async def all_gone() -> bool:
            return await admin.fetchval(
                "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = ANY($1::int[])", sorted(pids)
            )

        async def closes_seen() -> bool:
            # The driver has processed every close (the window before it is test_pooled_connections_terminated…'s).
            return all(_detached(raw) or raw.is_closed() for raw in db._spares)

        await wait_until(all_gone)
        await wait_until(closes_seen)
        for _ in range(10):
            assert await db.fetchval("SELECT pg_backend_pid()") not in pids
        stats = db.statistics()
        assert stats["idle"] == stats["size"]


async def test_more_units_than_connections_all_run_while_the_pool_is_waited_on(db_url):
    # A unit that ends while others wait in the pool's queue gives its connection to the pool, not to the spares:
    # the pool hands connections only to its own waiters, so a spare kept then would leave them waiting until it
    # went cold (SPARE_IDLE_S, a minute). Plain calls and held connections both wait there.
    async with open_database(db_url, min_size=1, max_size=2) as db:
        done = []

        async def call(i: int) -> None:
            await db.fetchval("SELECT pg_sleep(0.02)")
            done.append(i)

        async def held(i: int) -> None:
            async with db.connection() as conn:
                await conn.fetchval("SELECT pg_sleep(0.02)")
            done.append(i)

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for i in range(12):
                    nursery.start_soon(call if i % 3 else held, i)
        assert sorted(done) == list(range(12))
        assert db.statistics()["size"] <= 2


async def test_a_held_connection_the_server_ended_still_lets_the_block_raise_and_be_cancelled(db_url):
    # Once the server ends a held connection, asyncpg takes it back to the pool by itself, and giving it back on
    # leaving the block has nothing to do; leaving must still raise whatever ended the block (an error, or a
    # cancellation), never swallow it, and asking the connection anything must fail as DatabaseUnavailable.
    async with open_database(db_url, min_size=1, max_size=2) as db, open_database(db_url, min_size=1) as admin:

        async def ended_by_the_server(conn) -> None:
            await admin.execute("SELECT pg_terminate_backend($1)", conn.backend_pid)
            await wait_until(lambda: _async(_detached(conn._raw)))

        async with db.connection() as conn:
            await ended_by_the_server(conn)
            with pytest.raises(errors.DatabaseUnavailable):
                conn.backend_pid  # noqa: B018 - the property is what is tested
            with pytest.raises(errors.DatabaseUnavailable):
                await conn.execute("SELECT 1")
            with pytest.raises(errors.DatabaseUnavailable):
                async with conn.transaction():
                    pass
        with pytest.raises(errors.DatabaseUnavailable):
            async with db.connection() as conn:
                await ended_by_the_server(conn)
                await conn.execute("SELECT 1")
        with pytest.raises(KeyError):
            async with db.connection() as conn:
                await ended_by_the_server(conn)
                raise KeyError("the block's own error")
        with trio.move_on_after(10) as scope:
            async with db.connection() as conn:
                await ended_by_the_server(conn)
                scope.cancel()
                await trio.sleep_forever()
            raise AssertionError("the cancellation was swallowed on leaving the block")
        assert scope.cancelled_caught
        assert await db.fetchval("SELECT 1") == 1
