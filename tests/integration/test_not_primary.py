"""A server that is not the primary (a standby, or a primary demoted by a failover that a proxy still routes to)
refuses writes with 25006; that means "wrong server, reconnect", never "this statement failed".

A demoted server is simulated with ``ALTER DATABASE … SET default_transaction_read_only = on``: every session opened
afterwards refuses writes with 25006, as a hot standby does, and sessions opened before it keep writing.
"""

from __future__ import annotations

import logging
import urllib.parse

import pytest
import trio

from openmaic import errors
from openmaic.store.database import open_database
from openmaic.store.driver_logs import OneLinePerFault
from openmaic.store.hosts import connect_each, split_hosts
from openmaic.store.ports import free_port
from openmaic.store.sqlstates import NOT_PRIMARY, error_for_sqlstate
from tests.runtime import ended, new_stream, open_worker, settings, types_of, wait_for


async def _read_only(admin_url: str, url: str, on: bool) -> None:
    name = urllib.parse.urlsplit(url).path.lstrip("/")
    async with open_database(admin_url, min_size=1, max_size=1) as admin:
        if on:
            await admin.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on")
        else:
            await admin.execute(f"ALTER DATABASE {name} RESET default_transaction_read_only")


def test_refusals_of_a_server_that_is_not_the_primary_are_unavailability() -> None:
    for state, message in [("25006", "cannot execute UPDATE in a read-only transaction"),
                           ("25006", "cannot execute LISTEN during recovery"),
                           ("0A000", "cannot acquire lock mode ExclusiveLock on database objects while recovery is "
                                     "in progress"),
                           ("55000", "recovery is in progress")]:
        exc = error_for_sqlstate(state, message)
        assert isinstance(exc, errors.DatabaseUnavailable), (state, exc)
        assert exc.details["reason"] == NOT_PRIMARY
    assert isinstance(error_for_sqlstate("57P03", "the database system is starting up"), errors.DatabaseUnavailable)
    assert type(error_for_sqlstate("23505", "duplicate key")) is errors.DatabaseError


def test_a_multi_host_url_is_split_into_its_hosts() -> None:
    url = "postgresql://u:pw@h1:5432,h2:5433/db?target_session_attrs=read-write"
    assert split_hosts(url) == [
        ("h1:5432", "postgresql://u:pw@h1:5432/db?target_session_attrs=read-write"),
        ("h2:5433", "postgresql://u:pw@h2:5433/db?target_session_attrs=read-write"),
    ]
    assert split_hosts("postgresql://u@h1/db") == [("h1", "postgresql://u@h1/db")]


async def test_a_connection_that_answered_25006_is_discarded_and_the_next_one_writes(pg, db_url):
    await _read_only(pg.admin_url, db_url, True)
    try:
        async with open_database(db_url, min_size=1, max_size=1) as db:
            demoted = await db.fetchval("SELECT pg_backend_pid()")  # reads still work, as on a standby
            with pytest.raises(errors.DatabaseUnavailable) as refused:
                await db.execute("CREATE TABLE written (n int)")
            assert refused.value.details["reason"] == NOT_PRIMARY, refused.value
            assert "not the primary" in refused.value.message
            # The server is back to taking writes (the new primary); the pool must not hand out the connection that
            # answered 25006 again: its session would refuse every write for as long as it lives. (Its replacement
            # may have been opened before the switch, and is refused and discarded in turn: a few tries at most.)
            await _read_only(pg.admin_url, db_url, False)
            await _write_soon(db, "CREATE TABLE written (n int)")
            assert await db.fetchval("SELECT pg_backend_pid()") != demoted
        # A held connection that meets it is not given back to the pool either.
        await _read_only(pg.admin_url, db_url, True)
        async with open_database(db_url, min_size=1, max_size=1) as db:
            async with db.connection() as conn:
                held = conn.backend_pid
                with pytest.raises(errors.DatabaseUnavailable):
                    await conn.execute("INSERT INTO written VALUES (1)")
            await _read_only(pg.admin_url, db_url, False)
            await _write_soon(db, "INSERT INTO written VALUES (2)")
            assert await db.fetchval("SELECT pg_backend_pid()") != held
    finally:
        await _read_only(pg.admin_url, db_url, False)


async def _write_soon(db, sql: str) -> None:
    """``sql`` on a pool of one connection, retried as every caller retries unavailability: it must get through
    within a few tries once the server takes writes (a pool that kept a refused connection never would)."""
    for _ in range(5):
        try:
            await db.execute(sql)
            return
        except errors.DatabaseUnavailable as exc:
            assert exc.details.get("reason") == NOT_PRIMARY, exc
    pytest.fail(f"still refused after 5 tries: {sql}")


