"""What a replica (``DATABASE_REPLICA_URL``) says when it cannot serve, against real PostgreSQL servers: a replica
that cannot be reached is named by its own setting, never as ``DATABASE_URL`` (one host or several), and reads it
refuses are logged the first time and then as a count, at most once a period, while the metric counts each one.

The refusals are real ones: the "replica" here is a second pool on the test's database, and the catch-up read
divides by zero there (a standby's recovery conflict is refused the same way: a server that answers, refusing one
statement), while the primary's pool answers it.
"""

from __future__ import annotations

import logging

from openmaic import metrics
from openmaic.store.database import Database, open_database
from openmaic.store.postgres import free_port
from openmaic.store.replica import Replica, open_replica


def _failed_reads() -> float:
    return metrics.REGISTRY.get_sample_value("openmaic_replica_reads_total", {"outcome": "failed"}) or 0.0


async def test_an_unreachable_replica_is_named_by_its_own_setting(db: Database):
    nobody = f"postgresql://postgres@127.0.0.1:{free_port()}/openmaic"
    two = f"postgresql://postgres@127.0.0.1:{free_port()},127.0.0.1:{free_port()}/openmaic"
    for url in (nobody, two):
        async with open_replica(url, wait_s=0.05, pool_size=1) as replica:
            assert replica is not None
            assert await replica.read(db, lambda g: g.fetchval("SELECT 7"), lambda v: v == 7) == 7  # the primary's
            assert replica.state == "unreachable"
            assert "DATABASE_REPLICA_URL" in replica.problem and "DATABASE_URL" not in replica.problem, replica.problem
            assert "failover" not in replica.problem  # a replica's hosts are standbys: none is promoted
            readiness = await replica.check(db)
            assert readiness.startswith("lagging:") and "DATABASE_REPLICA_URL" in readiness, readiness
            assert "DATABASE_URL" not in readiness, readiness
        if url is two:
            assert replica.problem.startswith("no PostgreSQL host of DATABASE_REPLICA_URL can serve now"), \
                replica.problem


async def test_reads_the_replica_refuses_are_logged_first_then_counted(db: Database, db_url: str, caplog):
    caplog.set_level(logging.WARNING, logger="openmaic.store.replica")
    async with open_database(db_url, min_size=0, max_size=1) as second:
        # A period longer than the test: fifty refusals, one line.
        replica = Replica(second, "127.0.0.1/replica", 0.05, refused_log_s=3600)

        async def read(g: object) -> int:
            return await (second.fetchval("SELECT 1 / 0") if g is second else db.fetchval("SELECT 1"))

        def lines() -> list[str]:
            return [r.getMessage() for r in caplog.records if r.name == "openmaic.store.replica"]

        before = _failed_reads()
        for _ in range(50):
            assert await replica.read(db, read, lambda v: v == 1) == 1  # the primary answers each
        assert _failed_reads() - before == 50  # every read counted
        (first,) = lines()  # one line for all fifty
        assert first.startswith("a catch-up read on the replica 127.0.0.1/replica failed") and "division" in first
        assert replica.state == "ok"  # a refused read leaves the replica in use

        # Once the period has passed (shortened here rather than waited out), the next refusal reports how many
        # there were since the last line.
        replica.refused_log_s = 0.0
        assert await replica.read(db, read, lambda v: v == 1) == 1
        assert len(lines()) == 2, lines()
        assert lines()[1].startswith("50 catch-up reads on the replica 127.0.0.1/replica failed in the last"), lines()
        assert _failed_reads() - before == 51
