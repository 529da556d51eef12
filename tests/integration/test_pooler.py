"""Through PgBouncer, both modes: the pool, the listener and the session locks each go where their guarantee holds,
the bounds are in effect or the start is refused naming them, and a pooler nobody declared is named.

Debian's PgBouncer (1.18) in front of the test server (see tests/pgbouncer.py); a transaction-mode pool of fewer
server connections than the client has, so that consecutive statements of one client land on different sessions.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from openmaic import errors
from openmaic.store.database import open_database
from openmaic.store.pooler import Pooler
from tests.pgbouncer import database_of, pooled_env, requires_pgbouncer, set_database_bounds

pytestmark = requires_pgbouncer

ROOT = Path(__file__).resolve().parents[2]
BOUNDS = "SELECT name, setting FROM pg_settings WHERE name IN ('statement_timeout', 'idle_in_transaction_session_timeout')"

#: What a session-mode PgBouncer must be told to ignore to let the service in with DATABASE_POOLER unset: the issue's
#: session-mode deployment, whose bounds were silently gone.
IGNORED = "idle_in_transaction_session_timeout,statement_timeout,tcp_keepalives_idle,tcp_keepalives_interval," \
          "tcp_keepalives_count,tcp_user_timeout"


def transaction(db_url: str) -> Pooler:
    return Pooler("transaction", db_url)


async def test_through_a_transaction_pooler_units_listener_and_session_locks_each_hold(db_url, bouncers):
    bouncer = bouncers("transaction", pool_size=2)
    await set_database_bounds(db_url)
    url = bouncer.url(database_of(db_url))
    async with open_database(url, max_size=10, listen=["openmaic_events"], listener_ping_s=1.0,
                             pooler=transaction(db_url)) as db, \
            open_database(url, max_size=2, pooler=transaction(db_url)) as other:

        # Ten client connections over two server sessions: each statement is parsed again where it runs (a named
        # statement of the driver's cache would be unknown, or already known, to the next session).
        async def unit(i: int) -> None:
            for j in range(10):
                assert await db.fetchval("SELECT $1::int + $2::int", i, j) == i + j
                rows = await db.transaction([("SELECT $1::text AS t", (f"t{i}",)),
                                             ("SELECT $1::jsonb AS j", ('{"a": 1}',))])
                assert rows[0][0]["t"] == f"t{i}"

        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(unit, i)
        assert {r["setting"] for r in await db.fetch(BOUNDS)} == {"30000", "1000"}, "the role defaults bound it"

        # The listener is a session of PostgreSQL itself: it hears a NOTIFY sent through the pooler.
        sub = db.subscribe()
        other.notify_soon("openmaic_events", "through the pooler")
        with trio.fail_after(5):
            got, _ = await sub.wait()
        assert ("openmaic_events", "through the pooler") in got
        assert await other.fetchval("SELECT datname FROM pg_stat_activity WHERE pid = $1", db.listener_backend_pid()) \
            == database_of(db_url), "the listener is a session of PostgreSQL itself (PgBouncer makes its pids up)"

        # A session of its own (PgBouncer hands out made-up backend pids; the direct connection's is the server's),
        # and a session lock one process holds is refused to the other.
        async with db.session() as a, other.session() as b:
            assert a.backend_pid == await a.fetchval("SELECT pg_backend_pid()")
            assert await a.fetchval("SELECT pg_try_advisory_lock(42)")
            assert await a.fetchval("SELECT pg_try_advisory_lock(42)"), "re-entrant within its own session"
            assert not await b.fetchval("SELECT pg_try_advisory_lock(42)")
        async with other.session() as b:
            assert await b.fetchval("SELECT pg_try_advisory_lock(42)"), "the lock ended with its session"


async def test_a_transaction_pooler_without_a_direct_url_is_refused_at_start_naming_it(db_url, bouncers, tmp_path):
    bouncer = bouncers("transaction", pool_size=2)
    env = dict(os.environ, **pooled_env(bouncer, db_url), OPENMAIC_DATA_DIR=str(tmp_path))
    del env["DATABASE_DIRECT_URL"]
    done = await trio.to_thread.run_sync(lambda: subprocess.run(
        [sys.executable, "-m", "openmaic", "serve", "--port", "0"], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=60))
    assert done.returncode == 2, done.stderr
    assert "DATABASE_DIRECT_URL" in done.stderr and "DATABASE_POOLER=transaction" in done.stderr, done.stderr


async def test_a_transaction_pooler_whose_sessions_are_unbounded_is_refused_naming_each_bound(db_url, bouncers):
    bouncer = bouncers("transaction", pool_size=2)
    with pytest.raises(errors.ConfigError) as refused:
        async with open_database(bouncer.url(database_of(db_url)), pooler=transaction(db_url)):
            pass
    message = refused.value.message
    for name in ("statement_timeout", "idle_in_transaction_session_timeout"):
        assert f"{name} is off" in message and f"ALTER ROLE <role> SET {name}" in message, message
    # A looser bound than asked is refused too: half a lease of 2 s asks for at most 1000 ms.
    await set_database_bounds(db_url, {"statement_timeout": "30000", "idle_in_transaction_session_timeout": "5000"})
    # The pooler's server sessions opened before keep what they started with, until it opens new ones.
    bouncer.admin(f"RECONNECT {database_of(db_url)}")
    with pytest.raises(errors.ConfigError, match="idle_in_transaction_session_timeout is 5000 .at most 1000 ms"):
        async with open_database(bouncer.url(database_of(db_url)), pooler=transaction(db_url),
                                 server_settings={"idle_in_transaction_session_timeout": "1000"}):
            pass


async def test_a_pooler_nobody_declared_is_named_not_passed_through(db_url, bouncers):
    # A transaction-mode PgBouncer refuses the bounds' startup parameters: the refusal says which setting to change.
    with pytest.raises(errors.ConfigError, match="points at a connection pooler, which refused the session setting "
                       "idle_in_transaction_session_timeout: set DATABASE_POOLER=transaction"):
        async with open_database(bouncers("transaction", pool_size=2).url(database_of(db_url)), pooler=Pooler()):
            pass
    # One told to ignore them lets the connection in, without the bounds: refused, naming them.
    ignoring = bouncers("session", pool_size=20, ignore_startup_parameters=IGNORED)
    with pytest.raises(errors.ConfigError) as refused:
        async with open_database(ignoring.url(database_of(db_url)), pooler=Pooler()):
            pass
    message = refused.value.message
    assert "statement_timeout is off" in message and "idle_in_transaction_session_timeout is off" in message
    assert "set DATABASE_POOLER=session or transaction" in message, message


async def test_through_a_session_pooler_the_bounds_hold_on_every_connection_and_after_a_reset(db_url, bouncers):
    bouncer = bouncers("session", pool_size=20, ignore_startup_parameters=IGNORED)
    url = bouncer.url(database_of(db_url))
    async with open_database(url, max_size=4, listen=["openmaic_events"], listener_ping_s=1.0,
                             pooler=Pooler("session")) as db, \
            open_database(url, min_size=1, max_size=1, pooler=Pooler("session")) as single:
        async def bounds(db=db) -> None:
            assert {r["name"]: r["setting"] for r in await db.fetch(BOUNDS)} == {
                "statement_timeout": "30000", "idle_in_transaction_session_timeout": "5000"}

        async with trio.open_nursery() as nursery:  # several pooled connections, each given the bounds by SET
            for _ in range(4):
                nursery.start_soon(bounds)
        async with single.connection() as conn:  # a held connection is reset (RESET ALL) when given back …
            assert await conn.fetchval("SELECT pg_try_advisory_lock(7)")
        await bounds(single)  # … and has its bounds again (the pool's only connection)
        sub = db.subscribe()
        db.notify_soon("openmaic_events", "session")
        with trio.fail_after(5):
            got, _ = await sub.wait()
        assert ("openmaic_events", "session") in got