async def test_a_url_asking_for_the_primary_names_every_host_and_what_it_said(pg, db_url):
    await _read_only(pg.admin_url, db_url, True)
    try:
        parts = urllib.parse.urlsplit(db_url)
        user, _, server = parts.netloc.rpartition("@")
        down = f"127.0.0.1:{free_port()}"  # nothing listens there
        both = urllib.parse.urlunsplit(parts._replace(netloc=f"{user}@{down},{server}",
                                                      query="target_session_attrs=read-write"))
        with pytest.raises(errors.DatabaseUnavailable) as refused:
            async with open_database(both, connect_timeout=5):
                pass
        message = refused.value.message
        assert f"{down}: ConnectionRefusedError" in message, message
        assert f"{server}: answered, but is not the primary" in message, message
        one = urllib.parse.urlunsplit(parts._replace(query="target_session_attrs=read-write"))
        with pytest.raises(errors.DatabaseUnavailable) as refused:
            async with open_database(one, connect_timeout=5):
                pass
        assert refused.value.details["reason"] == NOT_PRIMARY, refused.value.message
    finally:
        await _read_only(pg.admin_url, db_url, False)


async def test_a_worker_outlives_a_demoted_server_without_failing_a_step(pg, db_url, caplog):
    """The worker's server turns read-only under it (every session is ended and comes back read-only, as behind a
    proxy still routing to a demoted primary), then takes writes again: the streams complete, no step fails, and
    nothing is reported as a failure (an actor failing on a refused statement logs an error)."""
    async with open_worker(db_url, settings(lease_ttl_s=3.0, heartbeat_s=0.3, claim_poll_s=0.2)) as worker:
        log = worker.log
        for i in range(3):
            await new_stream(log, f"s{i}", steps=6, sleep=0.2)
        await wait_for(lambda: _started(log, "s0"))
        await _read_only(pg.admin_url, db_url, True)
        async with open_database(pg.admin_url, min_size=1, max_size=1) as admin:
            await admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
                                urllib.parse.urlsplit(db_url).path.lstrip("/"))
        await trio.sleep(1.0)  # the demoted spell: long enough for every loop to meet a refusal
        await _read_only(pg.admin_url, db_url, False)
        for i in range(3):
            await wait_for(lambda i=i: _eq(ended(log, f"s{i}"), "completed"), timeout=30)
            types = await types_of(log, f"s{i}")
            assert "session.step_failed" not in types and types.count("test.step_done") == 6, types
    assert any("not the primary" in r.getMessage() for r in caplog.records), "the demoted server was met"
    errors_logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors_logged, errors_logged


async def _started(log, sid: str) -> bool:
    return "test.step_done" in await types_of(log, sid)


async def _eq(aw, value) -> bool:
    return await aw == value


def test_driver_tracebacks_are_one_line_per_fault() -> None:
    f = OneLinePerFault(quiet_s=60)
    records = []
    for _ in range(5):
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except OSError as exc:
            records.append(logging.LogRecord("asyncpg.pool", logging.WARNING, __file__, 1,
                                             "Failed to restore the pool connection floor; retrying", None,
                                             (type(exc), exc, exc.__traceback__)))
    kept = [r for r in records if f.filter(r)]
    assert len(kept) == 1 and f.dropped == 4
    assert kept[0].exc_info is None
    assert kept[0].getMessage() == ("Failed to restore the pool connection floor; retrying "
                                    "(ConnectionRefusedError: [Errno 111] Connection refused)")


async def test_a_host_whose_failure_took_long_is_tried_after_one_that_answered() -> None:
    """A primary that vanished without a word costs a whole connect timeout per attempt; once it has, the other
    hosts are tried first, so that the new primary is found without waiting behind it."""
    tried: list[str] = []
    promoted = False

    async def connect(url: str) -> str:
        host = urllib.parse.urlsplit(url).netloc
        tried.append(host)
        if host == "silent:1":
            await trio.sleep(0.3)  # as a connect timeout would
            raise errors.DatabaseUnavailable("timed out")
        if not promoted:
            raise errors.DatabaseUnavailable("not the primary", reason=NOT_PRIMARY)
        return host

    url = "postgresql://silent:1,standby:2/db?target_session_attrs=read-write"
    with pytest.raises(errors.DatabaseUnavailable) as refused:
        await connect_each(url, connect, lambda exc: exc)
    assert "silent:1: " in refused.value.message and "standby:2: answered, but is not the primary" in \
        refused.value.message
    assert tried == ["silent:1", "standby:2"]
    promoted = True
    tried.clear()
    assert await connect_each(url, connect, lambda exc: exc) == "standby:2"
    assert tried == ["standby:2"]


def test_what_counts_as_the_database_being_away_for_an_sse_client() -> None:
    from openmaic.api.outage import database_outage

    away = errors.DatabaseUnavailable("gone")
    ended = errors.ServiceUnavailable("reading stream 's' failed; reconnect")
    ended.__cause__ = errors.OpenMaicError("reading stream 's' failed")
    ended.__cause__.__cause__ = away
    assert database_outage(away) and database_outage(ended)
    assert database_outage(ExceptionGroup("nursery", [away, errors.DatabaseUnavailable("also")]))
    assert not database_outage(ExceptionGroup("nursery", [away, ValueError()]))
    assert not database_outage(errors.ServiceUnavailable("the server is stopping; reconnect"))
    assert not database_outage(errors.DatabaseError("refused"))
